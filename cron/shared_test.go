package cron

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// sharedStore is a MemStore shared by several runners: a SlotClaimer with
// one claim per (job, scheduled_at), an Owner of the ids in owned, and a
// JobReader.
type sharedStore struct {
	*MemStore
	mu       sync.Mutex
	owned    map[string]bool // nil: owns everything
	claimed  map[string]bool // job id + scheduled_at, or the run id of a run-now
	claimErr error
	records  int
}

func (s *sharedStore) Owns(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.owned == nil || s.owned[id]
}

func (s *sharedStore) setOwned(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owned = map[string]bool{}
	for _, id := range ids {
		s.owned[id] = true
	}
}

func (s *sharedStore) ClaimRun(ctx context.Context, r Run, slot bool) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claimErr != nil {
		return false, s.claimErr
	}
	key := r.ID
	if slot {
		key = r.JobID + " " + r.ScheduledAt.Format(time.RFC3339Nano)
	}
	if s.claimed[key] {
		return false, nil
	}
	s.claimed[key] = true
	return true, nil
}

func (s *sharedStore) Record(ctx context.Context, id string, b Bookkeeping) error {
	s.mu.Lock()
	s.records++
	s.mu.Unlock()
	return s.MemStore.Record(ctx, id, b)
}

func (s *sharedStore) Job(ctx context.Context, id string) (Job, error) {
	js, _ := s.Load(ctx)
	for _, j := range js {
		if j.ID == id {
			return j, nil
		}
	}
	return Job{}, ErrNotFound
}

func newSharedStore() *sharedStore {
	return &sharedStore{MemStore: NewMemStore(), claimed: map[string]bool{}}
}

// TestSharedRunnersFireEachSlotOnce: two runners over one shared store,
// both owning every job (as two processes during a lease handover), call
// each slot once between them; a runner that owns nothing calls nothing
// and writes no bookkeeping; a failed claim is not called and is recorded
// as skipped.
func TestSharedRunnersFireEachSlotOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newSharedStore()
		ex1, ex2 := &fakeExec{}, &fakeExec{}
		r1 := newTestRunner(t, st, ex1, Config{})
		r2 := newTestRunner(t, st, ex2, Config{})
		j := mustAdd(t, r1, httpJob("a", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Second), StartAt: time.Now()}))
		if err := r2.Hold(j); err != nil {
			t.Fatalf("Hold: %v", err)
		}
		stop1, stop2 := start(t, r1), start(t, r2)
		time.Sleep(10*time.Second + time.Millisecond)
		synctest.Wait()
		seen := map[time.Time]int{}
		for _, ex := range []*fakeExec{ex1, ex2} {
			for _, at := range ex.scheduledOf("a") {
				seen[at]++
			}
		}
		if len(seen) != 10 {
			t.Errorf("slots called: %d, want 10", len(seen))
		}
		for at, n := range seen {
			if n != 1 {
				t.Errorf("slot %v called %d times, want once", at, n)
			}
		}

		// Neither owns the job: no call, no bookkeeping.
		st.setOwned()
		synctest.Wait()
		st.mu.Lock()
		before := st.records
		st.mu.Unlock()
		n1, n2 := len(ex1.runs()), len(ex2.runs())
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if len(ex1.runs()) != n1 || len(ex2.runs()) != n2 {
			t.Errorf("runs while no runner owns the job: %d, want none", len(ex1.runs())-n1+len(ex2.runs())-n2)
		}
		st.mu.Lock()
		after := st.records
		st.mu.Unlock()
		if after != before {
			t.Errorf("bookkeeping written %d times while no runner owns the job, want none", after-before)
		}
		// r2's Get reads the store for a job it does not own.
		if _, err := r2.Get("a"); err != nil {
			t.Errorf("Get of a job not owned: %v", err)
		}
		// A run-now through a runner that does not own the job runs, and
		// its bookkeeping reaches the store as on one runner.
		if _, err := r2.RunNow(context.Background(), "a"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if len(ex2.runs()) != n2+1 {
			t.Errorf("run-now through a runner that does not own the job: %d calls, want 1", len(ex2.runs())-n2)
		}
		if got := mustGet(t, r2, "a"); !got.LastRunAt.Equal(time.Now()) || got.LastStatus != StatusSuccess {
			t.Errorf("after run-now: last_run_at %v, last_status %q; want now and success", got.LastRunAt, got.LastStatus)
		}
		n2++

		// Owned again, but the claims fail: no call, a skipped run.
		st.setOwned("a")
		st.mu.Lock()
		st.claimErr = errors.New("database gone")
		st.mu.Unlock()
		time.Sleep(time.Second)
		synctest.Wait()
		if len(ex1.runs()) != n1 || len(ex2.runs()) != n2 {
			t.Errorf("runs whose claim failed were called")
		}
		runs, _ := st.Runs(context.Background(), "a", 1)
		if len(runs) != 1 || runs[0].Status != StatusSkipped {
			t.Errorf("last run after a failed claim = %+v, want skipped", runs)
		}
		if err := stop1(); err != nil {
			t.Fatal(err)
		}
		if err := stop2(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestHoldAndDrop: Hold adds and replaces jobs without writing the store,
// keeps the bookkeeping of an owned job whose schedule did not change, and
// Drop forgets a job.
func TestHoldAndDrop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newSharedStore()
		r := newTestRunner(t, st, &fakeExec{}, Config{})
		j := httpJob("h", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute), StartAt: time.Now()})
		j.Type, j.HTTP.Method, j.Timeout, j.RetryBackoff = JobTypeHTTP, "GET", Duration(DefaultTimeout), Duration(DefaultRetryBackoff)
		if err := r.Hold(j); err != nil {
			t.Fatal(err)
		}
		if stored, _ := st.Load(context.Background()); len(stored) != 0 {
			t.Errorf("Hold wrote the store: %v", stored)
		}
		got := mustGet(t, r, "h")
		if want := time.Now().Add(time.Minute); !got.NextRunAt.Equal(want) {
			t.Errorf("next_run_at = %v, want %v", got.NextRunAt, want)
		}
		j.Name = "renamed"
		j.LastStatus = StatusFailed // another runner's older view
		if err := r.Hold(j); err != nil {
			t.Fatal(err)
		}
		got = mustGet(t, r, "h")
		if got.Name != "renamed" || got.LastStatus != "" {
			t.Errorf("after Hold of a rename: name %q, last_status %q; want renamed and the runner's own (empty) status", got.Name, got.LastStatus)
		}
		bad := j
		bad.Schedule.Every = 0
		if err := r.Hold(bad); err == nil {
			t.Errorf("Hold of an invalid job: no error")
		}
		if diff := cmp.Diff([]string{"h"}, r.IDs()); diff != "" {
			t.Errorf("IDs (-want +got):\n%s", diff)
		}
		if !r.Drop("h") || r.Drop("h") {
			t.Errorf("Drop: want true then false")
		}
		if r.Len() != 0 {
			t.Errorf("Len after Drop = %d", r.Len())
		}
	})
}
