package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/fsm"
	"github.com/ksana-dev/ksana/scheduler"
)

// TestJobStore runs the conformance suite of [scheduler.JobStore].
// newStore returns an empty store configured with maxAttempts (0 for the
// default); each call must give a store that shares no job ids with the
// others.
func TestJobStore(t *testing.T, maxAttempts int, newStore func(t *testing.T) scheduler.JobStore) {
	m := fsm.Machine{MaxAttempts: maxAttempts}
	t.Run("CreateAndGet", func(t *testing.T) { testJobCreate(t, newStore(t)) })
	t.Run("EveryTransition", func(t *testing.T) { testJobEveryTransition(t, m, newStore(t)) })
	t.Run("NodeAndFreeNode", func(t *testing.T) { testJobNodes(t, m, newStore(t)) })
	t.Run("WrongNode", func(t *testing.T) { testJobWrongNode(t, newStore(t)) })
	t.Run("BadInput", func(t *testing.T) { testJobBadInput(t, newStore(t)) })
	t.Run("ConcurrentEvents", func(t *testing.T) { testJobConcurrent(t, newStore(t)) })
}

func testJobCreate(t *testing.T, s scheduler.JobStore) {
	ctx := context.Background()
	rec, created, err := openJob(ctx, s, "job-1")
	if err != nil || !created {
		t.Fatalf("Open(job-1) = %v, %v; want created", created, err)
	}
	if rec.ID != "job-1" || rec.Job != fsm.New() || rec.NodeID != "" || rec.CreatedAt.IsZero() || rec.UpdatedAt.Before(rec.CreatedAt) {
		t.Errorf("Open(job-1) record = %+v, want job-1 in %+v with timestamps", rec, fsm.New())
	}
	if _, err := s.ApplyJob(ctx, "job-1", fsm.Dispatch, 1, "node-a"); err != nil {
		t.Fatal(err)
	}
	again, created, err := openJob(ctx, s, "job-1")
	if err != nil || created {
		t.Fatalf("second Open(job-1) = %v, %v; want not created", created, err)
	}
	got, err := s.Job(ctx, "job-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, again); diff != "" {
		t.Errorf("second Open returned another record than Job (-Job +Open):\n%s", diff)
	}
	if !rec.DispatchedAt.IsZero() || !got.DispatchedAt.Equal(got.UpdatedAt) {
		t.Errorf("DispatchedAt = %v before and %v after the dispatch; want zero, then the dispatch's time %v", rec.DispatchedAt, got.DispatchedAt, got.UpdatedAt)
	}
	if got.State != fsm.Dispatched || got.NodeID != "node-a" {
		t.Errorf("Job(job-1) = %+v, want DISPATCHED on node-a (a second create must not reset it)", got)
	}
	if _, err := s.Job(ctx, "job-none"); !errors.Is(err, scheduler.ErrJobNotFound) {
		t.Errorf("Job(job-none) error = %v, want ErrJobNotFound", err)
	}
	if _, err := s.ApplyJob(ctx, "job-none", fsm.Ack, 1, ""); !errors.Is(err, scheduler.ErrJobNotFound) {
		t.Errorf("ApplyJob(job-none) error = %v, want ErrJobNotFound", err)
	}
}

// fsmReachable returns a path of events (each with the job's attempt at the
// time) from fsm.New to every (state, attempt) the machine can reach.
func fsmReachable(m fsm.Machine) map[fsm.Job][]fsm.Event {
	paths := map[fsm.Job][]fsm.Event{fsm.New(): nil}
	queue := []fsm.Job{fsm.New()}
	for len(queue) > 0 {
		j := queue[0]
		queue = queue[1:]
		for _, ev := range fsm.Events() {
			out, err := m.Apply(j, ev, j.Attempt)
			if err != nil || out.Duplicate {
				continue
			}
			if _, seen := paths[out.Job]; !seen {
				paths[out.Job] = append(append([]fsm.Event(nil), paths[j]...), ev)
				queue = append(queue, out.Job)
			}
		}
	}
	return paths
}

// walkJob creates jobID and drives it along path.
func walkJob(ctx context.Context, s scheduler.JobStore, jobID string, path []fsm.Event) (scheduler.JobRecord, error) {
	rec, _, err := openJob(ctx, s, jobID)
	if err != nil {
		return rec, err
	}
	for _, ev := range path {
		node := ""
		if ev == fsm.Dispatch {
			node = "node-" + jobID
		}
		tr, err := s.ApplyJob(ctx, jobID, ev, rec.Attempt, node)
		if err != nil {
			return rec, fmt.Errorf("walk %s: %w", ev, err)
		}
		rec = tr.Job
	}
	return rec, nil
}

type jobResult struct {
	Job       fsm.Job
	Duplicate bool
	Err       string
}

