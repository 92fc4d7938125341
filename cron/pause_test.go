package cron

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A job paused until a time resumes by itself then, also in a runner
// started again over the same store; a plain pause and a resume clear
// paused_until.
func TestPauseUntil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		ex := &fakeExec{}
		st := NewMemStore()
		r := newTestRunner(t, st, ex, Config{})
		ctx := context.Background()
		mustAdd(t, r, httpJob("e", ScheduleSpec{Kind: KindEvery, Every: Duration(10 * time.Second), StartAt: t0}))
		stop := start(t, r)
		time.Sleep(5 * time.Second)
		until := t0.Add(35 * time.Second)
		p, err := r.Pause(ctx, "e", until)
		if err != nil {
			t.Fatalf("Pause: %v", err)
		}
		if !p.Paused || !p.PausedUntil.Equal(until) || p.LastStatus != StatusPaused {
			t.Errorf("paused job: paused %v until %v status %q; want true %v paused", p.Paused, p.PausedUntil, p.LastStatus, until)
		}
		if stored, _ := st.Load(ctx); !stored[0].PausedUntil.Equal(until) {
			t.Errorf("stored paused_until %v, want %v", stored[0].PausedUntil, until)
		}
		time.Sleep(31 * time.Second) // t0+36s: resumed at t0+35s, next slot t0+40s
		synctest.Wait()
		j := mustGet(t, r, "e")
		if j.Paused || !j.PausedUntil.IsZero() || !j.NextRunAt.Equal(t0.Add(40*time.Second)) {
			t.Errorf("after until: paused %v until %v next %v; want false zero %v", j.Paused, j.PausedUntil, j.NextRunAt, t0.Add(40*time.Second))
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if diff := cmp.Diff([]time.Time{t0.Add(40 * time.Second)}, ex.scheduledOf("e")); diff != "" {
			t.Errorf("runs (-want +got):\n%s", diff)
		}

		// A plain pause after a timed one clears paused_until.
		if _, err := r.Pause(ctx, "e", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if p, _ := r.Pause(ctx, "e", time.Time{}); !p.Paused || !p.PausedUntil.IsZero() {
			t.Errorf("plain pause: paused %v until %v, want true zero", p.Paused, p.PausedUntil)
		}
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		if j := mustGet(t, r, "e"); !j.Paused {
			t.Errorf("a plain pause ended by itself")
		}

		// The pause survives a restart and ends in the next runner.
		until = time.Now().Add(time.Minute)
		if _, err := r.Pause(ctx, "e", until); err != nil {
			t.Fatal(err)
		}
		_ = stop()
		r2 := newTestRunner(t, st, ex, Config{})
		stop2 := start(t, r2)
		time.Sleep(61 * time.Second)
		synctest.Wait()
		if j := mustGet(t, r2, "e"); j.Paused || !j.PausedUntil.IsZero() {
			t.Errorf("restarted runner: paused %v until %v after until, want resumed", j.Paused, j.PausedUntil)
		}
		if stored, _ := st.Load(ctx); stored[0].Paused || !stored[0].PausedUntil.IsZero() {
			t.Errorf("stored after the timed resume: paused %v until %v", stored[0].Paused, stored[0].PausedUntil)
		}

		// An until not in the future names until.
		for _, u := range []time.Time{time.Now(), time.Now().Add(-time.Second)} {
			var ve *ValidationError
			if _, err := r2.Pause(ctx, "e", u); !errors.As(err, &ve) || ve.Field != "until" {
				t.Errorf("Pause(%v): %v, want a ValidationError naming until", u, err)
			}
		}
		if _, err := r2.Pause(ctx, "nope", time.Now().Add(time.Hour)); !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown id: %v, want ErrNotFound", err)
		}
		_ = stop2()
	})
}

