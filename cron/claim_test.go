package cron

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// batchStore is a sharedStore that claims slots in batches
// ([SharedStore.ClaimSlots]): it keeps each batch with the time it came, and can hold
// the next batch for a while (a slow database, or a process stopped).
type batchStore struct {
	*sharedStore
	bmu       sync.Mutex
	batches   [][]Run
	at        []time.Time
	holdNext  time.Duration
	singleRun int // ClaimRun calls of slots (claimed by the worker)
}

func (s *batchStore) ClaimSlots(ctx context.Context, runs []Run) ([]bool, error) {
	s.bmu.Lock()
	s.batches = append(s.batches, slices.Clone(runs))
	s.at = append(s.at, time.Now())
	hold := s.holdNext
	s.holdNext = 0
	s.bmu.Unlock()
	time.Sleep(hold)
	won := make([]bool, len(runs))
	for i, r := range runs {
		ok, err := s.sharedStore.ClaimRun(ctx, r, true)
		if err != nil {
			return nil, err
		}
		won[i] = ok
	}
	return won, nil
}

func (s *batchStore) ClaimRun(ctx context.Context, r Run, slot bool) (bool, error) {
	if slot {
		s.bmu.Lock()
		s.singleRun++
		s.bmu.Unlock()
	}
	return s.sharedStore.ClaimRun(ctx, r, slot)
}

// claimedAt returns, for each run id claimed in a batch, when.
func (s *batchStore) claimedAt() map[string]time.Time {
	s.bmu.Lock()
	defer s.bmu.Unlock()
	out := map[string]time.Time{}
	for i, b := range s.batches {
		for _, r := range b {
			out[r.ID] = s.at[i]
		}
	}
	return out
}

func slotKey(job string, at time.Time) string { return job + " " + at.Format(time.RFC3339Nano) }

