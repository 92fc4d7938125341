package cron

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// sharedStore is a MemStore shared by several runners: a SharedStore
// with one claim per (job, scheduled_at), an owner of the ids in owned,
// and a version per job.
type sharedStore struct {
	*MemStore
	mu       sync.Mutex
	owned    map[string]bool // nil: owns everything
	claimed  map[string]bool // job id + scheduled_at, or the run id of a run-now
	claimErr error
	records  int
	vers     map[string]int64
	refused  int               // bookkeeping records refused for their version
	rows     map[string]string // job id + scheduled_at -> the run id that claimed the slot
	// beforeWrite, when set, is called at the start of each Write, outside
	// the store's lock (a test lines up concurrent writers there).
	beforeWrite func()
	// beforeRecord, when set, is called at the start of each RecordBatch,
	// outside the store's lock (a test holds the recorder up there).
	beforeRecord func()
	appendCalls  []int // the number of runs of each AppendRuns call
}

var _ SharedStore = (*sharedStore)(nil)

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
	if slot {
		if s.rows == nil {
			s.rows = map[string]string{}
		}
		s.rows[key] = r.ID
	}
	return true, nil
}

func (s *sharedStore) ClaimSlots(ctx context.Context, runs []Run) ([]bool, error) {
	won := make([]bool, len(runs))
	for i, r := range runs {
		ok, err := s.ClaimRun(ctx, r, true)
		if err != nil {
			return nil, err
		}
		won[i] = ok
	}
	return won, nil
}

func (s *sharedStore) LoadHeld(ctx context.Context) ([]Job, []int64, error) {
	all, _ := s.Load(ctx)
	var jobs []Job
	var vers []int64
	for _, j := range all {
		if s.Owns(j.ID) {
			s.mu.Lock()
			jobs, vers = append(jobs, j), append(vers, s.vers[j.ID])
			s.mu.Unlock()
		}
	}
	return jobs, vers, nil
}

func (s *sharedStore) Read(ctx context.Context, id string) (Job, int64, error) {
	js, _ := s.Load(ctx)
	for _, j := range js {
		if j.ID == id {
			s.mu.Lock()
			defer s.mu.Unlock()
			return j, s.vers[id], nil
		}
	}
	return Job{}, 0, ErrNotFound
}

func (s *sharedStore) Write(ctx context.Context, j Job, version int64) (int64, error) {
	if s.beforeWrite != nil {
		s.beforeWrite()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.vers[j.ID]
	switch {
	case ok && version == 0:
		return 0, ErrExists
	case !ok && version > 0:
		return 0, ErrNotFound
	case version > 0 && cur != version:
		return 0, ErrConflict
	}
	if err := s.MemStore.Save(ctx, j); err != nil {
		return 0, err
	}
	s.vers[j.ID]++
	return s.vers[j.ID], nil
}

func (s *sharedStore) Delete(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.vers, id)
	return s.MemStore.Delete(ctx, id)
}

func (s *sharedStore) PageJobs(ctx context.Context, q JobQuery) ([]Job, bool, error) {
	after, limit, keep := q.After, q.Limit, q.Keep
	if q.Text != "" {
		keep = func(j *Job) bool {
			return (containsFold(j.ID, q.Text) || containsFold(j.Name, q.Text)) && (q.Keep == nil || q.Keep(j))
		}
	}
	all, _ := s.Load(ctx)
	from := 0
	if after != "" {
		from = -1
		for i, j := range all {
			if j.ID == after {
				from = i + 1
			}
		}
		if from < 0 {
			return nil, false, ErrNotFound
		}
	}
	var out []Job
	for _, j := range all[from:] {
		if limit > 0 && len(out) == limit {
			return out, true, nil
		}
		if keep == nil || keep(&j) {
			out = append(out, j)
		}
	}
	return out, false, nil
}

func (s *sharedStore) CountJobs(ctx context.Context) (enabled, paused int, err error) {
	all, _ := s.Load(ctx)
	for _, j := range all {
		if !j.Paused {
			enabled++
		} else {
			paused++
		}
	}
	return enabled, paused, nil
}