// A job resumed by hand before its paused_until is not touched when the
// time comes; a job removed meanwhile neither.
func TestPauseUntilResumedEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ex := &fakeExec{}
		r := newTestRunner(t, nil, ex, Config{})
		ctx := context.Background()
		mustAdd(t, r, httpJob("a", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute)}))
		mustAdd(t, r, httpJob("b", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute)}))
		stop := start(t, r)
		for _, id := range []string{"a", "b"} {
			if _, err := r.Pause(ctx, id, time.Now().Add(10*time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := r.Resume(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Pause(ctx, "a", time.Time{}); err != nil {
			t.Fatal(err)
		}
		if err := r.Remove(ctx, "b"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(11 * time.Minute)
		synctest.Wait()
		if j := mustGet(t, r, "a"); !j.Paused {
			t.Errorf("job paused again without until was resumed by the old until")
		}
		_ = stop()
	})
}

// While the service is paused no slot is called (they are one skipped
// record "service paused"), run-now is refused, and the jobs keep enabled; the
// pause is kept in the store and ends by itself at until.
func TestPauseAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		ex := &fakeExec{}
		obs := &recObserver{}
		st := NewMemStore()
		r := newTestRunner(t, st, ex, Config{Observer: obs})
		ctx := context.Background()
		mustAdd(t, r, httpJob("e", ScheduleSpec{Kind: KindEvery, Every: Duration(10 * time.Second), StartAt: t0}))
		stop := start(t, r)
		time.Sleep(5 * time.Second)
		p, err := r.PauseAll(ctx, t0.Add(45*time.Second), "db upgrade")
		if err != nil {
			t.Fatalf("PauseAll: %v", err)
		}
		want := PauseState{Paused: true, Until: t0.Add(45 * time.Second).UTC(), Reason: "db upgrade", Since: t0.Add(5 * time.Second).UTC()}
		if diff := cmp.Diff(want, p); diff != "" {
			t.Errorf("PauseAll (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, r.Paused()); diff != "" {
			t.Errorf("Paused (-want +got):\n%s", diff)
		}
		if stored, _ := st.LoadPause(ctx); !stored.Paused {
			t.Errorf("the store keeps no pause")
		}
		if _, err := r.RunNow(ctx, "e", RunOptions{Force: true}); !errors.Is(err, ErrServicePaused) {
			t.Errorf("RunNow while paused: %v, want ErrServicePaused", err)
		}
		time.Sleep(45 * time.Second) // t0+50s
		synctest.Wait()
		if diff := cmp.Diff([]time.Time{t0.Add(50 * time.Second)}, ex.scheduledOf("e")); diff != "" {
			t.Errorf("calls (-want +got):\n%s", diff)
		}
		// The four slots of the pause (t0+10s to t0+40s) are one record,
		// handed over at the first slot called after it.
		if diff := cmp.Diff([]Status{StatusSkipped, StatusSuccess}, obs.statuses("e")); diff != "" {
			t.Errorf("runs (-want +got):\n%s", diff)
		}
		if runs, err := r.Runs(ctx, "e", 10); err != nil || len(runs) != 2 {
			t.Errorf("Runs = %+v, %v; want the call and one record of the pause", runs, err)
		} else if sk := runs[1]; sk.Slots != 4 || sk.Reason != ReasonServicePaused || !sk.ScheduledAt.Equal(t0.Add(10*time.Second)) {
			t.Errorf("the record of the pause: %d slots from %s, reason %q; want 4 from %s, %q",
				sk.Slots, sk.ScheduledAt, sk.Reason, t0.Add(10*time.Second), ReasonServicePaused)
		}
		if j := mustGet(t, r, "e"); j.Paused {
			t.Errorf("the service pause disabled the job")
		}
		if got := r.Paused(); got.Paused {
			t.Errorf("Paused after until: %+v, want none", got)
		}
		// The runner ended the pause at its until: cleared in the store
		// and audited as its own, though no job's timed pause woke its
		// pause timer.
		if stored, _ := st.LoadPause(ctx); stored.Paused {
			t.Errorf("the store keeps the pause after its until: %+v", stored)
		}
		if got, _ := audited(t, r, 0); !slices.Contains(got, "runner admin resume-all ") {
			t.Errorf("the end of the pause is not audited as the runner's: %v", got)
		}

		// A pause with no end survives a restart until ResumeAll.
		if _, err := r.PauseAll(ctx, time.Time{}, ""); err != nil {
			t.Fatal(err)
		}
		_ = stop()
		r2 := newTestRunner(t, st, ex, Config{})
		stop2 := start(t, r2)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if n := len(ex.scheduledOf("e")); n != 1 {
			t.Errorf("calls after a restart while paused: %d, want 1", n)
		}
		if !r2.Paused().Paused {
			t.Errorf("restarted runner is not paused")
		}
		if _, err := r2.ResumeAll(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := len(ex.scheduledOf("e")); n != 2 {
			t.Errorf("calls after ResumeAll: %d, want 2", n)
		}

		var ve *ValidationError
		if _, err := r2.PauseAll(ctx, time.Now().Add(-time.Second), ""); !errors.As(err, &ve) || ve.Field != "until" {
			t.Errorf("PauseAll(past): %v, want a ValidationError naming until", err)
		}
		if _, err := r2.PauseAll(ctx, time.Time{}, string(make([]byte, MaxPauseReason+1))); !errors.As(err, &ve) || ve.Field != "reason" {
			t.Errorf("PauseAll(long reason): %v, want a ValidationError naming reason", err)
		}
		_ = stop2()
	})
}

func TestAuditBuffer(t *testing.T) {
	ctx := context.Background()
	b := &AuditBuffer{Keep: 3}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 5 {
		who := "ann"
		if i%2 == 1 {
			who = "bob"
		}
		e, err := b.AppendAudit(ctx, AuditEntry{Time: t0.Add(time.Duration(i) * time.Minute), Who: who, JobID: "j"})
		if err != nil || e.ID != int64(i+1) {
			t.Fatalf("AppendAudit %d: id %d err %v", i, e.ID, err)
		}
	}
	ids := func(es []AuditEntry) []int64 {
		var out []int64
		for _, e := range es {
			out = append(out, e.ID)
		}
		return out
	}
	for _, tt := range []struct {
		q        AuditQuery
		want     []int64
		wantMore bool
	}{
		{AuditQuery{}, []int64{3, 4, 5}, false},
		{AuditQuery{Limit: 2}, []int64{3, 4}, true},
		{AuditQuery{After: 4}, []int64{5}, false},
		{AuditQuery{Who: "bob"}, []int64{4}, false},
		{AuditQuery{Since: t0.Add(4 * time.Minute)}, []int64{5}, false},
		{AuditQuery{JobID: "x"}, nil, false},
	} {
		got, more, err := b.Audit(ctx, tt.q)
		if err != nil || !cmp.Equal(tt.want, ids(got)) || more != tt.wantMore {
			t.Errorf("Audit(%+v) = %v %v %v, want %v %v", tt.q, ids(got), more, err, tt.want, tt.wantMore)
		}
	}
	if err := b.Restore(AuditEntry{ID: 5}); err == nil {
		t.Errorf("Restore of an old id: no error")
	}
}

// TestPauseOutlivesRunInFlight: a slot that ends after its job was paused
// leaves last_status paused (the pause is the last word until a resume),
// while its own record keeps its outcome.
func TestPauseOutlivesRunInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := NewMemStore()
		ex := &fakeExec{fn: func(ctx context.Context, j *Job, info RunInfo) Result {
			time.Sleep(2 * time.Second)
			return Result{Status: StatusSuccess, Attempts: 1}
		}}
		r := newTestRunner(t, st, ex, Config{})
		ctx := context.Background()
		mustAdd(t, r, httpJob("f", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute), StartAt: time.Now().Add(time.Second)}))
		stop := start(t, r)
		defer stop()
		time.Sleep(1500 * time.Millisecond) // the run of 1s is in flight
		if _, err := r.Pause(ctx, "f", time.Time{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		j, err := r.Get(ctx, "f")
		if err != nil {
			t.Fatal(err)
		}
		if !j.Paused || j.LastStatus != StatusPaused {
			t.Errorf("after a run that ended past the pause: paused %v, last_status %q; want paused", j.Paused, j.LastStatus)
		}
		runs, err := r.Runs(ctx, "f", 10)
		if err != nil || len(runs) != 1 || runs[0].Status != StatusSuccess {
			t.Errorf("the run's own record: %+v (%v), want one success", runs, err)
		}
	})
}

