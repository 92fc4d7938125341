package jsonstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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

// TestAlertOutboxDurable: the alerts in the outbox, their attempts and
// the dead ones survive a reopen of the store, secrets included, and
// those delivered stay gone; a file compacted keeps them all.
func TestAlertOutboxDurable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	t0 := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	s := open(t, dir, Config{})
	var ds []cron.AlertDelivery
	for i := range 600 {
		d := cron.AlertDelivery{ID: fmt.Sprintf("d%03d", i), URL: "https://hooks.example/", Secret: "s3cret",
			CreatedAt: t0.Add(time.Duration(i) * time.Second), NextAt: t0}
		d.Alert.Transition = cron.AlertFailing
		d.Alert.Job.ID = "j"
		ds = append(ds, d)
	}
	if err := s.EnqueueAlerts(ctx, ds); err != nil {
		t.Fatal(err)
	}
	for i := range 599 { // enough lines to compact the file
		d := ds[i]
		switch {
		case i == 1:
			d.Attempts, d.LastError, d.Dead = 9, "webhook answered 410", true
			if err := s.SettleAlert(ctx, d, false); err != nil {
				t.Fatal(err)
			}
		case i == 2:
			d.Attempts, d.LastError, d.NextAt = 2, "webhook answered 503", t0.Add(time.Hour)
			if err := s.SettleAlert(ctx, d, false); err != nil {
				t.Fatal(err)
			}
		case i > 2:
			if err := s.SettleAlert(ctx, d, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, Config{})
	defer s.Close()
	pending, n, err := s.ListAlerts(ctx, false, 10)
	if err != nil || n != 3 {
		t.Fatalf("pending after reopen = %d, %v; want 3 (d000, d002, d599): %v", n, err, pending)
	}
	if pending[1].ID != "d002" || pending[1].Attempts != 2 || !pending[1].NextAt.Equal(t0.Add(time.Hour)) || pending[1].Secret != "s3cret" {
		t.Errorf("d002 after reopen = %+v; want 2 attempts, next in an hour, its secret", pending[1])
	}
	dead, n, err := s.ListAlerts(ctx, true, 10)
	if err != nil || n != 1 || dead[0].ID != "d001" || dead[0].LastError != "webhook answered 410" {
		t.Errorf("dead after reopen = %+v, %v; want d001", dead, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, AlertsFile))
	if err != nil {
		t.Fatal(err)
	}
	if lines := bytes.Count(data, []byte("\n")); lines > 1024 {
		t.Errorf("%s has %d lines for 4 alerts: not compacted", AlertsFile, lines)
	}
}