func (s *sharedStore) RecordBatch(ctx context.Context, recs []Recorded) error {
	if s.beforeRecord != nil {
		s.beforeRecord()
	}
	for _, rec := range recs {
		s.mu.Lock()
		s.records++
		if s.vers[rec.ID] != rec.Version {
			s.refused++
			s.mu.Unlock()
			continue
		}
		s.mu.Unlock()
		j, _, err := s.Read(ctx, rec.ID)
		if err != nil {
			continue
		}
		b := j.Bookkeeping()
		if !rec.LastRunAt.Before(b.LastRunAt) {
			b.LastRunAt, b.LastStatus, b.LastError = rec.LastRunAt, rec.LastStatus, rec.LastError
		}
		if !rec.LastOnly {
			b.NextRunAt = rec.NextRunAt
		}
		s.MemStore.Record(ctx, rec.ID, b)
	}
	return nil
}

func (s *sharedStore) AppendRuns(ctx context.Context, runs []Run) error {
	s.mu.Lock()
	s.appendCalls = append(s.appendCalls, len(runs))
	s.mu.Unlock()
	for _, r := range runs {
		key := r.JobID + " " + r.ScheduledAt.Format(time.RFC3339Nano)
		s.mu.Lock()
		id, taken := s.rows[key]
		if !taken && !s.claimed[r.ID] { // a slot recorded without a claim, not a run-now
			if s.rows == nil {
				s.rows = map[string]string{}
			}
			s.rows[key] = r.ID
		}
		s.mu.Unlock()
		if taken && id != r.ID {
			// The row of that slot is another run's: dropped, as a SQL
			// store's unique (job, scheduled_at) drops it.
			continue
		}
		s.AppendRun(ctx, r)
	}
	return nil
}

// LastSlots answers from the rows of the slots claimed or recorded
// (rows), with the Slots of the run when it is in the history.
func (s *sharedStore) LastSlots(ctx context.Context, ids []string) (map[string]Run, error) {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	out := map[string]Run{}
	s.mu.Lock()
	for key, runID := range s.rows {
		job, at, _ := strings.Cut(key, " ")
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil || !want[job] {
			continue
		}
		if l, ok := out[job]; !ok || t.After(l.ScheduledAt) {
			out[job] = Run{ID: runID, JobID: job, ScheduledAt: t}
		}
	}
	s.mu.Unlock()
	for job, l := range out {
		runs, _ := s.Runs(ctx, job, 0)
		for _, r := range runs {
			if r.ID == l.ID {
				l.Slots = r.Slots
				out[job] = l
			}
		}
	}
	return out, nil
}

