package proc

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestCheck: Check gives Start's verdict without running or logging
// anything.
func TestCheck(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	var logs syncBuffer
	r := newRunner(t, clock, func(c *Config) {
		c.Trusted = regexp.MustCompile(`sleep`)
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	tests := []struct {
		spec Spec
		want error // the sentinel, nil for accepted
	}{
		{Spec{ID: "a", Command: "sleep"}, nil},
		{Spec{ID: "b", Command: "/bin/sleep"}, ErrUntrusted},
		{Spec{ID: "c", Command: "sleeper"}, ErrUntrusted},
		{Spec{ID: "", Command: "sleep"}, ErrInvalidSpec},
		{Spec{ID: "d"}, ErrInvalidSpec},
	}
	for _, tt := range tests {
		err := r.Check(tt.spec)
		if (tt.want == nil) != (err == nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
			t.Errorf("Check(%+v) = %v, want %v", tt.spec, err, tt.want)
		}
	}
	if got := r.Running(); len(got) != 0 {
		t.Errorf("Running after Check = %v, want none", got)
	}
	if logs.String() != "" {
		t.Errorf("Check logged:\n%s", logs.String())
	}
	want := `deployment "b": command "/bin/sleep" refused: it does not match "sleep"`
	if err := r.Check(Spec{ID: "b", Command: "/bin/sleep"}); err == nil || err.Error() != want {
		t.Errorf("Check error = %v, want %q", err, want)
	}
}

// TestProcessLastExit: a process waiting to be restarted reports how its
// last run ended, when, and when it starts again.
func TestProcessLastExit(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	r := newRunner(t, clock, func(c *Config) { c.MinBackoff, c.MaxBackoff = 2*time.Second, 4*time.Second })
	if err := r.Start(context.Background(), Spec{ID: "crash", Command: "sh", Args: []string{"-c", "exit 3"}}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	req := clock.next(t) // waiting for the first restart
	now := clock.Now()
	want := []Process{{ID: "crash", LastExit: "exit status 3", LastExitAt: now, NextStart: now.Add(2 * time.Second)}}
	if diff := cmp.Diff(want, r.Processes()); diff != "" {
		t.Errorf("Processes while waiting (-want +got):\n%s", diff)
	}
	req.fire <- time.Time{}
	clock.next(t) // waiting for the second restart
	got := r.Processes()
	if len(got) != 1 || got[0].Restarts != 1 || got[0].LastExit != "exit status 3" || got[0].NextStart != now.Add(4*time.Second) {
		t.Errorf("Processes after one restart = %+v, want restarts 1, exit status 3, next start in 4s", got)
	}
}
