package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

func main() {
	duration := flag.Duration("duration", 10*time.Second, "how long to run")
	verbose := flag.Bool("v", false, "log the runner's records to stderr")
	flag.Parse()
	if err := run(*duration, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "every:", err)
		os.Exit(1)
	}
}

func run(duration time.Duration, verbose bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, duration)
	defer cancel()

	began := time.Now()
	since := func() string { return fmt.Sprintf("%6.3fs", time.Since(began).Seconds()) }

	// The service the jobs call back.
	var tried sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Printf("%s  callback  %-6s %s job=%s run=%.8s scheduled=%s %s\n", since(), r.Method, r.URL.Path,
			r.Header.Get(cron.HeaderJobID), r.Header.Get(cron.HeaderRunID),
			r.Header.Get(cron.HeaderScheduledAt), body)
		// The first attempt of each flaky run fails; its retry (same run id) succeeds.
		if _, seen := tried.LoadOrStore(r.Header.Get(cron.HeaderRunID), true); r.URL.Path == "/flaky" && !seen {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	logger := slog.New(slog.DiscardHandler)
	if verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	observer := cron.ObserverFunc(func(r cron.Run) {
		fmt.Printf("%s  observed  %-8s job=%s attempts=%d lag=%s latency=%s %s\n", since(), r.Status, r.JobID,
			r.Attempts, r.Lag().Round(time.Microsecond), r.Latency.D().Round(time.Microsecond), r.Error)
	})
	exec := cron.NewHTTPExecutor(cron.HTTPExecutorConfig{Logger: logger})
	runner, err := cron.New(nil, exec, cron.Config{Observer: observer, Logger: logger}) // no store: jobs live in the runner
	if err != nil {
		return err
	}

	now := time.Now()
	jobs := []cron.Job{
		{ID: "heartbeat", Name: "every 2s, jitter 500ms",
			HTTP:     cron.HTTPConfig{Method: "POST", URL: srv.URL + "/heartbeat", Body: `{"job":"{{job_id}}","run":"{{run_id}}"}`},
			Schedule: cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(2 * time.Second), Jitter: cron.Duration(500 * time.Millisecond)}},
		{ID: "once", Name: "once, 3s from now",
			HTTP:     cron.HTTPConfig{URL: srv.URL + "/once"},
			Schedule: cron.ScheduleSpec{Kind: cron.KindOnce, RunAt: now.Add(3 * time.Second)}},
		{ID: "flaky", Name: "once, 5s from now, 503 first, then retried",
			HTTP:       cron.HTTPConfig{URL: srv.URL + "/flaky"},
			Schedule:   cron.ScheduleSpec{Kind: cron.KindOnce, RunAt: now.Add(5 * time.Second)},
			MaxRetries: 1, RetryBackoff: cron.Duration(time.Second), Timeout: cron.Duration(2 * time.Second)},
		{ID: "cron", Name: "cron */3 * * * * *",
			HTTP:     cron.HTTPConfig{Method: "PUT", URL: srv.URL + "/cron"},
			Schedule: cron.ScheduleSpec{Kind: cron.KindCron, Cron: "*/3 * * * * *"}},
	}
	for _, j := range jobs {
		added, err := runner.Add(ctx, j)
		if err != nil {
			return fmt.Errorf("add %s: %w", j.ID, err)
		}
		fmt.Printf("%s  scheduled %-9s %-42s next_run_at=%s\n", since(), added.ID, added.Name, added.NextRunAt.Format(time.RFC3339Nano))
	}
	fmt.Printf("%s  running for %s (Ctrl-C stops)\n", since(), duration)
	if err := runner.Run(ctx); err != nil {
		return err
	}
	fmt.Printf("%s  stopped\n", since())
	listed, _, err := runner.List(ctx, cron.JobQuery{}) // no store: nothing to read
	if err != nil {
		return err
	}
	for _, j := range listed {
		last, status := "-", string(j.LastStatus)
		if !j.LastRunAt.IsZero() {
			last = j.LastRunAt.Format(time.RFC3339Nano)
		}
		if status == "" {
			status = "-"
		}
		fmt.Printf("          %-9s last_status=%-8s last_run_at=%s\n", j.ID, status, last)
	}
	return nil
}