// deliver hands job id, as stored in st, to r, as a runner's watcher does
// when it learns of a change or gains the job's partition.
func deliver(t *testing.T, st *sharedStore, r *Runner, id string) {
	t.Helper()
	j, ver, err := st.Read(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Hold(j, ver); err != nil {
		t.Fatal(err)
	}
}

func newSharedStore() *sharedStore {
	return &sharedStore{MemStore: NewMemStore(), claimed: map[string]bool{}, vers: map[string]int64{}}
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
		if err := r2.Hold(j, 1); err != nil {
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
		if _, err := r2.Get(context.Background(), "a"); err != nil {
			t.Errorf("Get of a job not owned: %v", err)
		}
		// A run-now through a runner that does not own the job runs, and
		// its bookkeeping reaches the store as on one runner.
		if _, err := r2.RunNow(context.Background(), "a", RunOptions{Force: true}); err != nil {
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
		if err := r.Hold(j, 1); err != nil {
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
		if err := r.Hold(j, 3); err != nil {
			t.Fatal(err)
		}
		got = mustGet(t, r, "h")
		if got.Name != "renamed" || got.LastStatus != "" {
			t.Errorf("after Hold of a rename: name %q, last_status %q; want renamed and the runner's own (empty) status", got.Name, got.LastStatus)
		}
		bad := j
		bad.Schedule.Every = 0
		if err := r.Hold(bad, 1); err == nil {
			t.Errorf("Hold of an invalid job: no error")
		}
		// Deleted and created again elsewhere: version 1 again, held.
		again := j
		again.Name = "again"
		if err := r.Hold(again, 1); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, r, "h"); got.Name != "again" {
			t.Errorf("after Hold of a job created again (an older version): name %q, want again", got.Name)
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

// TestConcurrentResumeRecordsOnce: two runners over one shared store
// that resume one paused job at the same instant (both read it paused
// before either writes) leave one outcome and one record of the pause:
// the write of the second is a conflict (SharedStore.Write compares the
// version), and on reading the job again it finds it resumed. The record
// is the holder's, made when it learns of the resume (Hold), whether
// the holder is one of the two or a third runner.
func TestConcurrentResumeRecordsOnce(t *testing.T) {
	for _, holderResumes := range []bool{false, true} {
		t.Run(fmt.Sprintf("holder_resumes=%v", holderResumes), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := newSharedStore()
				h := newTestRunner(t, &ownerView{st, "c"}, &fakeExec{}, Config{})
				other := newTestRunner(t, &ownerView{st, ""}, &fakeExec{}, Config{})
				ctx := context.Background()
				mustAdd(t, h, httpJob("c", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Second), StartAt: time.Now().Add(time.Second)}))
				resumers := []*Runner{other, h}
				stops := []func() error{start(t, h), start(t, other)}
				if !holderResumes {
					resumers[1] = newTestRunner(t, &ownerView{st, ""}, &fakeExec{}, Config{})
					stops = append(stops, start(t, resumers[1]))
				}
				if _, err := other.Pause(ctx, "c", time.Time{}); err != nil {
					t.Fatal(err)
				}
				deliver(t, st, h, "c")
				time.Sleep(time.Minute)
				// Both resumes read the job paused, then write.
				arrived := lineUpWrites(st)
				var wg sync.WaitGroup
				for _, r := range resumers {
					wg.Go(func() {
						if _, err := r.Resume(ctx, "c"); err != nil {
							t.Errorf("Resume: %v", err)
						}
					})
				}
				wg.Wait()
				st.beforeWrite = nil
				if arrived() < 2 {
					t.Fatalf("only %d writes lined up: the test did not race the resumes", arrived())
				}
				deliver(t, st, h, "c")
				synctest.Wait()
				for _, stop := range stops {
					if err := stop(); err != nil {
						t.Fatal(err)
					}
				}
				got, _, _ := st.Read(ctx, "c")
				if got.Paused {
					t.Errorf("after two resumes the job is paused")
				}
				runs, err := st.Runs(ctx, "c", 10)
				if err != nil {
					t.Fatal(err)
				}
				var pauses []Run
				for _, run := range runs {
					if run.Reason == ReasonPaused {
						pauses = append(pauses, run)
					}
				}
				if len(pauses) != 1 || pauses[0].Slots < 59 {
					t.Errorf("%d records of the pause, want 1 that stands for the slots of the minute: %+v", len(pauses), pauses)
				}
			})
		})
	}
}

// TestResumeSeenAfterItsSlot: a resume made by another runner just
// before a slot reaches the holder only after that slot's time. The slot
// came after the resume, so the holder calls it, and its record of the
// pause stands for the slots before the resume only: every slot appears
// once, called or in the record.
func TestResumeSeenAfterItsSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newSharedStore()
		h := newTestRunner(t, &ownerView{st, "c"}, &fakeExec{}, Config{})
		other := newTestRunner(t, &ownerView{st, ""}, &fakeExec{}, Config{})
		ctx := context.Background()
		t0 := time.Now()
		mustAdd(t, h, httpJob("c", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Second), StartAt: t0.Add(time.Second)}))
		stops := []func() error{start(t, h), start(t, other)}
		if _, err := other.Pause(ctx, "c", time.Time{}); err != nil {
			t.Fatal(err)
		}
		deliver(t, st, h, "c")
		time.Sleep(5*time.Second - 10*time.Millisecond)
		if _, err := other.Resume(ctx, "c"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // the slot of t0+5s passes before the holder learns
		deliver(t, st, h, "c")
		time.Sleep(3 * time.Second)
		synctest.Wait()
		for _, stop := range stops {
			if err := stop(); err != nil {
				t.Fatal(err)
			}
		}
		runs, err := st.Runs(ctx, "c", 100)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[time.Duration]int{}
		for _, r := range runs {
			for k := range max(r.Slots, 1) {
				seen[r.ScheduledAt.Sub(t0)+time.Duration(k)*time.Second]++
			}
		}
		for at := time.Second; at <= 7*time.Second; at += time.Second {
			if seen[at] != 1 {
				t.Errorf("the slot of t0+%v appears %d times, want once; runs: %+v", at, seen[at], runs)
			}
		}
	})
}

