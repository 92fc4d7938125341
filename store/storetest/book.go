package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/fsm"
	"github.com/ksana-dev/ksana/scheduler"
)

// TestJobBook runs the conformance suite of the book a
// [scheduler.JobStore] keeps beside each job's lifecycle (its spec, tried
// nodes, waiters and outcome). newStore returns an empty store with the
// default attempts.
func TestJobBook(t *testing.T, newStore func(t *testing.T) scheduler.JobStore) {
	ctx := context.Background()
	spec := scheduler.JobSpec{RequestID: "r1", SessionID: "s1", TurnID: "t1", Pool: "zh-en", Model: "m", Reason: "max_duration", Payload: []byte{0, 1, 2, 0xff}}
	t.Run("OpenOnce", func(t *testing.T) {
		b := newStore(t)
		rec, e, created, err := b.Open(ctx, "j1", spec, "", time.Now().Add(time.Hour))
		if err != nil || !created {
			t.Fatalf("Open = %v, %v; want created", created, err)
		}
		want := scheduler.BookEntry{Spec: spec, Waiters: []string{"s1"}}
		if d := cmp.Diff(want, e); d != "" {
			t.Errorf("Open entry (-want +got):\n%s", d)
		}
		if rec.ID != "j1" || rec.Job != fsm.New() || rec.NodeID != "" {
			t.Errorf("Open record = %+v, want j1 in %+v", rec, fsm.New())
		}
		other := spec
		other.SessionID, other.Payload = "s2", []byte("other")
		_, e, created, err = b.Open(ctx, "j1", other, "", time.Now().Add(time.Hour))
		if err != nil || created {
			t.Fatalf("second Open = %v, %v; want not created", created, err)
		}
		if d := cmp.Diff(want, e); d != "" {
			t.Errorf("second Open returned (-want +got):\n%s", d)
		}
		got, err := b.Entry(ctx, "j1")
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("Entry (-want +got):\n%s", d)
		}
		if _, err := b.Entry(ctx, "nope"); !errors.Is(err, scheduler.ErrJobNotFound) {
			t.Errorf("Entry(nope) = %v, want ErrJobNotFound", err)
		}
	})
	t.Run("OpenDispatched", func(t *testing.T) {
		b := newStore(t)
		rec, e, created, err := b.Open(ctx, "d1", spec, "n1", time.Now().Add(time.Hour))
		if err != nil || !created {
			t.Fatalf("Open with a node = %v, %v; want created", created, err)
		}
		if rec.State != fsm.Dispatched || rec.Attempt != 1 || rec.NodeID != "n1" || rec.DispatchedAt.IsZero() {
			t.Errorf("Open with a node: record %+v, want DISPATCHED attempt 1 on n1 with its dispatch time", rec)
		}
		if len(e.Tried) != 1 || e.Tried[0] != "n1" {
			t.Errorf("Open with a node: tried %v, want [n1]", e.Tried)
		}
		got, err := b.Job(ctx, "d1")
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(rec, got); d != "" {
			t.Errorf("Job after Open with a node (-Open +Job):\n%s", d)
		}
		// An existing job is left as it is, whatever the node.
		again, _, created, err := b.Open(ctx, "d1", spec, "n2", time.Now().Add(time.Hour))
		if err != nil || created || again.NodeID != "n1" {
			t.Errorf("second Open with another node = %+v, %v, %v; want the job on n1, not created", again, created, err)
		}
		// The job moves on from there as any dispatched job.
		if _, err := b.ApplyJob(ctx, "d1", fsm.Ack, 1, "n1"); err != nil {
			t.Errorf("ack of a job opened dispatched: %v", err)
		}
	})
	t.Run("ReleaseJobs", func(t *testing.T) {
		b := newStore(t)
		for _, id := range []string{"r1", "r2", "r3"} {
			if _, _, _, err := b.Open(ctx, id, spec, "n1", time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range []string{"r1", "r2"} {
			if _, _, err := b.Finish(ctx, id, fsm.Result, 1, "n1", scheduler.Outcome{Status: scheduler.OutcomeResult}); err != nil {
				t.Fatal(err)
			}
		}
		jobs := []scheduler.JobAttempt{{ID: "r1", Attempt: 1}, {ID: "r2", Attempt: 1}, {ID: "r3", Attempt: 1}, {ID: "nope", Attempt: 1}}
		trs, errs := b.ReleaseJobs(ctx, jobs)
		if len(trs) != 4 || len(errs) != 4 {
			t.Fatalf("ReleaseJobs of 4 jobs: %d transitions, %d errors", len(trs), len(errs))
		}
		for i := range 2 {
			if errs[i] != nil || trs[i].Job.State != fsm.Released || trs[i].Duplicate {
				t.Errorf("release of %s: %+v, %v; want RELEASED", jobs[i].ID, trs[i], errs[i])
			}
		}
		if !errors.Is(errs[2], fsm.ErrInvalidTransition) {
			t.Errorf("release of a DISPATCHED job: %v, want ErrInvalidTransition", errs[2])
		}
		if !errors.Is(errs[3], scheduler.ErrJobNotFound) {
			t.Errorf("release of an unknown job: %v, want ErrJobNotFound", errs[3])
		}
		trs, errs = b.ReleaseJobs(ctx, jobs[:1])
		if errs[0] != nil || !trs[0].Duplicate {
			t.Errorf("second release: %+v, %v; want a duplicate", trs[0], errs[0])
		}
		if rec, _ := b.Job(ctx, "r3"); rec.State != fsm.Dispatched {
			t.Errorf("r3 after a refused release: %s, want DISPATCHED", rec.State)
		}
	})
	t.Run("ConcurrentOpen", func(t *testing.T) {
		b := newStore(t)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range 32 {
			wg.Go(func() {
				s := spec
				s.SessionID = fmt.Sprintf("s%d", i)
				_, _, created, err := b.Open(ctx, "c", s, "", time.Now().Add(time.Hour))
				if err != nil {
					t.Error(err)
				}
				if created {
					wins.Add(1)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Errorf("32 concurrent Opens: %d created, want 1", wins.Load())
		}
	})
	t.Run("TriedWatchFinish", func(t *testing.T) {
		b := newStore(t)
		if _, _, _, err := b.Open(ctx, "j", spec, "", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		// Each dispatch adds its node to the tried nodes, once.
		for i, n := range []string{"n1", "n2", "n1"} {
			if _, err := b.ApplyJob(ctx, "j", fsm.Dispatch, i+1, n); err != nil {
				t.Fatal(err)
			}
			if i < 2 {
				// A step that does not end the job stores no outcome.
				_, e, err := b.Finish(ctx, "j", fsm.Failover, i+1, n, scheduler.Outcome{Status: scheduler.OutcomeFailed, Error: "early"})
				if err != nil || e.Outcome != nil {
					t.Fatalf("failover of attempt %d: outcome %v, %v; want none", i+1, e.Outcome, err)
				}
			}
		}
		if _, done, err := b.Watch(ctx, "j", "s2"); err != nil || done {
			t.Fatalf("Watch before the end = %v, %v", done, err)
		}
		if _, done, err := b.Watch(ctx, "j", "s2"); err != nil || done {
			t.Fatalf("second Watch = %v, %v", done, err)
		}
		out := scheduler.Outcome{Status: scheduler.OutcomeResult, NodeID: "n1", Attempt: 3, Payload: []byte("ok")}
		// A refused step stores nothing.
		if _, _, err := b.Finish(ctx, "j", fsm.Result, 3, "n2", out); !errors.Is(err, scheduler.ErrWrongNode) {
			t.Fatalf("result from another node = %v, want ErrWrongNode", err)
		}
		if e, _ := b.Entry(ctx, "j"); e.Outcome != nil {
			t.Fatalf("a refused result stored %v", e.Outcome)
		}
		tr, e, err := b.Finish(ctx, "j", fsm.Result, 3, "n1", out)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Job.State != fsm.Finished || tr.FreeNode != "n1" {
			t.Errorf("result: %+v, want FINISHED freeing n1", tr)
		}
		// Finish leaves out the request's payload; Entry has it.
		want := scheduler.BookEntry{Spec: spec, Tried: []string{"n1", "n2"}, Waiters: []string{"s1", "s2"}, Outcome: &out}
		want.Spec.Payload = nil
		if d := cmp.Diff(want, e); d != "" {
			t.Errorf("Finish (-want +got):\n%s", d)
		}
		// A second Finish keeps the first outcome.
		tr, e, err = b.Finish(ctx, "j", fsm.Result, 3, "n1", scheduler.Outcome{Status: scheduler.OutcomeFailed, Error: "late"})
		if err != nil || !tr.Duplicate {
			t.Fatalf("second result = %+v, %v; want a duplicate", tr, err)
		}
		if d := cmp.Diff(want, e); d != "" {
			t.Errorf("second Finish (-want +got):\n%s", d)
		}
		// A watcher after the end gets the outcome and is not added.
		got, done, err := b.Watch(ctx, "j", "s3")
		if err != nil || !done {
			t.Fatalf("Watch after the end = %v, %v; want done", done, err)
		}
		if d := cmp.Diff(out, got); d != "" {
			t.Errorf("Watch outcome (-want +got):\n%s", d)
		}
		if e, _ := b.Entry(ctx, "j"); len(e.Waiters) != 2 {
			t.Errorf("waiters after a late Watch = %v, want s1 and s2", e.Waiters)
		}
	})
	t.Run("WatchRacesFinish", func(t *testing.T) {
		// Every session either gets the outcome from Watch or is listed by
		// Finish: none is missed.
		b := newStore(t)
		if _, _, _, err := b.Open(ctx, "w", spec, "", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		seen := map[string]bool{"s1": true}
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Go(func() {
				s := fmt.Sprintf("w%d", i)
				_, done, err := b.Watch(ctx, "w", s)
				if err != nil {
					t.Error(err)
				}
				if done {
					mu.Lock()
					seen[s] = true
					mu.Unlock()
				}
			})
			if i == 20 {
				_, e, err := b.Finish(ctx, "w", fsm.Fail, 1, "", scheduler.Outcome{Status: scheduler.OutcomeFailed, Error: "no_node"})
				if err != nil || e.Outcome == nil {
					t.Fatalf("fail = %v, %v; want the outcome stored", e.Outcome, err)
				}
				mu.Lock()
				for _, s := range e.Waiters {
					if seen[s] && s != "s1" {
						t.Errorf("session %s both listed and answered", s)
					}
					seen[s] = true
				}
				mu.Unlock()
			}
		}
		wg.Wait()
		e, _ := b.Entry(ctx, "w")
		mu.Lock()
		defer mu.Unlock()
		for _, s := range e.Waiters {
			seen[s] = true
		}
		if len(seen) != 41 {
			t.Errorf("%d sessions accounted for, want 41", len(seen))
		}
	})
	t.Run("BadInput", func(t *testing.T) {
		b := newStore(t)
		for name, call := range map[string]func() error{
			"open empty job": func() error { _, _, _, err := b.Open(ctx, "", spec, "", time.Now().Add(time.Hour)); return err },
			"open empty request": func() error {
				s := spec
				s.RequestID = ""
				_, _, _, err := b.Open(ctx, "x", s, "", time.Now().Add(time.Hour))
				return err
			},
			"open empty session": func() error {
				s := spec
				s.SessionID = ""
				_, _, _, err := b.Open(ctx, "x", s, "", time.Now().Add(time.Hour))
				return err
			},
			"finish unknown": func() error {
				_, _, err := b.Finish(ctx, "nope", fsm.Fail, 1, "", scheduler.Outcome{Status: scheduler.OutcomeFailed})
				return err
			},
			"finish bad status": func() error {
				_, _, err := b.Finish(ctx, "x", fsm.Fail, 1, "", scheduler.Outcome{Status: "maybe"})
				return err
			},
			"watch unknown": func() error { _, _, err := b.Watch(ctx, "nope", "s"); return err },
		} {
			if err := call(); err == nil {
				t.Errorf("%s: no error", name)
			}
		}
		if _, err := b.Entry(ctx, "x"); !errors.Is(err, scheduler.ErrJobNotFound) {
			t.Errorf("bad input created job x: %v", err)
		}
	})
}

// DueProbe reads one job's due time from a [scheduler.DueIndex]; the
// in-memory and Redis indexes have it (a Due method), for tests.
type DueProbe interface {
	Due(ctx context.Context, jobID string) (time.Time, bool, error)
}

// TestDueIndex runs the conformance suite of [scheduler.DueIndex]; the
// index must also be a [DueProbe].
func TestDueIndex(t *testing.T, newStore func(t *testing.T) scheduler.DueIndex) {
	ctx := context.Background()
	t.Run("SetClaimRemove", func(t *testing.T) {
		idx := newStore(t)
		d, ok := idx.(interface {
			scheduler.DueIndex
			DueProbe
		})
		if !ok {
			t.Fatalf("%T has no Due method (DueProbe)", idx)
		}
		base := time.UnixMilli(1_700_000_000_000)
		for i := range 40 {
			if err := d.Set(ctx, fmt.Sprintf("j%d", i), base.Add(time.Duration(i)*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		got, err := d.Claim(ctx, base.Add(9*time.Second), time.Minute, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 10 {
			t.Errorf("Claim at +9s = %v, want j0..j9", got)
		}
		// Claimed jobs moved on by the lease: a second claim finds none.
		if again, err := d.Claim(ctx, base.Add(9*time.Second), time.Minute, 100); err != nil || len(again) != 0 {
			t.Errorf("second Claim = %v, %v; want none", again, err)
		}
		if at, ok, _ := d.Due(ctx, "j3"); !ok || !at.Equal(base.Add(9*time.Second+time.Minute)) {
			t.Errorf("Due(j3) after the claim = %v, want now+lease", at)
		}
		if err := d.Remove(ctx, "j3"); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := d.Due(ctx, "j3"); ok {
			t.Error("j3 still due after Remove")
		}
		// One call takes many jobs out, whatever their shards.
		if err := d.Remove(ctx, "j10", "j11", "j12", "j13", "j14", "nope"); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"j10", "j11", "j12", "j13", "j14"} {
			if _, ok, _ := d.Due(ctx, id); ok {
				t.Errorf("%s still due after Remove of many", id)
			}
		}
		if _, ok, _ := d.Due(ctx, "j15"); !ok {
			t.Error("j15 left the index with others")
		}
		if err := d.Remove(ctx, "j15", ""); err == nil {
			t.Error("Remove with an empty id: no error")
		}
	})
	t.Run("ConcurrentClaimsSplit", func(t *testing.T) {
		d := newStore(t)
		now := time.UnixMilli(1_700_000_000_000)
		for i := range 200 {
			if err := d.Set(ctx, fmt.Sprintf("c%d", i), now.Add(-time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for {
					ids, err := d.Claim(ctx, now, time.Hour, 16)
					if err != nil {
						t.Error(err)
						return
					}
					if len(ids) == 0 {
						return
					}
					mu.Lock()
					for _, id := range ids {
						seen[id]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(seen) != 200 {
			t.Errorf("claimed %d jobs, want 200", len(seen))
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("job %s claimed %d times, want once", id, n)
			}
		}
	})
}

// TestOpenDeadline checks that [scheduler.JobStore.Open] gives a job its
// deadline in the plane's index, and keeps one it has: a job a sweeper may
// find is never without a deadline, and a repeated Open moves none.
func TestOpenDeadline(t *testing.T, newStores func(t *testing.T) (scheduler.JobStore, DueProbe)) {
	ctx := context.Background()
	jobs, due := newStores(t)
	spec := scheduler.JobSpec{RequestID: "r", SessionID: "s"}
	at := time.UnixMilli(1_700_000_000_000)
	for i, node := range []string{"", "n1"} {
		id := fmt.Sprintf("j%d", i)
		if _, _, created, err := jobs.Open(ctx, id, spec, node, at); err != nil || !created {
			t.Fatalf("Open(%s) = created %v, %v", id, created, err)
		}
		if got, ok, err := due.Due(ctx, id); err != nil || !ok || !got.Equal(at) {
			t.Errorf("deadline of %s after Open = %v, %v, %v; want %v", id, got, ok, err, at)
		}
		// A repeated Open keeps the deadline the job has.
		if _, _, created, err := jobs.Open(ctx, id, spec, node, at.Add(time.Hour)); err != nil || created {
			t.Fatalf("second Open(%s) = created %v, %v", id, created, err)
		}
		if got, ok, err := due.Due(ctx, id); err != nil || !ok || !got.Equal(at) {
			t.Errorf("deadline of %s after a second Open = %v, %v, %v; want %v", id, got, ok, err, at)
		}
	}
	// A refused Open stores no deadline.
	if _, _, _, err := jobs.Open(ctx, "bad", scheduler.JobSpec{SessionID: "s"}, "", at); err == nil {
		t.Fatal("Open without a request id: no error")
	}
	if _, ok, err := due.Due(ctx, "bad"); err != nil || ok {
		t.Errorf("refused Open left a deadline (%v, %v)", ok, err)
	}
}
