package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/cron"
)

// TestCronHandlers runs Go function jobs on a [cron.Runner] over the
// stores that open returns (a fresh, empty store each): a job run by its
// handler on schedule with its args, a run retried, one timed out, one
// cancelled when the runner stops, and a stored job whose type has no
// handler when the runner starts (kept, reported, its runs failed with
// the reason). After each runner stops, the store holds the jobs with
// their type and args, their bookkeeping and, when it is a
// [cron.RunStore], their runs.
//
// It runs on the wall clock, with intervals of tens of milliseconds;
// every wait is bounded and waits for a condition.
func TestCronHandlers(t *testing.T, open func(t *testing.T) cron.Store) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(t *testing.T, s cron.Store)
	}{
		{"Scheduled", handlersScheduled},
		{"RetriedAndTimedOut", handlersRetriedAndTimedOut},
		{"CancelledAtStop", handlersCancelledAtStop},
		{"NoHandlerAtStart", handlersNoHandlerAtStart},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open(t)) })
	}
}

// handlerRunner starts a runner over s with hs, and returns it and the
// function that stops it and returns Run's error.
func handlerRunner(t *testing.T, s cron.Store, cfg cron.Config) (*cron.Runner, func() error) {
	t.Helper()
	cfg.MinInterval = -1
	r, err := cron.New(s, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			runErr = <-errc
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return r, stop
}

// waitUntil polls cond until it holds, for up to 20s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// storedJob returns job id as the store holds it.
func storedJob(t *testing.T, s cron.Store, id string) cron.Job {
	t.Helper()
	for _, j := range cronLoad(t, s) {
		if j.ID == id {
			return j
		}
	}
	t.Fatalf("the store does not hold job %q", id)
	return cron.Job{}
}

// storedRuns returns the runs the store keeps of job id, newest first, or
// nil when it keeps none.
func storedRuns(t *testing.T, s cron.Store, id string) []cron.Run {
	t.Helper()
	rs, ok := s.(cron.RunStore)
	if !ok {
		return nil
	}
	runs, err := rs.Runs(context.Background(), id, 0)
	if err != nil {
		t.Fatalf("Runs(%s): %v", id, err)
	}
	return runs
}

func handlersScheduled(t *testing.T, s cron.Store) {
	type args struct {
		Team string `json:"team"`
	}
	var mu sync.Mutex
	var calls []cron.Call
	var teams []string
	r, stop := handlerRunner(t, s, cron.Config{Handlers: map[string]cron.Handler{
		"report": cron.Typed(func(ctx context.Context, a args, c *cron.Call) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, *c)
			teams = append(teams, a.Team)
			return nil
		}),
	}})
	ctx := context.Background()
	if _, err := r.Add(ctx, cron.Job{ID: "rep", Name: "report", Type: "report",
		Args: json.RawMessage(`{"team": "core"}`), Schedule: cron.Every(50 * time.Millisecond)}); err != nil {
		t.Fatalf("Add: %v", err)
	}
	waitUntil(t, "two runs", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) >= 2
	})
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, c := range calls {
		if c.JobID != "rep" || c.Attempt != 1 || c.Job.Type != "report" || teams[i] != "core" {
			t.Errorf("call %d: job %q attempt %d type %q team %q; want rep, 1, report, core", i, c.JobID, c.Attempt, c.Job.Type, teams[i])
		}
		if i > 0 && !c.ScheduledAt.After(calls[i-1].ScheduledAt) {
			t.Errorf("call %d scheduled at %v, not after call %d's %v", i, c.ScheduledAt, i-1, calls[i-1].ScheduledAt)
		}
	}
	j := storedJob(t, s, "rep")
	if j.Type != "report" || string(j.Args) != `{"team":"core"}` || j.LastStatus != cron.StatusSuccess || j.LastRunAt.IsZero() {
		t.Errorf("stored: type %q args %s last_status %q last_run_at %v; want report, the compact args, success, set",
			j.Type, j.Args, j.LastStatus, j.LastRunAt)
	}
	// At a 50 ms interval on a loaded machine, slots that came while a
	// call was in flight are stored too, as skipped; two calls were made.
	if runs := storedRuns(t, s, "rep"); runs != nil {
		ok := 0
		for _, r := range runs {
			if r.Status == cron.StatusSuccess {
				ok++
			}
		}
		if ok < 2 {
			t.Errorf("stored runs %+v, want at least 2 successes", runs)
		}
	}
}