// TestPauseOutlivesSkipInFlight: over a shared store, a slot claimed ahead
// of a pause is still taken at its time; when the job's previous run is
// in flight then, the slot is skipped, and its record says so, but the
// job's last_status stays paused (the pause is the last word), also as
// stored.
func TestPauseOutlivesSkipInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newSharedStore()
		ex := &fakeExec{fn: func(ctx context.Context, j *Job, info RunInfo) Result {
			time.Sleep(2500 * time.Millisecond) // longer than the interval: the next slot finds it in flight
			return Result{Status: StatusSuccess, Attempts: 1}
		}}
		r := newTestRunner(t, st, ex, Config{})
		ctx := context.Background()
		t0 := time.Now()
		mustAdd(t, r, httpJob("f", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Second), StartAt: t0.Add(time.Second)}))
		stop := start(t, r)
		defer stop()
		// At 1s the first run starts; the slot at 2s is claimed ahead
		// (a ClaimAhead before it). Pause just before that slot.
		time.Sleep(2*time.Second - time.Millisecond)
		if _, err := r.Pause(ctx, "f", time.Time{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(4 * time.Second)
		synctest.Wait()
		runs, err := r.Runs(ctx, "f", 10)
		if err != nil {
			t.Fatal(err)
		}
		skipped := false
		for _, run := range runs {
			skipped = skipped || (run.Status == StatusSkipped && run.Reason == ReasonOverlap)
		}
		if !skipped {
			t.Fatalf("no slot skipped for the run in flight: %+v; the test does not reach the case", runs)
		}
		j, err := r.Get(ctx, "f")
		if err != nil {
			t.Fatal(err)
		}
		if !j.Paused || j.LastStatus != StatusPaused {
			t.Errorf("after a slot claimed ahead of the pause was skipped: paused %v, last_status %q; want paused", j.Paused, j.LastStatus)
		}
		stored, _, err := st.Read(ctx, "f")
		if err != nil {
			t.Fatal(err)
		}
		if stored.LastStatus != StatusPaused {
			t.Errorf("stored last_status %q, want paused", stored.LastStatus)
		}
	})
}