// TestClaimAhead: over a shared store, each slot is claimed between four
// fifths of ClaimAhead and ClaimAhead before its time, many slots to a
// claim, and called exactly at its time; a slot another runner claimed is
// not called; with a negative ClaimAhead the worker claims each run.
func TestClaimAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &batchStore{sharedStore: newSharedStore()}
		ex := &fakeExec{}
		r := newTestRunner(t, st, ex, Config{Workers: 8})
		t0 := time.Now()
		const jobs = 200
		for i := range jobs {
			// Staggered over a second: one slot every 5ms.
			mustAdd(t, r, httpJob(fmt.Sprint("j", i), ScheduleSpec{Kind: KindEvery, Every: Duration(time.Second), StartAt: t0.Add(time.Second + time.Duration(i)*5*time.Millisecond)}))
		}
		// Another runner has claimed j7's slots at 2s and 3s.
		st.mu.Lock()
		for _, s := range []time.Duration{2, 3} {
			st.claimed[slotKey("j7", t0.Add(s*time.Second+7*5*time.Millisecond))] = true
		}
		st.mu.Unlock()
		stop := start(t, r)
		time.Sleep(5*time.Second - time.Millisecond)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		claimed := st.claimedAt()
		calls := ex.runs()
		seen := map[string]int{}
		for _, c := range calls {
			if !c.TriggeredAt.Equal(c.ScheduledAt) {
				t.Errorf("%s at %v: triggered %v late", c.JobID, c.ScheduledAt.Sub(t0), c.TriggeredAt.Sub(c.ScheduledAt))
			}
			at, ok := claimed[c.RunID]
			if !ok {
				t.Errorf("%s at %v: called without a claim", c.JobID, c.ScheduledAt.Sub(t0))
				continue
			}
			if ahead := c.ScheduledAt.Sub(at); ahead > DefaultClaimAhead || ahead < DefaultClaimAhead*4/5 {
				t.Errorf("%s at %v: claimed %v ahead, want between %v and %v", c.JobID, c.ScheduledAt.Sub(t0), ahead, DefaultClaimAhead*4/5, DefaultClaimAhead)
			}
			seen[slotKey(c.JobID, c.ScheduledAt)]++
		}
		// Each job's slots at 1s to 4s (and the 995ms after each), less
		// j7's two; and those the runner had taken when it stopped, at
		// 5s-1ms: due by then + ClaimAhead, which it calls before it
		// returns.
		want := 4*jobs - 2
		for i := range jobs {
			if time.Duration(i)*5*time.Millisecond <= DefaultClaimAhead-time.Millisecond {
				want++
			}
		}
		if len(seen) != want {
			t.Errorf("slots called: %d, want %d", len(seen), want)
		}
		for k, n := range seen {
			if n != 1 {
				t.Errorf("slot %s called %d times", k, n)
			}
		}
		for _, s := range []time.Duration{2, 3} {
			if seen[slotKey("j7", t0.Add(s*time.Second+7*5*time.Millisecond))] != 0 {
				t.Errorf("j7's slot at %ds, claimed by another runner, was called", s)
			}
		}
		st.bmu.Lock()
		nb, single := len(st.batches), st.singleRun
		st.bmu.Unlock()
		if per := float64(len(calls)) / float64(nb); per < 5 {
			t.Errorf("%d slots in %d claims: %.1f a claim, want at least 5", len(calls), nb, per)
		}
		if single != 0 {
			t.Errorf("%d slots claimed one by one by the workers, want none", single)
		}

		// ClaimAhead < 0: the workers claim, one run at a time.
		st2 := &batchStore{sharedStore: newSharedStore()}
		ex2 := &fakeExec{}
		r2 := newTestRunner(t, st2, ex2, Config{ClaimAhead: -1})
		mustAdd(t, r2, httpJob("w", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Second), StartAt: time.Now().Add(time.Second)}))
		stop2 := start(t, r2)
		time.Sleep(3*time.Second + time.Millisecond)
		if err := stop2(); err != nil {
			t.Fatal(err)
		}
		st2.bmu.Lock()
		defer st2.bmu.Unlock()
		if len(ex2.runs()) != 3 || st2.singleRun != 3 || len(st2.batches) != 0 {
			t.Errorf("ClaimAhead -1: %d calls, %d claims by the workers, %d batches; want 3, 3, 0", len(ex2.runs()), st2.singleRun, len(st2.batches))
		}
	})
}

// TestClaimAheadHeldUp: a runner held up between a slot's claim and its
// time, past MisfireTolerance (a slow database, a stopped process), does
// not call the slot late: the claimed run is recorded as missed.
func TestClaimAheadHeldUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &batchStore{sharedStore: newSharedStore()}
		ex := &fakeExec{}
		r := newTestRunner(t, st, ex, Config{})
		t0 := time.Now()
		mustAdd(t, r, httpJob("h", ScheduleSpec{Kind: KindEvery, Every: Duration(10 * time.Second), StartAt: t0.Add(time.Second)}))
		st.bmu.Lock()
		st.holdNext = 3 * time.Second
		st.bmu.Unlock()
		stop := start(t, r)
		time.Sleep(12 * time.Second)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		calls := ex.scheduledOf("h")
		if want := []time.Time{t0.Add(11 * time.Second)}; !slices.EqualFunc(calls, want, time.Time.Equal) {
			t.Errorf("calls at %v, want only the slot at 11s", calls)
		}
		runs, err := st.Runs(context.Background(), "h", 10)
		if err != nil {
			t.Fatal(err)
		}
		var missed []Run
		for _, run := range runs {
			if run.Status == StatusMissed {
				missed = append(missed, run)
			}
		}
		claimed := st.claimedAt()
		if len(missed) != 1 || !missed[0].ScheduledAt.Equal(t0.Add(time.Second)) || missed[0].Error == "" {
			t.Fatalf("missed runs %+v, want the slot at 1s with why", missed)
		}
		if _, ok := claimed[missed[0].ID]; !ok {
			t.Errorf("the missed run %q is not the claimed one (claimed %v)", missed[0].ID, claimed)
		}
	})
}

