package scheduler_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/fsm"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/storetest"
)

// countingJobs counts the steps applied to job records, by event.
type countingJobs struct {
	scheduler.JobStore
	mu    sync.Mutex
	steps map[fsm.Event]int
}

func (c *countingJobs) ApplyJob(ctx context.Context, jobID string, ev fsm.Event, attempt int, nodeID string) (scheduler.JobTransition, error) {
	c.mu.Lock()
	c.steps[ev]++
	c.mu.Unlock()
	return c.JobStore.ApplyJob(ctx, jobID, ev, attempt, nodeID)
}

func (c *countingJobs) count(ev fsm.Event) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.steps[ev]
}

// TestProgressSteps: a node that acks, starts and answers at once costs
// no ack or start step (the result's step moves the record from
// DISPATCHED); a node that acks and starts, then works on, gets one start
// step within two ticks of the progress loop (10 ms here), well before the
// ack timeout, and the job is not timed out while it works.
func TestProgressSteps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, err := scheduler.NewMemStores(storetest.DispatchTestConfig("x"))
		if err != nil {
			t.Fatal(err)
		}
		jobs := &countingJobs{JobStore: st.Jobs, steps: map[fsm.Event]int{}}
		st.Jobs = jobs
		p := storetest.NewTestPlane(t, storetest.DispatcherHarness{Stores: func() scheduler.Stores { return st }})
		d := p.Start("inst-a", false, nil)
		n := storetest.NewTestNode(scheduler.NodeInfo{NodeID: "n1"})
		hold := map[string]bool{}
		n.Decide = func(m scheduler.Envelope) storetest.NodeAction {
			if hold[m.RequestID] {
				return storetest.Hold
			}
			return storetest.Answer
		}
		hold["slow"] = true
		n.Attach(t, d)
		s := storetest.NewTestSession("s1")
		s.Attach(t, d)
		s.Submit(t, scheduler.Request{RequestID: "quick", Payload: []byte("quick")})
		synctest.Wait()
		got := s.WaitAnswers(t, []string{"quick"}, time.Second)
		if m := got["quick"][0]; m.Type != scheduler.TypeJobResult {
			t.Fatalf("answer of quick: %+v, want a job_result", m)
		}
		if a, b := jobs.count(fsm.Ack), jobs.count(fsm.Start); a != 0 || b != 0 {
			t.Errorf("quick job: %d ack and %d start steps, want none (the result's step carries it)", a, b)
		}

		job := s.Submit(t, scheduler.Request{RequestID: "slow", Payload: []byte("slow")})
		synctest.Wait()
		if n.Held() != 1 {
			t.Fatalf("node holds %d jobs, want the slow one", n.Held())
		}
		time.Sleep(25 * time.Millisecond)
		synctest.Wait()
		rec, err := st.Jobs.Job(context.Background(), job)
		if err != nil || rec.State != fsm.Running {
			t.Errorf("slow job after two ticks: %+v, %v; want RUNNING", rec, err)
		}
		steps := map[fsm.Event]int{fsm.Ack: jobs.count(fsm.Ack), fsm.Start: jobs.count(fsm.Start)}
		if diff := cmp.Diff(map[fsm.Event]int{fsm.Ack: 0, fsm.Start: 1}, steps); diff != "" {
			t.Errorf("slow job's progress steps (-want +got):\n%s", diff)
		}
		// Past the ack timeout (1 s) and several leases: still attempt 1.
		time.Sleep(3 * time.Second)
		synctest.Wait()
		for id, err := range n.ReleaseHeld() {
			if err != nil {
				t.Errorf("result of %s: %v", id, err)
			}
		}
		got = s.WaitAnswers(t, []string{"slow"}, time.Second)
		if m := got["slow"][0]; m.Type != scheduler.TypeJobResult || m.Attempt != 1 {
			t.Errorf("answer of slow: %+v, want the job_result of attempt 1", m)
		}
		p.StopAll()
	})
}