// slowPauseRead is a MemStore whose reads of the service pause, from the
// armed one on, announce themselves and wait to be let go.
type slowPauseRead struct {
	*MemStore
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (s *slowPauseRead) LoadPause(ctx context.Context) (PauseState, error) {
	p, err := s.MemStore.LoadPause(ctx)
	if s.armed.CompareAndSwap(true, false) {
		s.entered <- struct{}{}
		<-s.release
	}
	return p, err
}

// TestPauseRefreshKeepsNewerPause: the pause timer's refresh reads the
// service pause from the store; a PauseAll made while that read is out
// must not be undone by it (the read saw the state before the pause).
// It runs on the wall clock: PauseAll waits on a mutex, which a synctest
// bubble does not count as blocked.
func TestPauseRefreshKeepsNewerPause(t *testing.T) {
	ctx := context.Background()
	st := &slowPauseRead{MemStore: NewMemStore(), entered: make(chan struct{}), release: make(chan struct{})}
	r := newTestRunner(t, st, &fakeExec{}, Config{PauseRefresh: time.Second})
	stop := start(t, r)
	defer stop()
	st.armed.Store(true)
	select {
	case <-st.entered: // the refresh read the store: not paused
	case <-time.After(10 * time.Second):
		t.Fatal("no refresh of the service pause within 10s")
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.PauseAll(ctx, time.Time{}, "maintenance")
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // PauseAll saves the pause, or waits for the read
	close(st.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the refresh, let go, stores what it read
	if p := r.Paused(); !p.Paused {
		t.Errorf("Paused() = %+v after PauseAll; a refresh read before it undid the pause", p)
	}
}