// TestClaimAheadStop: a runner that stops calls the slots it has taken
// ahead, at their time (no other runner would): those claimed, and those
// taken and not claimed yet.
func TestClaimAheadStop(t *testing.T) {
	for _, tt := range []struct {
		name   string
		stopAt time.Duration
	}{
		{"claimed", 1900 * time.Millisecond},     // the slot at 2s was claimed by 1.8s
		{"not claimed", 1760 * time.Millisecond}, // taken at 1.75s, its claim waits until 1.8s
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &batchStore{sharedStore: newSharedStore()}
				ex := &fakeExec{}
				r := newTestRunner(t, st, ex, Config{})
				t0 := time.Now()
				mustAdd(t, r, httpJob("s", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Second), StartAt: t0.Add(time.Second)}))
				stop := start(t, r)
				time.Sleep(tt.stopAt)
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				if got := time.Since(t0); got != 2*time.Second {
					t.Errorf("stop returned at %v, want 2s: after the call of the slot at 2s", got)
				}
				calls := ex.scheduledOf("s")
				want := []time.Time{t0.Add(time.Second), t0.Add(2 * time.Second)}
				if !slices.EqualFunc(calls, want, time.Time.Equal) {
					t.Errorf("calls at %v, want the slots at 1s and 2s", calls)
				}
				for _, c := range ex.runs() {
					if !c.TriggeredAt.Equal(c.ScheduledAt) {
						t.Errorf("slot %v called at %v", c.ScheduledAt, c.TriggeredAt)
					}
				}
			})
		})
	}
}

// TestClaimAheadShortInterval: a job whose interval is shorter than
// ClaimAhead has every slot called, and a slot whose previous run is
// still in flight at its time is skipped, as over an unshared store.
func TestClaimAheadShortInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &batchStore{sharedStore: newSharedStore()}
		ex := &fakeExec{}
		r := newTestRunner(t, st, ex, Config{MinInterval: -1})
		t0 := time.Now()
		mustAdd(t, r, httpJob("fast", ScheduleSpec{Kind: KindEvery, Every: Duration(100 * time.Millisecond), StartAt: t0.Add(time.Second)}))
		slow := httpJob("slow", ScheduleSpec{Kind: KindEvery, Every: Duration(100 * time.Millisecond), StartAt: t0.Add(time.Second)})
		mustAdd(t, r, slow)
		ex.fn = func(ctx context.Context, j *Job, info RunInfo) Result {
			if j.ID == "slow" {
				time.Sleep(150 * time.Millisecond)
			}
			return Result{Status: StatusSuccess, Attempts: 1, HTTPStatus: 200}
		}
		stop := start(t, r)
		time.Sleep(2*time.Second - time.Millisecond)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		var want, wantSlow []time.Time
		for i := range 10 {
			want = append(want, t0.Add(time.Second+time.Duration(i)*100*time.Millisecond))
			if i%2 == 0 {
				wantSlow = append(wantSlow, want[i])
			}
		}
		// Stopped at 2s-1ms, the runner calls the slots it took by then:
		// those up to 2.2s.
		for _, at := range []time.Duration{2000, 2100, 2200} {
			want = append(want, t0.Add(at*time.Millisecond))
		}
		wantSlow = append(wantSlow, t0.Add(2000*time.Millisecond), t0.Add(2200*time.Millisecond))
		if got := ex.scheduledOf("fast"); !slices.EqualFunc(got, want, time.Time.Equal) {
			t.Errorf("fast: calls at %v, want %v", got, want)
		}
		if got := ex.scheduledOf("slow"); !slices.EqualFunc(got, wantSlow, time.Time.Equal) {
			t.Errorf("slow: calls at %v, want every other slot %v", got, wantSlow)
		}
		runs, _ := st.Runs(context.Background(), "slow", 100)
		skipped := 0
		for _, run := range runs {
			if run.Status == StatusSkipped && run.Error == "previous run still in flight" {
				skipped++
			}
		}
		if skipped < 5 {
			t.Errorf("slow: %d slots recorded skipped while the previous run was in flight, want at least 5", skipped)
		}
	})
}