func handlersRetriedAndTimedOut(t *testing.T, s cron.Store) {
	r, stop := handlerRunner(t, s, cron.Config{Handlers: map[string]cron.Handler{
		"flaky": cron.HandlerFunc(func(ctx context.Context, c *cron.Call) error {
			if c.Attempt == 1 {
				return errors.New("first attempt fails")
			}
			return nil
		}),
		"slow": cron.HandlerFunc(func(ctx context.Context, c *cron.Call) error {
			<-ctx.Done()
			return ctx.Err()
		}),
	}})
	ctx := context.Background()
	for _, j := range []cron.Job{
		{ID: "flaky", Type: "flaky", Schedule: cron.Every(time.Hour), MaxRetries: 2, RetryBackoff: cron.Duration(10 * time.Millisecond)},
		{ID: "slow", Type: "slow", Schedule: cron.Every(time.Hour), MaxRetries: 1, RetryBackoff: cron.Duration(10 * time.Millisecond),
			Timeout: cron.Duration(30 * time.Millisecond)},
	} {
		if _, err := r.Add(ctx, j); err != nil {
			t.Fatalf("Add(%s): %v", j.ID, err)
		}
		if _, err := r.RunNow(ctx, j.ID, cron.RunOptions{Force: true}); err != nil {
			t.Fatalf("RunNow(%s): %v", j.ID, err)
		}
	}
	waitUntil(t, "both runs to end", func() bool {
		a, _ := r.Get(ctx, "flaky")
		b, _ := r.Get(ctx, "slow")
		return a.LastStatus != "" && b.LastStatus != ""
	})
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, tt := range []struct {
		id       string
		status   cron.Status
		attempts int
		err      string
	}{
		{"flaky", cron.StatusSuccess, 2, ""},
		{"slow", cron.StatusTimeout, 2, "timeout after 30ms"},
	} {
		j := storedJob(t, s, tt.id)
		if j.LastStatus != tt.status || j.LastError != tt.err {
			t.Errorf("stored %s: last_status %q last_error %q, want %q %q", tt.id, j.LastStatus, j.LastError, tt.status, tt.err)
		}
		if runs := storedRuns(t, s, tt.id); runs != nil && (len(runs) != 1 || runs[0].Status != tt.status || runs[0].Attempts != tt.attempts) {
			t.Errorf("stored runs of %s: %+v, want one %s run of %d attempts", tt.id, runs, tt.status, tt.attempts)
		}
	}
}

func handlersCancelledAtStop(t *testing.T, s cron.Store) {
	started := make(chan struct{}, 1)
	r, stop := handlerRunner(t, s, cron.Config{DrainTimeout: 20 * time.Millisecond, Handlers: map[string]cron.Handler{
		"block": cron.HandlerFunc(func(ctx context.Context, c *cron.Call) error {
			started <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}),
	}})
	ctx := context.Background()
	if _, err := r.Add(ctx, cron.Job{ID: "block", Type: "block", Schedule: cron.Every(time.Hour),
		Timeout: cron.Duration(time.Hour), MaxRetries: 3}); err != nil {
		t.Fatalf("Add: %v", err)
	}
	if _, err := r.RunNow(ctx, "block", cron.RunOptions{Force: true}); err != nil {
		t.Fatalf("RunNow: %v", err)
	}
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the handler was not called")
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	j := storedJob(t, s, "block")
	if j.LastStatus != cron.StatusFailed || j.LastError != "run cancelled" {
		t.Errorf("stored: last_status %q last_error %q, want failed, run cancelled", j.LastStatus, j.LastError)
	}
	if runs := storedRuns(t, s, "block"); runs != nil && (len(runs) != 1 || runs[0].Attempts != 1 || runs[0].Error != "run cancelled") {
		t.Errorf("stored runs %+v, want one cancelled run of one attempt", runs)
	}
}

func handlersNoHandlerAtStart(t *testing.T, s cron.Store) {
	ctx := context.Background()
	orphan := cron.Job{ID: "orphan", Name: "gone", Type: "gone", Args: json.RawMessage(`[1,"two"]`),
		Schedule: cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(time.Hour), StartAt: cronTime},
		Timeout:  cron.Duration(time.Second), RetryBackoff: cron.Duration(time.Second)}
	cronSave(t, s, orphan)
	r, stop := handlerRunner(t, s, cron.Config{})
	waitUntil(t, "the store to load", func() bool { return r.Len() == 1 })
	if diff := cmp.Diff(map[string]int{"gone": 1}, r.Unhandled()); diff != "" {
		t.Errorf("Unhandled (-want +got):\n%s", diff)
	}
	if _, err := r.RunNow(ctx, "orphan", cron.RunOptions{Force: true}); err != nil {
		t.Fatalf("RunNow: %v", err)
	}
	waitUntil(t, "the run to end", func() bool {
		j, _ := r.Get(ctx, "orphan")
		return j.LastStatus != ""
	})
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	j := storedJob(t, s, "orphan")
	if j.Type != "gone" || string(j.Args) != `[1,"two"]` || j.LastStatus != cron.StatusFailed ||
		!strings.Contains(j.LastError, `no handler for type "gone"`) {
		t.Errorf("stored: type %q args %s last_status %q last_error %q; want the job kept, its run failed naming the missing handler",
			j.Type, j.Args, j.LastStatus, j.LastError)
	}
	if runs := storedRuns(t, s, "orphan"); runs != nil && (len(runs) != 1 || runs[0].Status != cron.StatusFailed) {
		t.Errorf("stored runs %+v, want one failed run", runs)
	}
}