// ownerView is one runner's view of a sharedStore shared by several: it
// owns the one job id mine ("": none), whatever the store's owned says,
// as each process on a database holds the leases of its own partitions.
type ownerView struct {
	*sharedStore
	mine string
}

func (v *ownerView) Owns(id string) bool { return id == v.mine }

func (v *ownerView) LoadHeld(ctx context.Context) ([]Job, []int64, error) {
	j, ver, err := v.Read(ctx, v.mine)
	if v.mine == "" || errors.Is(err, ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return []Job{j}, []int64{ver}, nil
}

// TestConcurrentWritesBothApply: a rename through one runner and a pause
// through another, at the same instant (both read the job before either
// writes), both hold: the second write is a conflict, and that runner
// applies its change to the first one's write instead of overwriting it.
func TestConcurrentWritesBothApply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newSharedStore()
		h := newTestRunner(t, &ownerView{st, "w"}, &fakeExec{}, Config{})
		r1 := newTestRunner(t, &ownerView{st, ""}, &fakeExec{}, Config{})
		r2 := newTestRunner(t, &ownerView{st, ""}, &fakeExec{}, Config{})
		ctx := context.Background()
		mustAdd(t, h, httpJob("w", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute), StartAt: time.Now().Add(time.Minute)}))
		arrived := lineUpWrites(st)
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := r1.Update(ctx, "w", func(j *Job) error { j.Name = "renamed"; return nil }); err != nil {
				t.Errorf("Update: %v", err)
			}
		})
		wg.Go(func() {
			if _, err := r2.Pause(ctx, "w", time.Time{}); err != nil {
				t.Errorf("Pause: %v", err)
			}
		})
		wg.Wait()
		st.beforeWrite = nil
		if arrived() < 2 {
			t.Fatalf("only %d writes lined up: the test did not race the writes", arrived())
		}
		got, _, err := st.Read(ctx, "w")
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != "renamed" || !got.Paused {
			t.Errorf("after a rename and a pause at once: name %q, paused %v; want both", got.Name, got.Paused)
		}
	})
}

// TestTakeoverAfterClaimedSlot: a runner takes a job over whose stored
// next_run_at is a slot that the runner before it claimed (and died
// before it wrote next_run_at past it), with later slots passed too: the
// record of the slots passed without a holder does not lose them to
// that slot's row (a shared store keeps one row per slot).
func TestTakeoverAfterClaimedSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newSharedStore()
		ctx := context.Background()
		t0 := time.Now()
		j := httpJob("t", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Second), StartAt: t0.Add(time.Second)})
		j.NextRunAt = t0.Add(time.Second)
		if _, err := st.Write(ctx, j, 0); err != nil {
			t.Fatal(err)
		}
		// The dead holder's claim of the slot at 1s, finished as missed
		// (holder died) by the store.
		if ok, err := st.ClaimRun(ctx, Run{ID: "dead", JobID: "t", ScheduledAt: t0.Add(time.Second)}, true); !ok || err != nil {
			t.Fatalf("claim: %v %v", ok, err)
		}
		st.AppendRun(ctx, Run{ID: "dead", JobID: "t", ScheduledAt: t0.Add(time.Second), Status: StatusMissed, Reason: ReasonHolderDied})
		view := &switchView{sharedStore: st}
		r := newTestRunner(t, view, &fakeExec{}, Config{})
		stop := start(t, r)
		time.Sleep(3500 * time.Millisecond) // the slots at 2s and 3s pass with no holder
		view.owns.Store(true)
		stored, ver, _ := st.Read(ctx, "t")
		if err := r.Hold(stored, ver); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		runs, _ := st.Runs(ctx, "t", 100)
		covered := slotRecords(runs, t0, time.Second)
		for at := time.Second; at <= 4*time.Second; at += time.Second {
			if len(covered[at]) != 1 {
				t.Errorf("slot %v has %d rows, want 1; runs %+v", at, len(covered[at]), runs)
			}
		}
	})
}