// TestDropKeepsClaimedSlots: a job dropped (its partition moved to
// another runner) after its next slot was claimed ahead still has that
// slot called at its time, by this runner, and recorded with its
// last-run fields only; the following slots are left to the new holder.
// A run in flight when its job is dropped is recorded too.
func TestDropKeepsClaimedSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newSharedStore()
		ex := &fakeExec{}
		r := newTestRunner(t, st, ex, Config{})
		t0 := time.Now()
		mustAdd(t, r, httpJob("d", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Second), StartAt: t0.Add(time.Second)}))
		stop := start(t, r)
		// At 1.9s the slot at 2s is claimed; the partition moves away.
		time.Sleep(1900 * time.Millisecond)
		synctest.Wait()
		st.setOwned()
		if !r.Drop("d") {
			t.Fatal("Drop: the job was not held")
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		got := ex.scheduledOf("d")
		want := []time.Time{t0.Add(time.Second), t0.Add(2 * time.Second)}
		if len(got) != len(want) || !got[0].Equal(want[0]) || !got[1].Equal(want[1]) {
			t.Errorf("slots called: %v, want the ones at 1s and 2s (claimed before the drop)", got)
		}
		runs, err := st.Runs(context.Background(), "d", 10)
		if err != nil || len(runs) != 2 || runs[0].Status != StatusSuccess || !runs[0].ScheduledAt.Equal(want[1]) {
			t.Errorf("runs recorded: %+v, %v; want the slot at 2s recorded as a success", runs, err)
		}
		j, _, _ := st.Read(context.Background(), "d")
		if !j.LastRunAt.Equal(want[1]) || j.LastStatus != StatusSuccess {
			t.Errorf("stored last_run_at %v, last_status %q; want the dropped slot's run", j.LastRunAt, j.LastStatus)
		}
		r.mu.Lock()
		loose := len(r.loose)
		r.mu.Unlock()
		if loose != 0 {
			t.Errorf("%d dropped entries still kept after their runs ended", loose)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestDropDuringClaim: a job dropped while the claim of its slot is on
// its way to the store (a slow database, or a process stopped between
// the claim and its answer) still has the claimed slot called and
// recorded: no claimed row is left without a status.
func TestDropDuringClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &batchStore{sharedStore: newSharedStore()}
		ex := &fakeExec{}
		r := newTestRunner(t, st, ex, Config{})
		t0 := time.Now()
		mustAdd(t, r, httpJob("d", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Second), StartAt: t0.Add(time.Second)}))
		st.bmu.Lock()
		st.holdNext = 500 * time.Millisecond
		st.bmu.Unlock()
		stop := start(t, r)
		// The slot at 1s is claimed from 0.75s on; its claim is held for
		// 0.5s, and the partition moves away meanwhile.
		time.Sleep(900 * time.Millisecond)
		st.setOwned()
		if !r.Drop("d") {
			t.Fatal("Drop: the job was not held")
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		claimed := st.claimedAt()
		runs, err := st.Runs(context.Background(), "d", 10)
		if err != nil {
			t.Fatal(err)
		}
		recorded := map[string]Status{}
		for _, run := range runs {
			recorded[run.ID] = run.Status
		}
		for id := range claimed {
			if recorded[id] == "" {
				t.Errorf("claimed run %s has no record with a status; records %+v", id, runs)
			}
		}
		if len(claimed) == 0 {
			t.Fatal("no slot was claimed")
		}
	})
}

