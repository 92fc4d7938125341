package scheduler_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ksana-dev/ksana/fsm"
	"github.com/ksana-dev/ksana/scheduler"
)

func TestMemJobsTTL(t *testing.T) { synctest.Test(t, testMemJobsTTL) }

func testMemJobsTTL(t *testing.T) {
	ctx := context.Background()
	s, err := scheduler.NewMemJobs(scheduler.MemJobsConfig{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.Open(ctx, "j", scheduler.JobSpec{RequestID: "r", SessionID: "s"}, "", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Minute)
	if _, err := s.ApplyJob(ctx, "j", fsm.Dispatch, 1, "n"); err != nil { // renews the TTL
		t.Fatal(err)
	}
	time.Sleep(50 * time.Minute)
	rec, err := s.Job(ctx, "j")
	if err != nil {
		t.Fatalf("Job 50m after a change, TTL 1h: %v", err)
	}
	if want := time.Now().Add(-50 * time.Minute); !rec.UpdatedAt.Equal(want) {
		t.Errorf("UpdatedAt = %v, want %v", rec.UpdatedAt, want)
	}
	time.Sleep(10 * time.Minute)
	if _, err := s.Job(ctx, "j"); !errors.Is(err, scheduler.ErrJobNotFound) {
		t.Errorf("Job after the TTL: error = %v, want ErrJobNotFound", err)
	}
}

func TestNewMemJobsBadConfig(t *testing.T) {
	for _, cfg := range []scheduler.MemJobsConfig{{MaxAttempts: -1}, {TTL: -time.Second}} {
		if _, err := scheduler.NewMemJobs(cfg); err == nil {
			t.Errorf("NewMemJobs(%+v): no error", cfg)
		}
	}
}
