package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/cron"
)

// sharedRunner is one process of TestJobsHeldByPartition: a runner over
// its own connection, leases and watcher.
type sharedRunner struct {
	r      *cron.Runner
	leases *Leases
	calls  *atomic.Int64
}

func startSharedRunner(t *testing.T, ctx context.Context, wg *sync.WaitGroup, u, name string, calls *atomic.Int64) *sharedRunner {
	t.Helper()
	db := mustOpen(t, u)
	// A TTL of 3 s: with 1 s, a machine loaded past its cores under the
	// race detector delays the heartbeats past the TTL, the runners take
	// each other for dead, and every partition goes back and forth.
	leases, err := db.Leases(LeasesConfig{Instance: name, TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := db.Jobs(JobsConfig{Instance: name, Leases: leases})
	if err != nil {
		t.Fatal(err)
	}
	exec := cron.ExecutorFunc(func(ctx context.Context, j *cron.Job, info cron.RunInfo) cron.Result {
		calls.Add(1)
		return cron.Result{Status: cron.StatusSuccess, Attempts: 1, HTTPStatus: 200}
	})
	r, err := cron.New(jobs, exec, cron.Config{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := jobs.Watcher(ctx, WatchConfig{Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Load(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { leases.Run(ctx) })
	wg.Go(func() { w.Run(ctx, r) })
	wg.Go(func() { r.Run(ctx) })
	return &sharedRunner{r: r, leases: leases, calls: calls}
}

// TestJobsHeldByPartition: three runners on one database each hold about
// a third of 3,000 jobs (those of the partitions they lease), every job
// is held by exactly one of them, and every call of the API's runner
// methods on a runner that does not hold a job answers as on the one
// that does.
func TestJobsHeldByPartition(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("three runners on PostgreSQL and SQLite")
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			u := b.url(t)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			defer wg.Wait()
			defer cancel()

			seed, err := mustOpen(t, u).Jobs(JobsConfig{})
			if err != nil {
				t.Fatal(err)
			}
			const n = 3000
			far := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
			var all []string
			for i := range n {
				id := fmt.Sprintf("job-%04d", i)
				all = append(all, id)
				j := cron.Job{ID: id, Name: fmt.Sprintf("n%d", i%7), Paused: i%5 == 0, Type: "http",
					HTTP:     cron.HTTPConfig{Method: "GET", URL: "http://127.0.0.1:9/x"},
					Schedule: cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(time.Hour), StartAt: far},
					Timeout:  cron.Duration(time.Second), RetryBackoff: cron.Duration(time.Second)}
				if !j.Paused {
					j.NextRunAt = far
				}
				if _, err := seed.Write(ctx, j, 0); err != nil {
					t.Fatal(err)
				}
			}
			var calls atomic.Int64
			rs := []*sharedRunner{
				startSharedRunner(t, ctx, &wg, u, "a", &calls),
				startSharedRunner(t, ctx, &wg, u, "b", &calls),
				startSharedRunner(t, ctx, &wg, u, "c", &calls),
			}
			holder := map[string]int{}
			began := time.Now()
			third := func(got int) bool { return got >= n/3*85/100 && got <= n/3*115/100 }
			waitFor(t, "every job held exactly once, about a third by each runner", 60*time.Second, func() (bool, string) {
				clear(holder)
				total := 0
				for i, s := range rs {
					if !third(s.r.Len()) {
						return false, fmt.Sprintf("runner %d holds %d", i, s.r.Len())
					}
					for _, id := range s.r.IDs() {
						if _, dup := holder[id]; dup {
							return false, fmt.Sprintf("job %s held twice", id)
						}
						holder[id] = i
						total++
					}
				}
				return total == n && len(holder) == n, fmt.Sprintf("%d held", total)
			})
			t.Logf("every job held once, a third by each runner, %v after they started", time.Since(began).Round(time.Millisecond))
			for i, s := range rs {
				if got := s.r.Len(); !third(got) {
					t.Errorf("runner %d holds %d of %d jobs, want about a third", i, got, n)
				}
				t.Logf("runner %d holds %d jobs, %d partitions", i, s.r.Len(), len(s.leases.Owned()))
			}

			// The lists: every job, in creation order, from every runner,
			// with the same pages.
			page := func(r *cron.Runner, limit int, keep func(*cron.Job) bool) []string {
				var ids []string
				after := ""
				for {
					jobs, more, err := r.List(ctx, cron.JobQuery{After: after, Limit: limit, Keep: keep})
					if err != nil {
						t.Fatalf("Page(%q, %d): %v", after, limit, err)
					}
					for _, j := range jobs {
						ids = append(ids, j.ID)
					}
					if !more || len(jobs) == 0 {
						return ids
					}
					after = jobs[len(jobs)-1].ID
				}
			}
			idsOf := func(jobs []cron.Job) []string {
				var out []string
				for _, j := range jobs {
					out = append(out, j.ID)
				}
				return out
			}
			n3 := func(j *cron.Job) bool { return j.Name == "n3" && !j.Paused }
			var want3 []string
			for i, id := range all {
				if i%7 == 3 && i%5 != 0 {
					want3 = append(want3, id)
				}
			}
			for i, s := range rs {
				if d := cmp.Diff(all, page(s.r, 100, nil)); d != "" {
					t.Errorf("runner %d: pages of 100 (-want +got):\n%s", i, d)
				}
				if d := cmp.Diff(want3, page(s.r, 7, n3)); d != "" {
					t.Errorf("runner %d: filtered pages of 7 (-want +got):\n%s", i, d)
				}
				// The text test of List, over the shared store.
				enabled := func(j *cron.Job) bool { return !j.Paused }
				if jobs, _, err := s.r.List(ctx, cron.JobQuery{Text: "N3", Keep: enabled}); err != nil {
					t.Errorf("runner %d: List: %v", i, err)
				} else if d := cmp.Diff(want3, idsOf(jobs)); d != "" {
					t.Errorf("runner %d: List(Text: \"N3\") (-want +got):\n%s", i, d)
				}
				if e, p, err := s.r.Count(ctx); err != nil || e+p != n || p != n/5 {
					t.Errorf("runner %d: Count = %d enabled, %d paused, %v; want %d, %d", i, e, p, err, n-n/5, n/5)
				}
			}
			if _, _, err := rs[0].r.List(ctx, cron.JobQuery{After: "nope", Limit: 10}); !errors.Is(err, cron.ErrNotFound) {
				t.Errorf("Page after an unknown id: %v, want ErrNotFound", err)
			}

			// Every write through a runner that does not hold the job.
			id := "job-0001"
			own := rs[holder[id]].r
			other := rs[(holder[id]+1)%3].r
			same := func(what string) {
				t.Helper()
				waitFor(t, what+" seen by the owner", 10*time.Second, func() (bool, string) {
					a, errA := own.Get(ctx, id)
					b, errB := other.Get(ctx, id)
					if errA != nil || errB != nil {
						return errors.Is(errA, cron.ErrNotFound) && errors.Is(errB, cron.ErrNotFound), fmt.Sprint(errA, errB)
					}
					d := cmp.Diff(a, b)
					return d == "", d
				})
			}
			same("the job")
			j, err := other.Update(ctx, id, func(j *cron.Job) error {
				j.Name = "renamed"
				j.Schedule.Every = cron.Duration(2 * time.Hour)
				return nil
			})
			if err != nil || j.Name != "renamed" || j.NextRunAt.IsZero() {
				t.Fatalf("Update on a runner not holding the job: %+v, %v", j, err)
			}
			same("the update")
			if _, err := other.Update(ctx, id, func(j *cron.Job) error { j.Schedule.Every = 0; return nil }); !errors.As(err, new(*cron.ValidationError)) {
				t.Errorf("invalid Update on a runner not holding the job: %v, want a ValidationError", err)
			}
			if j, err := other.Pause(ctx, id, time.Time{}); err != nil || !j.Paused || j.LastStatus != cron.StatusPaused || !j.NextRunAt.IsZero() {
				t.Errorf("Pause: %+v, %v", j, err)
			}
			same("the pause")
			if j, err := other.Resume(ctx, id); err != nil || j.Paused || j.NextRunAt.IsZero() {
				t.Errorf("Resume: %+v, %v", j, err)
			}
			same("the resume")
			before := calls.Load()
			tk, err := other.RunNow(ctx, id, cron.RunOptions{Force: true})
			runID := tk.RunID
			if err != nil || runID == "" {
				t.Fatalf("RunNow: %q, %v", runID, err)
			}
			waitFor(t, "the run-now run in the history", 10*time.Second, func() (bool, string) {
				runs, err := own.Runs(ctx, id, 10)
				return err == nil && len(runs) == 1 && runs[0].ID == runID && runs[0].Status == cron.StatusSuccess, fmt.Sprint(runs, err)
			})
			if got := calls.Load() - before; got != 1 {
				t.Errorf("run-now called %d times, want 1", got)
			}
			same("the run-now bookkeeping")
			if j, _ := other.Get(ctx, id); j.LastStatus != cron.StatusSuccess || j.LastRunAt.IsZero() {
				t.Errorf("after run-now: last_status %q, last_run_at %v", j.LastStatus, j.LastRunAt)
			}
			if runs, err := other.Runs(ctx, id, 10); err != nil || len(runs) != 1 {
				t.Errorf("Runs on a runner not holding the job: %v, %v", runs, err)
			}
			if err := other.Remove(ctx, id); err != nil {
				t.Fatalf("Remove: %v", err)
			}
			same("the removal")
			for _, r := range []*cron.Runner{own, other} {
				if _, err := r.Get(ctx, id); !errors.Is(err, cron.ErrNotFound) {
					t.Errorf("Get after Remove: %v", err)
				}
				if err := r.Remove(ctx, id); !errors.Is(err, cron.ErrNotFound) {
					t.Errorf("second Remove: %v", err)
				}
				if _, err := r.Update(ctx, id, func(*cron.Job) error { return nil }); !errors.Is(err, cron.ErrNotFound) {
					t.Errorf("Update after Remove: %v", err)
				}
				if _, err := r.Pause(ctx, id, time.Time{}); !errors.Is(err, cron.ErrNotFound) {
					t.Errorf("Pause after Remove: %v", err)
				}
				if _, err := r.RunNow(ctx, id, cron.RunOptions{Force: true}); !errors.Is(err, cron.ErrNotFound) {
					t.Errorf("RunNow after Remove: %v", err)
				}
				if _, err := r.Runs(ctx, id, 1); !errors.Is(err, cron.ErrNotFound) {
					t.Errorf("Runs after Remove: %v", err)
				}
			}
			waitFor(t, "the owner drops the removed job", 10*time.Second, func() (bool, string) {
				return !slices.Contains(own.IDs(), id), ""
			})
		})
	}
}
