package sqlstore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/store/sqlstore"
)

// Two processes share one database's cron jobs: a job created through
// one runner's store is loaded by the other, and when both reach the same
// slot only the first claim of its run row wins, so the slot is called
// once.
func ExampleJobs_ClaimRun() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sqlstore-jobs-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	url := "sqlite:" + filepath.Join(dir, "ksana.db")

	var stores []*sqlstore.Jobs
	for _, instance := range []string{"ksana-1", "ksana-2"} {
		db, err := sqlstore.Open(ctx, url)
		if err != nil {
			log.Fatal(err)
		}
		defer db.Close()
		jobs, err := db.Jobs(sqlstore.JobsConfig{Instance: instance})
		if err != nil {
			log.Fatal(err)
		}
		stores = append(stores, jobs)
	}
	runner, err := cron.New(stores[0], cron.NewHTTPExecutor(cron.HTTPExecutorConfig{}), cron.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := runner.Add(ctx, cron.Job{ID: "report", HTTP: cron.HTTPConfig{URL: "http://127.0.0.1:8000/"},
		Schedule: cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(time.Minute)}}); err != nil {
		log.Fatal(err)
	}
	loaded, err := stores[1].Load(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the other process loads:", loaded[0].ID, loaded[0].Schedule.Every)

	slot := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	for i, s := range stores {
		ok, err := s.ClaimRun(ctx, cron.Run{ID: fmt.Sprintf("run-%d", i), JobID: "report", ScheduledAt: slot, TriggeredAt: slot}, true)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("ksana-%d claims the 09:00 slot: %v\n", i+1, ok)
	}
	// Output:
	// the other process loads: report 1m
	// ksana-1 claims the 09:00 slot: true
	// ksana-2 claims the 09:00 slot: false
}