// TestNextRunAtWaitsForClaim: over a shared store, the next_run_at a
// runner writes never passes a slot it took whose claim is not written
// yet. A runner that dies (or stops, or loses the job's partition) with
// a claim on its way leaves that slot to the runner that takes the job
// over, instead of a next_run_at after it and a slot that no runner
// records.
func TestNextRunAtWaitsForClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &batchStore{sharedStore: newSharedStore()}
		r := newTestRunner(t, st, &fakeExec{}, Config{})
		t0 := time.Now()
		slot := t0.Add(time.Second)
		mustAdd(t, r, httpJob("n", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Second), StartAt: slot}))
		st.bmu.Lock()
		st.holdNext = 500 * time.Millisecond
		st.bmu.Unlock()
		stop := start(t, r)
		defer stop()
		stored := func() time.Time {
			synctest.Wait()
			j, _, err := st.Read(context.Background(), "n")
			if err != nil {
				t.Fatal(err)
			}
			return j.NextRunAt
		}
		// The slot at 1s is taken at 0.75s; its claim takes until 1.25s.
		time.Sleep(900 * time.Millisecond)
		if got := stored(); got.After(slot) {
			t.Errorf("while the claim of the slot at %v is on its way, next_run_at is %v: a runner taking the job over would skip it",
				slot.Sub(t0), got.Sub(t0))
		}
		// Once claimed, next_run_at moves on.
		time.Sleep(500 * time.Millisecond)
		if got := stored(); !got.Equal(slot.Add(time.Second)) {
			t.Errorf("after the claim, next_run_at is %v, want %v", got.Sub(t0), 2*time.Second)
		}
	})
}

// TestLapsedLeaseKeepsSlots: a runner whose lease on a job lapses for a
// while (renewals held up) and then comes back does not roll the job on
// past the slots of the lapse without a record: each slot is called or
// recorded, and next_run_at is not written past them meanwhile.
func TestLapsedLeaseKeepsSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newSharedStore()
		ex := &fakeExec{}
		r := newTestRunner(t, st, ex, Config{})
		t0 := time.Now()
		first := t0.Add(time.Second)
		mustAdd(t, r, httpJob("l", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Second), StartAt: first}))
		stop := start(t, r)
		time.Sleep(500 * time.Millisecond)
		st.setOwned() // the lease lapses: slots 1s and 2s come meanwhile
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if j, _, err := st.Read(context.Background(), "l"); err != nil || j.NextRunAt.After(first) {
			t.Errorf("during the lapse next_run_at is %v (%v), want at most %v", j.NextRunAt.Sub(t0), err, time.Second)
		}
		st.setOwned("l") // back at 2.5s
		time.Sleep(2*time.Second + 100*time.Millisecond)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		runs, err := st.Runs(context.Background(), "l", 100)
		if err != nil {
			t.Fatal(err)
		}
		covered := slotRecords(runs, t0, time.Second)
		for at := time.Second; at <= 4*time.Second; at += time.Second {
			if len(covered[at]) == 0 {
				t.Errorf("slot %v has no record; records: %v", at, covered)
			}
		}
	})
}

// TestRolledOnLoggedOnce: after a long downtime, the every jobs whose
// slot passed are rolled on with one log record, not one per job.
func TestRolledOnLoggedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := NewMemStore()
		past := time.Now().Add(-time.Hour)
		for i := range 100 {
			j := httpJob(fmt.Sprint("r", i), ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute), StartAt: past})
			j.Paused, j.Type, j.HTTP.Method = false, JobTypeHTTP, "GET"
			j.Timeout, j.RetryBackoff = Duration(time.Second), Duration(time.Second)
			j.NextRunAt = past
			if err := st.Save(context.Background(), j); err != nil {
				t.Fatal(err)
			}
		}
		var logs strings.Builder
		var mu sync.Mutex
		r := newTestRunner(t, st, &fakeExec{}, Config{Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))})
		if err := r.Load(context.Background()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		out := logs.String()
		mu.Unlock()
		if n := strings.Count(out, "rolled on"); n != 1 || !strings.Contains(out, "jobs=100") {
			t.Errorf("%d records of slots rolled on, want one naming 100 jobs:\n%s", n, out)
		}
	})
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// switchView is one runner's view of a shared store in which it owns
// every job or none, as the test switches it.
type switchView struct {
	*sharedStore
	owns atomic.Bool
}

