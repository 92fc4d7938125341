package sqlstore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/store/storetest"
)

// TestCronStoreConformance runs store/storetest's suite for cron.Store and
// cron.RunStore on both databases.
func TestCronStoreConformance(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			storetest.TestCronStore(t, func(t *testing.T) cron.Store {
				return mustJobs(t, b.open(t), JobsConfig{})
			})
		})
	}
}

// TestCronHandlers runs Go function jobs over both databases: the job's
// type and args live in its config column.
func TestCronHandlers(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			storetest.TestCronHandlers(t, func(t *testing.T) cron.Store {
				return mustJobs(t, b.open(t), JobsConfig{})
			})
		})
	}
}

// TestSharedStoreConformance runs store/storetest's suite for
// cron.SharedStore on both databases: two stores on one database, as two
// processes.
func TestSharedStoreConformance(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			storetest.TestSharedStore(t, func(t *testing.T) (cron.SharedStore, cron.SharedStore) {
				u := b.url(t)
				return mustJobs(t, mustOpen(t, u), JobsConfig{Instance: "a"}), mustJobs(t, mustOpen(t, u), JobsConfig{Instance: "b"})
			})
		})
	}
}

func mustJobs(t testing.TB, db *DB, cfg JobsConfig) *Jobs {
	t.Helper()
	j, err := db.Jobs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func testJob(id string) cron.Job {
	return cron.Job{ID: id, Name: id, Type: cron.JobTypeHTTP,
		HTTP:     cron.HTTPConfig{Method: "GET", URL: "http://127.0.0.1:1/x"},
		Schedule: cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(time.Second), StartAt: time.Unix(1700000000, 0).UTC()},
		Timeout:  cron.Duration(time.Second), RetryBackoff: cron.Duration(time.Second)}
}

// TestClaimRunOnce races many claims of one slot from two stores on one
// database (two processes' connections): exactly one wins, a run-now run
// is claimed by its id alone, and the claimed run completes through
// AppendRun as one run.
func TestClaimRunOnce(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			u := b.url(t)
			s1, s2 := mustJobs(t, mustOpen(t, u), JobsConfig{Instance: "a"}), mustJobs(t, mustOpen(t, u), JobsConfig{Instance: "b"})
			if err := s1.Save(ctx, testJob("j")); err != nil {
				t.Fatal(err)
			}
			at := time.Unix(1800000000, 5000).UTC()
			var wins, errs int
			var mu sync.Mutex
			var wg sync.WaitGroup
			for i := range 8 {
				s := s1
				if i%2 == 1 {
					s = s2
				}
				wg.Go(func() {
					ok, err := s.ClaimRun(ctx, cron.Run{ID: "run-" + string(rune('a'+i)), JobID: "j", ScheduledAt: at, TriggeredAt: at}, true)
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						errs++
						t.Errorf("ClaimRun: %v", err)
					}
					if ok {
						wins++
					}
				})
			}
			wg.Wait()
			if wins != 1 || errs != 0 {
				t.Fatalf("claims of one slot won %d times (%d errors), want exactly 1", wins, errs)
			}
			// Run-now runs at the same time are claimed by id.
			for _, id := range []string{"now-1", "now-2"} {
				if ok, err := s2.ClaimRun(ctx, cron.Run{ID: id, JobID: "j", ScheduledAt: at, TriggeredAt: at}, false); !ok || err != nil {
					t.Errorf("ClaimRun(run-now %s) = %v, %v; want true, nil", id, ok, err)
				}
			}
			if ok, err := s1.ClaimRun(ctx, cron.Run{ID: "now-1", JobID: "j", ScheduledAt: at}, false); ok || err != nil {
				t.Errorf("second ClaimRun(now-1) = %v, %v; want false, nil", ok, err)
			}
			if _, err := s1.ClaimRun(ctx, cron.Run{ID: "x", JobID: "nope", ScheduledAt: at}, true); !errors.Is(err, cron.ErrNotFound) {
				t.Errorf("ClaimRun(unknown job) error = %v, want cron.ErrNotFound", err)
			}
			// A skipped or missed record of the claimed slot is dropped.
			if err := s2.AppendRun(ctx, cron.Run{ID: "skip", JobID: "j", ScheduledAt: at, FinishedAt: at, Status: cron.StatusSkipped}); err != nil {
				t.Fatal(err)
			}
			runs, err := s1.Runs(ctx, "j", 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != 0 {
				t.Errorf("Runs before any finished = %v, want none (claimed runs in flight are not listed)", runs)
			}
		})
	}
}

// TestInsertExists: a job id stored by one process is refused to another
// process's Write with create (Add through the API) with cron.ErrExists, even before
// that process has heard of it; Save replaces.
func TestInsertExists(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			u := b.url(t)
			s1, s2 := mustJobs(t, mustOpen(t, u), JobsConfig{}), mustJobs(t, mustOpen(t, u), JobsConfig{})
			if _, err := s1.Write(ctx, testJob("x"), 0); err != nil {
				t.Fatal(err)
			}
			j := testJob("x")
			j.Name = "other"
			if _, err := s2.Write(ctx, j, 0); !errors.Is(err, cron.ErrExists) {
				t.Errorf("second Insert error = %v, want cron.ErrExists", err)
			}
			r, err := cron.New(s2, cron.ExecutorFunc(func(context.Context, *cron.Job, cron.RunInfo) cron.Result { return cron.Result{} }), cron.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Add(ctx, j); !errors.Is(err, cron.ErrExists) {
				t.Errorf("Runner.Add of an id another process stored: %v, want cron.ErrExists", err)
			}
			if err := s2.Save(ctx, j); err != nil {
				t.Fatal(err)
			}
			got, _, err := s1.Read(ctx, "x")
			if err != nil || got.Name != "other" {
				t.Errorf("after Save: %q, %v; want the replaced job", got.Name, err)
			}
		})
	}
}
