package cron

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRunRingLimitChanges: a job's history keeps its newest runs, in
// order, when its limit is lowered or raised between runs.
func TestRunRingLimitChanges(t *testing.T) {
	var g runRing
	add := func(limit int, ids ...int) {
		for _, i := range ids {
			g.add(Run{ID: fmt.Sprint(i)}, limit)
		}
	}
	ids := func() []string {
		var out []string
		for _, r := range g.newest(0) {
			out = append(out, r.ID)
		}
		return out
	}
	add(3, 1, 2, 3, 4, 5) // full, wrapped
	if diff := cmp.Diff([]string{"5", "4", "3"}, ids()); diff != "" {
		t.Errorf("limit 3 (-want +got):\n%s", diff)
	}
	add(5, 6, 7, 8) // raised while wrapped
	if diff := cmp.Diff([]string{"8", "7", "6", "5", "4"}, ids()); diff != "" {
		t.Errorf("raised to 5 (-want +got):\n%s", diff)
	}
	add(2, 9) // lowered
	if diff := cmp.Diff([]string{"9", "8"}, ids()); diff != "" {
		t.Errorf("lowered to 2 (-want +got):\n%s", diff)
	}
	add(1, 10)
	if diff := cmp.Diff([]string{"10"}, ids()); diff != "" {
		t.Errorf("lowered to 1 (-want +got):\n%s", diff)
	}
}

// TestKeepRunsWithoutStore: a runner without a store keeps a job's
// keep_runs runs of it, and Config.RunLimit runs of a job without one.
func TestKeepRunsWithoutStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newTestRunner(t, nil, &fakeExec{}, Config{RunLimit: 4})
		ctx := context.Background()
		for _, j := range []Job{
			httpJob("kept", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Second)}),
			httpJob("default", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Second)}),
		} {
			if j.ID == "kept" {
				j.KeepRuns = 2
			}
			if _, err := r.Add(ctx, j); err != nil {
				t.Fatal(err)
			}
		}
		stop := start(t, r)
		time.Sleep(10500 * time.Millisecond)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		for id, want := range map[string]int{"kept": 2, "default": 4} {
			if runs, err := r.Runs(ctx, id, 0); err != nil || len(runs) != want {
				t.Errorf("%s: %d runs kept, %v; want %d", id, len(runs), err, want)
			}
		}
	})
}