func (v *switchView) Owns(id string) bool { return v.owns.Load() }

func (v *switchView) LoadHeld(ctx context.Context) ([]Job, []int64, error) {
	if !v.owns.Load() {
		return nil, nil, nil
	}
	return v.sharedStore.LoadHeld(ctx)
}

// TestLapsedLeaseTakenOver: a runner whose lease lapses while another
// runner takes the job over, calls its slots and moves next_run_at on,
// and whose lease then comes back, resumes where the other got to: each
// slot has one row (called, or recorded missed once), none two.
func TestLapsedLeaseTakenOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newSharedStore()
		bv, cv := &switchView{sharedStore: st}, &switchView{sharedStore: st}
		bv.owns.Store(true)
		b := newTestRunner(t, bv, &fakeExec{}, Config{})
		c := newTestRunner(t, cv, &fakeExec{}, Config{})
		ctx := context.Background()
		t0 := time.Now()
		mustAdd(t, b, httpJob("l", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Second), StartAt: t0.Add(time.Second)}))
		stopB, stopC := start(t, b), start(t, c)
		time.Sleep(2500 * time.Millisecond)
		bv.owns.Store(false) // b's lease lapses: the slots at 3s and 4s come
		time.Sleep(2 * time.Second)
		cv.owns.Store(true) // c takes the job over at 4.5s, as its watcher does
		j, ver, err := st.Read(ctx, "l")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Hold(j, ver); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		cv.owns.Store(false) // and gives it back at 7.5s
		c.Drop("l")
		bv.owns.Store(true)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if err := errors.Join(stopB(), stopC()); err != nil {
			t.Fatal(err)
		}
		slotsOnce(t, st, "l", t0, 10*time.Second)
	})
}

// slotRecords maps each slot of a job every interval, as its offset from
// t0, to the records of runs that stand for it ("status reason" each), a
// slotsOnce fails t unless each slot of job id, every second from t0+1s
// to t0+last, has exactly one row in st: called, skipped or missed.
func slotsOnce(t *testing.T, st *sharedStore, id string, t0 time.Time, last time.Duration) {
	t.Helper()
	runs, err := st.Runs(context.Background(), id, 100)
	if err != nil {
		t.Fatal(err)
	}
	covered := slotRecords(runs, t0, time.Second)
	for at := time.Second; at <= last; at += time.Second {
		if len(covered[at]) != 1 {
			t.Errorf("slot %v has %d rows, want 1: %v", at, len(covered[at]), covered[at])
		}
	}
}

// run standing for max(Slots, 1) slots from its ScheduledAt.
func slotRecords(runs []Run, t0 time.Time, every time.Duration) map[time.Duration][]string {
	out := map[time.Duration][]string{}
	for _, run := range runs {
		for k := range max(run.Slots, 1) {
			at := run.ScheduledAt.Add(time.Duration(k) * every).Sub(t0)
			out[at] = append(out[at], string(run.Status)+" "+run.Reason)
		}
	}
	return out
}

// gatedView is a switchView whose runner's bookkeeping and run records
// wait while gate is set: a runner held up (its recorder behind, or its
// process stopped) with its writes on their way.
type gatedView struct {
	*switchView
	mu   sync.Mutex
	gate chan struct{}
}

func (v *gatedView) hold() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.gate = make(chan struct{})
}

func (v *gatedView) open() {
	v.mu.Lock()
	defer v.mu.Unlock()
	close(v.gate)
	v.gate = nil
}

func (v *gatedView) RecordBatch(ctx context.Context, recs []Recorded) error {
	v.mu.Lock()
	g := v.gate
	v.mu.Unlock()
	if g != nil {
		<-g
	}
	return v.switchView.RecordBatch(ctx, recs)
}