// testJobEveryTransition drives a job to every reachable (state, attempt),
// applies every event (and an unknown one) with attempts 0, one below, the
// job's own and one above, and requires what fsm.Machine.Apply says: the
// same job, duplicate flag and error, both in the reply and in the store.
func testJobEveryTransition(t *testing.T, m fsm.Machine, s scheduler.JobStore) {
	ctx := context.Background()
	type tc struct {
		start   fsm.Job
		path    []fsm.Event
		ev      fsm.Event
		attempt int
	}
	var cases []tc
	for start, path := range fsmReachable(m) {
		for _, ev := range append(fsm.Events(), "job_cancel") {
			for _, a := range []int{0, start.Attempt - 1, start.Attempt, start.Attempt + 1} {
				cases = append(cases, tc{start, path, ev, a})
			}
		}
	}
	if len(cases) < 7*8*4 {
		t.Fatalf("only %d cases: the walk reached too few states", len(cases))
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, c := range cases {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			id := fmt.Sprintf("every-%d", i)
			name := fmt.Sprintf("%s(attempt %d) %s(attempt %d)", c.start.State, c.start.Attempt, c.ev, c.attempt)
			rec, err := walkJob(ctx, s, id, c.path)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				return
			}
			if rec.Job != c.start {
				t.Errorf("%s: walk reached %+v", name, rec.Job)
				return
			}
			out, werr := m.Apply(c.start, c.ev, c.attempt)
			want := jobResult{Job: out.Job, Duplicate: out.Duplicate}
			if werr != nil {
				want.Err = werr.Error()
			}
			node := "" // the node check has its own test (WrongNode)
			if c.ev == fsm.Dispatch {
				node = "node-x"
			}
			tr, err := s.ApplyJob(ctx, id, c.ev, c.attempt, node)
			got := jobResult{Job: tr.Job.Job, Duplicate: tr.Duplicate}
			if err != nil {
				got.Err = err.Error()
				if werr == nil || !errors.Is(err, errors.Unwrap(werr)) {
					t.Errorf("%s: error %v does not wrap the sentinel of %v", name, err, werr)
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: ApplyJob differs from fsm.Apply (-fsm +store):\n%s", name, diff)
			}
			stored, err := s.Job(ctx, id)
			if err != nil {
				t.Errorf("%s: Job: %v", name, err)
				return
			}
			if stored.Job != out.Job {
				t.Errorf("%s: stored job %+v, want %+v", name, stored.Job, out.Job)
			}
		}()
	}
	wg.Wait()
}

func testJobNodes(t *testing.T, m fsm.Machine, s scheduler.JobStore) {
	ctx := context.Background()
	if _, _, err := openJob(ctx, s, "j"); err != nil {
		t.Fatal(err)
	}
	type step struct {
		Event    fsm.Event
		Attempt  int
		Node     string
		WantNode string
		WantFree string
		WantDup  bool
	}
	steps := []step{
		{fsm.Dispatch, 1, "node-a", "node-a", "", false},
		{fsm.Dispatch, 1, "node-b", "node-a", "", true}, // a replay does not move the job
		{fsm.Ack, 1, "", "node-a", "", false},
		{fsm.Timeout, 1, "", "", "node-a", false}, // back to CREATED: off node-a
		{fsm.Dispatch, 2, "node-b", "node-b", "", false},
		{fsm.Start, 2, "", "node-b", "", false},
		{fsm.Result, 2, "node-b", "node-b", "node-b", false},
		// A replayed result (after a crash between ApplyJob and Release)
		// names the node again, so its slot is freed then.
		{fsm.Result, 2, "", "node-b", "node-b", true},
		{fsm.Release, 2, "", "node-b", "", false},
	}
	final := fsm.Job{State: fsm.Released, Attempt: 2}
	if m.Max() == 1 { // the timeout ends the job: it stays on record with its node
		steps = append(steps[:3], step{fsm.Timeout, 1, "", "node-a", "node-a", false}, step{fsm.Failover, 1, "", "node-a", "node-a", true})
		final = fsm.Job{State: fsm.Failed, Attempt: 1}
	}
	for _, st := range steps {
		tr, err := s.ApplyJob(ctx, "j", st.Event, st.Attempt, st.Node)
		if err != nil {
			t.Fatalf("ApplyJob(%s, %d, %q): %v", st.Event, st.Attempt, st.Node, err)
		}
		got := step{st.Event, st.Attempt, st.Node, tr.Job.NodeID, tr.FreeNode, tr.Duplicate}
		if diff := cmp.Diff(st, got); diff != "" {
			t.Errorf("ApplyJob(%s, %d, %q) (-want +got):\n%s", st.Event, st.Attempt, st.Node, diff)
		}
		if tr.Job.UpdatedAt.Before(tr.Job.CreatedAt) {
			t.Errorf("ApplyJob(%s): updated %v before created %v", st.Event, tr.Job.UpdatedAt, tr.Job.CreatedAt)
		}
	}
	rec, err := s.Job(ctx, "j")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Job != final || rec.NodeID != steps[len(steps)-1].WantNode {
		t.Errorf("Job(j) = %+v, want %+v on %s", rec, final, steps[len(steps)-1].WantNode)
	}
}