// TestDropKeepsRunBookkeeping: a job whose run has ended but whose
// bookkeeping the recorder has not written yet, dropped then (its
// partition moved to another runner), still has its run's last-run
// fields written: the next holder loads the job from the store and shows
// what is stored.
func TestDropKeepsRunBookkeeping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newSharedStore()
		ctx := context.Background()
		t0 := time.Now()
		j := httpJob("o", ScheduleSpec{Kind: KindOnce, RunAt: t0.Add(time.Second)})
		j.Type, j.HTTP.Method, j.Timeout, j.RetryBackoff = JobTypeHTTP, "POST", Duration(DefaultTimeout), Duration(DefaultRetryBackoff)
		j.NextRunAt = t0.Add(time.Second)
		if _, err := st.Write(ctx, j, 0); err != nil {
			t.Fatal(err)
		}
		// The recorder is held up in its first write until the job is
		// dropped, so that the run's bookkeeping waits in memory.
		gate := make(chan struct{})
		st.beforeRecord = func() { <-gate }
		ex := &fakeExec{fn: func(ctx context.Context, j *Job, info RunInfo) Result {
			time.Sleep(200 * time.Millisecond)
			return Result{Status: StatusSuccess, Attempts: 1, HTTPStatus: 200}
		}}
		r := newTestRunner(t, st, ex, Config{})
		stop := start(t, r)
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if n := len(ex.runs()); n != 1 {
			t.Fatalf("%d calls, want 1", n)
		}
		st.setOwned()
		if !r.Drop("o") {
			t.Fatal("Drop: the runner did not hold the job")
		}
		close(gate)
		time.Sleep(time.Second)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		got, _, err := st.Read(ctx, "o")
		if err != nil {
			t.Fatal(err)
		}
		if got.LastStatus != StatusSuccess || !got.LastRunAt.Equal(t0.Add(time.Second)) || !got.NextRunAt.IsZero() {
			t.Errorf("stored: last_status %q, last_run_at %v, next_run_at %v; want success, %v, none",
				got.LastStatus, got.LastRunAt, got.NextRunAt, t0.Add(time.Second))
		}
	})
}

// lineUpWrites makes the next two Writes of st wait for each other (for a
// second at most), so that both are made from what was read before
// either: two runners writing one job at once. arrived counts the Writes
// that came.
func lineUpWrites(st *sharedStore) (arrived func() int) {
	var mu sync.Mutex
	n, both := 0, make(chan struct{})
	st.beforeWrite = func() {
		mu.Lock()
		n++
		if n == 2 {
			close(both)
		}
		mu.Unlock()
		select {
		case <-both:
		case <-time.After(time.Second):
		}
	}
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// TestRunsWrittenInChunks: a start after a long stop has a run record for
// each job whose slots passed; the recorder writes them all, in calls of
// at most runsPerCall runs.
func TestRunsWrittenInChunks(t *testing.T) {
	defer func(n int) { runsPerCall = n }(runsPerCall)
	runsPerCall = 40
	synctest.Test(t, func(t *testing.T) {
		st := newSharedStore()
		n := 2*runsPerCall + 10
		r1 := newTestRunner(t, st, &fakeExec{}, Config{})
		for i := range n {
			mustAdd(t, r1, httpJob(fmt.Sprintf("j%05d", i), ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute), StartAt: time.Now().Add(time.Minute)}))
		}
		time.Sleep(time.Hour) // no runner: every job's slots pass
		st.mu.Lock()
		st.appendCalls = nil
		st.mu.Unlock()
		r2 := newTestRunner(t, st, &fakeExec{}, Config{})
		stop := start(t, r2)
		synctest.Wait()
		_ = stop()
		st.mu.Lock()
		defer st.mu.Unlock()
		total := 0
		for _, c := range st.appendCalls {
			if c > runsPerCall {
				t.Errorf("an AppendRuns call of %d runs, want at most %d", c, runsPerCall)
			}
			total += c
		}
		if total < n || len(st.appendCalls) < 3 {
			t.Errorf("%d runs written in %d calls %v, want at least %d (one a job) in at least 3", total, len(st.appendCalls), st.appendCalls, n)
		}
	})
}
