package jsonstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/store/jsonstore"
)

// Open a store, save a job durably, and find it again after a reopen.
func Example() {
	dir, err := os.MkdirTemp("", "ksana-data")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	s, err := jsonstore.New(dir, jsonstore.Config{})
	if err != nil {
		panic(err)
	}
	job := cron.Job{
		ID: "ping", Name: "ping service",
		HTTP:     cron.HTTPConfig{URL: "https://example.com/ping"},
		Schedule: cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(5 * time.Minute), StartAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
	// Prepare fills the defaults (type, method, timeout, retry_backoff) and
	// checks the job, as a Runner does before it saves one.
	if _, err := job.Prepare(time.Now(), cron.Rules{}); err != nil {
		panic(err)
	}
	// Save returns once a rewrite of jobs.json holding the job is on disk.
	if err := s.Save(ctx, job); err != nil {
		panic(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, jsonstore.JobsFile))
	fmt.Println(strings.Split(string(data), "\n")[1])
	if err := s.Close(); err != nil {
		panic(err)
	}

	s, err = jsonstore.New(dir, jsonstore.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	jobs, _ := s.Load(ctx)
	fmt.Println(len(jobs), jobs[0].Name, jobs[0].Schedule.Every)
	// Output:
	//   "version": 1,
	// 1 ping service 5m
}