// testJobWrongNode: a node may move only a job dispatched to it.
func testJobWrongNode(t *testing.T, s scheduler.JobStore) {
	ctx := context.Background()
	if _, _, err := openJob(ctx, s, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyJob(ctx, "w", fsm.Dispatch, 1, "node-a"); err != nil {
		t.Fatal(err)
	}
	before, err := s.Job(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []fsm.Event{fsm.Ack, fsm.Start, fsm.Result, fsm.Timeout, fsm.Failover} {
		if _, err := s.ApplyJob(ctx, "w", ev, 1, "node-b"); !errors.Is(err, scheduler.ErrWrongNode) {
			t.Errorf("%s from another node: error = %v, want ErrWrongNode", ev, err)
		}
	}
	// A stale attempt is reported as such, whatever the node.
	if _, err := s.ApplyJob(ctx, "w", fsm.Timeout, 1, "node-a"); err != nil {
		t.Fatal(err)
	}
	after, err := s.Job(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	// A late result is refused: a stale attempt once the job went on to
	// attempt 2, an invalid transition once it failed for good.
	want := fsm.ErrStaleAttempt
	if after.State == fsm.Failed {
		want = fsm.ErrInvalidTransition
	}
	if _, err := s.ApplyJob(ctx, "w", fsm.Result, 1, "node-a"); !errors.Is(err, want) {
		t.Errorf("result of attempt 1 after its timeout: error = %v, want %v", err, want)
	}
	if after.State != fsm.Created && after.State != fsm.Failed {
		t.Errorf("after the timeout: %s", after.State)
	}
	if before.NodeID != "node-a" {
		t.Errorf("dispatched to %q, want node-a", before.NodeID)
	}
}

func testJobBadInput(t *testing.T, s scheduler.JobStore) {
	ctx := context.Background()
	if _, _, err := openJob(ctx, s, "j"); err != nil {
		t.Fatal(err)
	}
	before, err := s.Job(ctx, "j")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"Open empty id", func() error { _, _, err := openJob(ctx, s, ""); return err }, scheduler.ErrInvalidArgument},
		{"Job empty id", func() error { _, err := s.Job(ctx, ""); return err }, scheduler.ErrInvalidArgument},
		{"ApplyJob empty id", func() error { _, err := s.ApplyJob(ctx, "", fsm.Dispatch, 1, "n"); return err }, scheduler.ErrInvalidArgument},
		{"dispatch without node", func() error { _, err := s.ApplyJob(ctx, "j", fsm.Dispatch, 1, ""); return err }, scheduler.ErrInvalidArgument},
		{"unknown event", func() error { _, err := s.ApplyJob(ctx, "j", "JOB_ACK", 1, ""); return err }, fsm.ErrUnknownEvent},
		{"attempt 0", func() error { _, err := s.ApplyJob(ctx, "j", fsm.Dispatch, 0, "n"); return err }, fsm.ErrInvalidAttempt},
		{"negative attempt", func() error { _, err := s.ApplyJob(ctx, "j", fsm.Dispatch, -3, "n"); return err }, fsm.ErrInvalidAttempt},
	}
	for _, tt := range tests {
		if err := tt.call(); !errors.Is(err, tt.want) {
			t.Errorf("%s: error = %v, want %v", tt.name, err, tt.want)
		}
	}
	var ae *scheduler.ArgumentError
	if _, err := s.ApplyJob(ctx, "j", fsm.Dispatch, 1, ""); !errors.As(err, &ae) || ae.Name != "node_id" {
		t.Errorf("dispatch without node: error = %v, want an ArgumentError naming node_id", err)
	}
	after, err := s.Job(ctx, "j")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("bad input changed the job (-before +after):\n%s", diff)
	}
}

// testJobConcurrent sends one event from many goroutines at once: exactly
// one applies it, the others see a duplicate.
func testJobConcurrent(t *testing.T, s scheduler.JobStore) {
	ctx := context.Background()
	const n = 32
	for _, ev := range []fsm.Event{fsm.Dispatch, fsm.Ack, fsm.Start, fsm.Result, fsm.Release} {
		var wg sync.WaitGroup
		var mu sync.Mutex
		applied, dups := 0, 0
		if ev == fsm.Dispatch {
			if _, _, err := openJob(ctx, s, "c"); err != nil {
				t.Fatal(err)
			}
		}
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				node := ""
				if ev == fsm.Dispatch {
					node = fmt.Sprintf("node-%d", i)
				}
				tr, err := s.ApplyJob(ctx, "c", ev, 1, node)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Errorf("%s: %v", ev, err)
				case tr.Duplicate:
					dups++
				default:
					applied++
				}
			}()
		}
		wg.Wait()
		if applied != 1 || dups != n-1 {
			t.Errorf("%d concurrent %s: %d applied, %d duplicates; want 1 and %d", n, ev, applied, dups, n-1)
		}
	}
	rec, err := s.Job(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != fsm.Released {
		t.Errorf("after the concurrent lifecycle the job is %s, want RELEASED", rec.State)
	}
}

// openJob opens jobID in s with a spec of its own.
func openJob(ctx context.Context, s scheduler.JobStore, jobID string) (scheduler.JobRecord, bool, error) {
	rec, _, created, err := s.Open(ctx, jobID, scheduler.JobSpec{RequestID: "r-" + jobID, SessionID: "s-" + jobID}, "", time.Now().Add(time.Hour))
	return rec, created, err
}
