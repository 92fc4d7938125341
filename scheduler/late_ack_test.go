package scheduler_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/storetest"
)

// assignsNode records the job_assigns it gets and answers nothing.
type assignsNode struct {
	mu   sync.Mutex
	jobs []scheduler.Envelope
}

func (n *assignsNode) Send(_ context.Context, m scheduler.Envelope) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if m.Type == scheduler.TypeJobAssign {
		n.jobs = append(n.jobs, m)
	}
	return nil
}

// TestLateAckTracksNothing: a job_ack or job_started that reaches the
// instance after the job's result leaves the node's count of jobs as it
// is: the node runs nothing, and the queues of waiting jobs, which leave
// out the nodes this instance believes full, must see its slot free.
func TestLateAckTracksNothing(t *testing.T) {
	for _, late := range []scheduler.MessageType{scheduler.TypeJobAck, scheduler.TypeJobStarted} {
		t.Run(string(late), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st, err := scheduler.NewMemStores(storetest.DispatchTestConfig("x"))
				if err != nil {
					t.Fatal(err)
				}
				p := storetest.NewTestPlane(t, storetest.DispatcherHarness{Stores: func() scheduler.Stores { return st }})
				d := p.Start("x", false, nil)
				node := &assignsNode{}
				if err := d.AttachNode(t.Context(), scheduler.NodeInfo{NodeID: "n1", Capacity: 1}, node); err != nil {
					t.Fatal(err)
				}
				s := storetest.NewTestSession("s1")
				s.Attach(t, d)
				s.Submit(t, scheduler.Request{RequestID: "r1", Payload: []byte("x")})
				synctest.Wait()
				node.mu.Lock()
				if len(node.jobs) != 1 {
					node.mu.Unlock()
					t.Fatalf("node got %d job_assigns, want 1", len(node.jobs))
				}
				m := node.jobs[0]
				node.mu.Unlock()
				if err := d.NodeEvent(t.Context(), "n1", scheduler.Envelope{Type: scheduler.TypeJobResult, JobID: m.JobID, Attempt: m.Attempt, Payload: []byte("done")}); err != nil {
					t.Fatalf("job_result: %v", err)
				}
				d.NodeEvent(t.Context(), "n1", scheduler.Envelope{Type: late, JobID: m.JobID, Attempt: m.Attempt})
				v, err := d.Overview(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if len(v.Nodes) != 1 || len(v.Nodes[0].Jobs) != 0 {
					t.Errorf("node's jobs after the result and a late %s = %+v; want none", late, v.Nodes)
				}
			})
		})
	}
}