// TestTakeoverAfterMovedBack: a job's partition moves from b to c after
// slots passed without a holder, and back to b while c's writes are held
// up (its next_run_at past the slots it called is not stored yet). b,
// taking the job over again from the stale next_run_at, records as
// missed none of the slots c called or recorded: each slot has one row.
func TestTakeoverAfterMovedBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newSharedStore()
		bv, cv := &switchView{sharedStore: st}, &gatedView{switchView: &switchView{sharedStore: st}}
		bv.owns.Store(true)
		b := newTestRunner(t, bv, &fakeExec{}, Config{})
		c := newTestRunner(t, cv, &fakeExec{}, Config{})
		t0 := time.Now()
		mustAdd(t, b, httpJob("m", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Second), StartAt: t0.Add(time.Second)}))
		stopB, stopC := start(t, b), start(t, c)
		time.Sleep(2500 * time.Millisecond) // b calls the slots at 1s and 2s
		bv.owns.Store(false)                // b loses the partition; no runner holds it
		b.Drop("m")
		time.Sleep(2 * time.Second) // the slots at 3s and 4s pass
		cv.hold()                   // c's writes are held up from here
		cv.owns.Store(true)         // c takes the job over at 4.5s
		deliver(t, st, c, "m")
		time.Sleep(3 * time.Second) // c calls the slots at 5s, 6s and 7s
		cv.owns.Store(false)        // and the partition goes back to b at 7.5s
		c.Drop("m")
		bv.owns.Store(true)
		deliver(t, st, b, "m")
		synctest.Wait()
		cv.open()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if err := errors.Join(stopB(), stopC()); err != nil {
			t.Fatal(err)
		}
		slotsOnce(t, st, "m", t0, 9*time.Second)
	})
}

// TestTakeoverAfterStaleWrite: a runner b whose bookkeeping write, made
// while it held the job, is held up (its process stopped) until after c
// took the job over, called slots and stored its next_run_at, moves the
// stored next_run_at back; when the job comes back to b, b records as
// missed none of the slots c called or recorded: each slot has one row.
func TestTakeoverAfterStaleWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newSharedStore()
		bv, cv := &gatedView{switchView: &switchView{sharedStore: st}}, &switchView{sharedStore: st}
		bv.owns.Store(true)
		b := newTestRunner(t, bv, &fakeExec{}, Config{})
		c := newTestRunner(t, cv, &fakeExec{}, Config{})
		ctx := context.Background()
		t0 := time.Now()
		mustAdd(t, b, httpJob("s", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Second), StartAt: t0.Add(time.Second)}))
		stopB, stopC := start(t, b), start(t, c)
		time.Sleep(2600 * time.Millisecond) // b calls the slots at 1s and 2s
		bv.hold()                           // b's write of next_run_at 4s, after its claim of 3s, waits
		time.Sleep(300 * time.Millisecond)
		bv.owns.Store(false) // b loses the partition at 2.9s (and calls the slot at 3s it claimed)
		b.Drop("s")
		time.Sleep(3600 * time.Millisecond) // the slots at 4s, 5s and 6s pass with no holder
		cv.owns.Store(true)                 // c takes the job over at 6.5s
		deliver(t, st, c, "s")
		time.Sleep(2 * time.Second) // c calls the slots at 7s and 8s
		cv.owns.Store(false)        // and the partition goes back to b at 8.5s,
		c.Drop("s")
		bv.open() // after b's held-up write of next_run_at 4s landed
		synctest.Wait()
		if got, _, _ := st.Read(ctx, "s"); !got.NextRunAt.Equal(t0.Add(4 * time.Second)) {
			t.Fatalf("stored next_run_at %v, want the held-up write's %v: the test did not reproduce it", got.NextRunAt.Sub(t0), 4*time.Second)
		}
		bv.owns.Store(true)
		deliver(t, st, b, "s")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if err := errors.Join(stopB(), stopC()); err != nil {
			t.Fatal(err)
		}
		slotsOnce(t, st, "s", t0, 10*time.Second)
	})
}
