package cron_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// Example schedules jobs on a runner and reads them back: ids, schedules
// and next_run_at are set by Add.
func Example() {
	ctx := context.Background()
	r, err := cron.New(nil, cron.NewHTTPExecutor(cron.HTTPExecutorConfig{}), cron.Config{})
	if err != nil {
		panic(err)
	}
	start := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	jobs := []cron.Job{
		{ID: "ping", Name: "ping service",
			HTTP:     cron.HTTPConfig{URL: "https://example.com/ping"},
			Schedule: cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(5 * time.Minute), StartAt: start}},
		{ID: "notify", Name: "notify order",
			HTTP:       cron.HTTPConfig{Method: "POST", URL: "https://example.com/notify", Body: `{"run_id":"{{run_id}}"}`},
			Schedule:   cron.ScheduleSpec{Kind: cron.KindOnce, RunAt: start.Add(90 * time.Minute)},
			MaxRetries: 3},
	}
	for _, j := range jobs {
		if _, err := r.Add(ctx, j); err != nil {
			panic(err)
		}
	}
	if _, err := r.Add(ctx, cron.Job{ID: "bad", HTTP: cron.HTTPConfig{URL: "ftp://example.com"},
		Schedule: cron.ScheduleSpec{Kind: cron.KindOnce, RunAt: start}}); err != nil {
		fmt.Println(err)
	}
	listed, _, err := r.List(ctx, cron.JobQuery{})
	if err != nil {
		panic(err)
	}
	for _, j := range listed {
		fmt.Printf("%s %s %s timeout=%s next=%s\n", j.ID, j.Schedule.Kind, j.HTTP.Method, j.Timeout, j.NextRunAt.Format(time.RFC3339))
	}
	// Output:
	// cron: invalid job: http.url: scheme must be http or https, got "ftp"
	// ping every GET timeout=10s next=2030-01-01T09:00:00Z
	// notify once POST timeout=10s next=2030-01-01T10:30:00Z
}

// Example_run runs a runner against a local callback server until a once
// job has fired, and prints what the server and the observer saw.
func Example_run() {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		got <- req.Header.Get(cron.HeaderJobID)
	}))
	defer srv.Close()

	done := make(chan cron.Run, 1)
	r, err := cron.New(nil, cron.NewHTTPExecutor(cron.HTTPExecutorConfig{}), cron.Config{
		Observer: cron.ObserverFunc(func(run cron.Run) { done <- run }),
		// However slow the machine, the job runs rather than being missed.
		MisfireTolerance: time.Minute,
	})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := r.Add(ctx, cron.Job{ID: "hello", HTTP: cron.HTTPConfig{URL: srv.URL},
		Schedule: cron.ScheduleSpec{Kind: cron.KindOnce, RunAt: time.Now().Add(50 * time.Millisecond)}}); err != nil {
		panic(err)
	}
	stopped := make(chan error)
	go func() { stopped <- r.Run(ctx) }()

	select {
	case id := <-got:
		fmt.Println("callback for", id)
	case <-time.After(time.Minute):
		fmt.Println("no callback")
	}
	run := <-done
	fmt.Println("run", run.Status, "after", run.Attempts, "attempt")
	cancel()
	fmt.Println("Run returned", <-stopped)
	j, _ := r.Get(ctx, "hello")
	fmt.Println("last_status", j.LastStatus, "next_run_at set:", !j.NextRunAt.IsZero())
	// Output:
	// callback for hello
	// run success after 1 attempt
	// Run returned <nil>
	// last_status success next_run_at set: false
}

// ExampleRunner_Next lists when a job will fire, paused or not, and
// checks a schedule before it is used.
func ExampleRunner_Next() {
	r, _ := cron.New(nil, nil, cron.Config{})
	ctx := context.Background()
	every := cron.Every(6 * time.Hour)
	every.StartAt = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := r.Add(ctx, cron.Job{ID: "backup", HTTP: cron.HTTPConfig{URL: "https://api.example.com/backup"}, Schedule: every}); err != nil {
		fmt.Println(err)
		return
	}
	_, _ = r.Pause(ctx, "backup", time.Time{})
	times, job, err := r.Next(ctx, "backup", 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("paused:", job.Paused)
	for _, t := range times {
		fmt.Println(t.Format(time.RFC3339))
	}

	// A schedule checked as Add would check it, without a job.
	_, err = r.Preview(cron.Every(100*time.Millisecond), "", 3)
	fmt.Println(err)
	// Output:
	// paused: true
	// 2100-01-01T00:00:00Z
	// 2100-01-01T06:00:00Z
	// 2100-01-01T12:00:00Z
	// cron: invalid job: schedule.every: must be at least 1s, got 100ms
}
