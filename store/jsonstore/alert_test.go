package jsonstore

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/cron"
)

// TestAlertsOnceAcrossRestart: the failures in a row and the last alert
// are kept in the JSON file, so that a runner started again on it sends
// no second failing alert for the same streak: failing at the first
// failure (before the restart), failing_streak at the third (after).
func TestAlertsOnceAcrossRestart(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a cron.Alert
		_ = json.NewDecoder(r.Body).Decode(&a)
		mu.Lock()
		got = append(got, a.Transition)
		mu.Unlock()
	}))
	defer sink.Close()
	fail := cron.Func(func(context.Context) error { return errors.New("boom") })
	dir := t.TempDir()
	ctx := context.Background()
	// session runs the job n times through run-now on a runner over the
	// store in dir, then stops it (its alerts are delivered by then).
	session := func(add bool, n int) {
		t.Helper()
		s := open(t, dir, Config{})
		r, err := cron.New(s, nil, cron.Config{Handlers: map[string]cron.Handler{"fail": fail}})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Load(ctx); err != nil {
			t.Fatal(err)
		}
		if add {
			j := cron.Job{ID: "f", Type: "fail", Schedule: cron.Every(time.Hour), Alert: &cron.AlertConfig{URL: sink.URL, After: 3}}
			if _, err := r.Add(ctx, j); err != nil {
				t.Fatal(err)
			}
		}
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- r.Run(runCtx) }()
		// The failures in a row go on from those the file kept.
		j, _ := r.Get(ctx, "f")
		for i := range n {
			if _, err := r.RunNow(ctx, "f", cron.RunOptions{Force: true}); err != nil {
				t.Fatal(err)
			}
			want := j.Failures + i + 1
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				j, _ := r.Get(ctx, "f")
				if j.Failures == want {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after run-now %d: %d failures in a row, want %d", i+1, j.Failures, want)
				}
			}
		}
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	session(true, 1)
	session(false, 2)
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{cron.AlertFailing, cron.AlertFailingStreak}, got); diff != "" {
		t.Errorf("alerts across a restart (-want +got):\n%s", diff)
	}
	j := load(t, open(t, dir, Config{}))[0]
	if j.Failures != 3 || j.LastAlert != cron.AlertFailingStreak {
		t.Errorf("stored: failures %d, last_alert %q; want 3, failing_streak", j.Failures, j.LastAlert)
	}
}
