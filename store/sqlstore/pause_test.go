package sqlstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// notHolder is a runner's view of the shared store that holds no job: the
// runner of a process whose leases cover none of the jobs of a test. It
// reads and writes the database as any other.
type notHolder struct{ *Jobs }

func (notHolder) Owns(string) bool { return false }

func (notHolder) LoadHeld(context.Context) ([]cron.Job, []int64, error) { return nil, nil, nil }

// pauseRunners starts, on one database, runner a, which holds every job
// and learns of the other's writes through a watcher, and runner b, which
// holds none; it returns them and a's store.
func pauseRunners(t *testing.T, ctx context.Context, wg *sync.WaitGroup, u string) (a, b *cron.Runner, ja *Jobs) {
	t.Helper()
	ja = mustJobs(t, mustOpen(t, u), JobsConfig{Instance: "a"})
	jb := notHolder{mustJobs(t, mustOpen(t, u), JobsConfig{Instance: "b"})}
	exec := cron.ExecutorFunc(func(ctx context.Context, j *cron.Job, info cron.RunInfo) cron.Result {
		return cron.Result{Status: cron.StatusSuccess, Attempts: 1, HTTPStatus: 200}
	})
	var err error
	if a, err = cron.New(ja, exec, cron.Config{}); err != nil {
		t.Fatal(err)
	}
	if b, err = cron.New(jb, exec, cron.Config{}); err != nil {
		t.Fatal(err)
	}
	w, err := ja.Watcher(ctx, WatchConfig{Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*cron.Runner{a, b} {
		if err := r.Load(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := r.Run(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	wg.Go(func() { w.Run(ctx, a) })
	return a, b, ja
}

// TestPauseRecordedOnceShared: over a shared store, a job's pause is
// recorded once, as one skipped run of reason paused whose slots are
// those that passed between paused_at and the resume, whichever runner
// resumes it, and the record is the holder's (it alone knows which slots
// it did not call): b, which does not hold the job, resuming a pause
// made on a (a records it when it sees the resume); a, the holder,
// resuming a pause made on b; a's pause timer ending a timed pause set
// on b.
func TestPauseRecordedOnceShared(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			defer wg.Wait()
			defer cancel()
			a, b, ja := pauseRunners(t, ctx, &wg, be.url(t))
			start := time.Now().Truncate(time.Second).UTC()
			for _, id := range []string{"p1", "p2", "p3"} {
				j := cron.Job{ID: id, Name: id, HTTP: cron.HTTPConfig{URL: "http://127.0.0.1:9/x"},
					Schedule: cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(time.Second), StartAt: start}}
				if _, err := a.Add(ctx, j); err != nil {
					t.Fatal(err)
				}
			}

			// check waits until the holder a has called a slot of id after
			// its resume at resumed (so it has seen the resume, and any
			// record of its own is written before that run), then checks
			// that the pause made at pausedAt is one record, by instance,
			// and that each slot from the first after pausedAt to the
			// resume appears once: called (a slot taken ahead of its time
			// when the pause came), or in the paused record.
			check := func(id string, pausedAt, resumed time.Time, instance string) {
				t.Helper()
				var runs []cron.Run
				waitFor(t, "a run of "+id+" called by the holder after the resume", 30*time.Second, func() (bool, string) {
					var err error
					runs, _, err = ja.QueryRuns(ctx, cron.RunQuery{JobIDs: []string{id}, Limit: cron.MaxRunQueryLimit})
					if err != nil {
						return false, err.Error()
					}
					for _, r := range runs {
						if r.Status == cron.StatusSuccess && r.ScheduledAt.After(resumed) {
							return true, ""
						}
					}
					return false, fmt.Sprintf("%d runs", len(runs))
				})
				var paused []cron.Run
				seen := map[time.Time]int{}
				for _, r := range runs {
					if r.Reason == cron.ReasonPaused {
						paused = append(paused, r)
						for k := range max(r.Slots, 1) {
							seen[r.ScheduledAt.Add(time.Duration(k)*time.Second)]++
						}
					} else {
						seen[r.ScheduledAt]++
					}
				}
				if len(paused) != 1 {
					t.Fatalf("%s: %d records of reason paused, want 1: %+v\nall runs: %+v", id, len(paused), paused, runs)
				}
				r := paused[0]
				if r.Status != cron.StatusSkipped || r.Instance != instance || max(r.Slots, 1) < 2 {
					t.Errorf("%s: paused record %+v; want skipped, by %q, of the 2 or more slots of a pause of 2.5s", id, r, instance)
				}
				first := pausedAt.Truncate(time.Second).Add(time.Second)
				for at := first; !at.After(r.TriggeredAt); at = at.Add(time.Second) {
					if seen[at] != 1 {
						t.Errorf("%s: the slot of %v appears %d times in the runs, want once (paused at %v, record %+v)", id, at, seen[at], pausedAt, r)
					}
				}
			}

			// Paused on the holder, resumed on b.
			p, err := a.Pause(ctx, "p1", time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if p.PausedAt.IsZero() {
				t.Fatalf("Pause: no paused_at")
			}
			if s, _, err := ja.Read(ctx, "p1"); err != nil || !s.PausedAt.Equal(p.PausedAt) {
				t.Fatalf("stored paused_at %v (%v), want %v", s.PausedAt, err, p.PausedAt)
			}
			time.Sleep(2500 * time.Millisecond)
			j, err := b.Resume(ctx, "p1")
			if err != nil {
				t.Fatal(err)
			}
			if j.Paused || !j.PausedAt.IsZero() {
				t.Fatalf("resumed on b: paused %v paused_at %v", j.Paused, j.PausedAt)
			}
			check("p1", p.PausedAt, time.Now(), "a")

			// Paused on b, resumed on the holder.
			p, err = b.Pause(ctx, "p2", time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if p.PausedAt.IsZero() {
				t.Fatalf("Pause on b: no paused_at")
			}
			waitFor(t, "the pause on b seen by the holder", 30*time.Second, func() (bool, string) {
				j, err := a.Get(ctx, "p2")
				return err == nil && j.Paused && !j.PausedAt.Before(p.PausedAt), fmt.Sprintf("%+v %v", j, err)
			})
			time.Sleep(2500 * time.Millisecond)
			if _, err := a.Resume(ctx, "p2"); err != nil {
				t.Fatal(err)
			}
			check("p2", p.PausedAt, time.Now(), "a")

			// A timed pause set on b, ended by the holder's pause timer.
			until := time.Now().Add(2500 * time.Millisecond)
			p, err = b.Pause(ctx, "p3", until)
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the timed pause ended by the holder", 30*time.Second, func() (bool, string) {
				j, err := a.Get(ctx, "p3")
				return err == nil && !j.Paused, fmt.Sprintf("%+v %v", j, err)
			})
			check("p3", p.PausedAt, until, "a")
			if s, _, err := ja.Read(ctx, "p3"); err != nil || s.Paused || !s.PausedAt.IsZero() {
				t.Errorf("stored after the timed resume: paused %v paused_at %v (%v)", s.Paused, s.PausedAt, err)
			}
		})
	}
}
