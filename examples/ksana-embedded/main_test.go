package main

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/ksana-dev/ksana/cron"
)

// TestRun runs the example end to end: a job created through the mounted
// API calls back at least three times, its runs are listed as successful,
// the pause answer and jobs.json both hold the job disabled, and the runner
// stops cleanly. Every wait in run is bounded, so a broken API fails here
// instead of hanging.
func TestRun(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	sum, err := run(&out)
	defer func() {
		if t.Failed() {
			t.Logf("output:\n%s", out.String())
		}
	}()
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if sum.Hooks < 3 {
		t.Errorf("/hook called %d times, want at least 3", sum.Hooks)
	}
	if len(sum.Runs) < 3 {
		t.Errorf("runs listed = %d, want at least 3", len(sum.Runs))
	}
	for _, r := range sum.Runs {
		if r.JobID != "hook" || r.Status != cron.StatusSuccess || r.Attempts != 1 || r.HTTPStatus != http.StatusOK {
			t.Errorf("run %+v: want job hook, success in 1 attempt, http 200", r)
		}
	}
	if sum.Paused.ID != "hook" || !sum.Paused.Paused {
		t.Errorf("pause answered job %q enabled=%v, want hook disabled", sum.Paused.ID, !sum.Paused.Paused)
	}
	if sum.StoredJobs != 1 || !sum.StoredPaused {
		t.Errorf("jobs.json holds %d jobs, hook paused: %v; want 1, true", sum.StoredJobs, sum.StoredPaused)
	}
}
