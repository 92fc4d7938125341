package scheduler_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/fsm"
	"github.com/ksana-dev/ksana/scheduler"
)

// viewNode acknowledges and starts its jobs and never answers.
type viewNode struct {
	d  *scheduler.Dispatcher
	wg *sync.WaitGroup
}

func (n viewNode) Send(ctx context.Context, m scheduler.Envelope) error {
	if m.Type == scheduler.TypeJobAssign {
		n.wg.Go(func() {
			n.d.NodeEvent(context.Background(), m.NodeID, scheduler.Envelope{Type: scheduler.TypeJobAck, JobID: m.JobID, Attempt: m.Attempt})
		})
	}
	return nil
}

type viewSession struct{}

func (viewSession) Send(context.Context, scheduler.Envelope) error { return nil }

// TestViews: the views of the plane show the nodes, sessions, pools and
// jobs of an instance, a page at a time, and the storm guard's
// decisions; an inbox's dead letter is requeued and deleted.
func TestViews(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cfg := scheduler.Config{InstanceID: "view-a"}
	st, err := scheduler.NewMemStores(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d, err := scheduler.NewDispatcher(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	defer func() { cancel(); <-done; wg.Wait() }()

	node := viewNode{d: d, wg: &wg}
	if err := d.AttachNode(ctx, scheduler.NodeInfo{NodeID: "n1", Pools: []string{"p"}, Models: []string{"m"}, Capacity: 3}, node); err != nil {
		t.Fatal(err)
	}
	if err := d.AttachNode(ctx, scheduler.NodeInfo{NodeID: "n2", Capacity: 1}, node); err != nil {
		t.Fatal(err)
	}
	if err := d.AttachSession(ctx, "s1", viewSession{}); err != nil {
		t.Fatal(err)
	}
	var jobs []string
	for _, r := range []string{"r1", "r2"} {
		id, err := d.Submit(ctx, "s1", scheduler.Request{RequestID: r, TurnID: "t1", Pool: "p", Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, id)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := d.Jobs(ctx, scheduler.JobQuery{State: fsm.Accepted})
		if err == nil && len(p.Jobs) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the jobs are not accepted: %+v, %v", p, err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	v, err := d.Overview(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]scheduler.PoolView{{Pool: "", Nodes: 1, Online: 1, Capacity: 1}, {Pool: "p", Nodes: 1, Online: 1, Capacity: 3, Running: 2}}, v.Pools); d != "" {
		t.Errorf("Pools (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"s1"}, v.Sessions); d != "" {
		t.Errorf("Sessions (-want +got):\n%s", d)
	}
	if len(v.Nodes) != 2 || v.Nodes[0].Info.NodeID != "n1" || len(v.Nodes[0].Jobs) != 2 || v.Nodes[0].Jobs[0].State != fsm.Accepted {
		t.Errorf("Nodes = %+v, want n1 with its two accepted jobs, and n2", v.Nodes)
	}
	if len(v.Instances) != 1 || !v.Instances[0].Alive || !v.Instances[0].Self {
		t.Errorf("Instances = %+v, want this one, alive", v.Instances)
	}

	p1, err := d.Jobs(ctx, scheduler.JobQuery{Limit: 1})
	if err != nil || len(p1.Jobs) != 1 || p1.Next == "" || p1.Counts[fsm.Accepted] != 2 || p1.Scanned != 2 {
		t.Fatalf("first page = %+v, %v", p1, err)
	}
	if j := p1.Jobs[0]; j.Spec.TurnID != "t1" || j.Affinity != "n1" || !j.Local || j.NodeID != "n1" {
		t.Errorf("the first page's job = %+v, want turn t1 with affinity n1, on n1, followed here", j)
	}
	p2, err := d.Jobs(ctx, scheduler.JobQuery{Limit: 1, After: p1.Next})
	if err != nil || len(p2.Jobs) != 1 || p2.Next != "" || p2.Jobs[0].ID == p1.Jobs[0].ID {
		t.Errorf("second page = %+v, %v", p2, err)
	}
	if _, err := d.Jobs(ctx, scheduler.JobQuery{State: "NOPE"}); !errors.Is(err, scheduler.ErrInvalidArgument) {
		t.Errorf("Jobs of an unknown state: %v, want ErrInvalidArgument", err)
	}

	// A model_not_available is counted by the storm view, and marks the
	// model unavailable on the node in the pool view.
	rec, err := st.Jobs.Job(ctx, jobs[0])
	if err != nil {
		t.Fatal(err)
	}
	d.NodeEvent(ctx, "n1", scheduler.Envelope{Type: scheduler.TypeModelNotAvailable, JobID: jobs[0], Attempt: rec.Attempt, Model: "m"})
	v, _ = d.Overview(ctx)
	if len(v.Storm) != 1 || v.Storm[0].NodeID != "n1" || v.Storm[0].Model != "m" || v.Storm[0].Marked != 1 {
		t.Errorf("Storm = %+v, want one mark of m on n1", v.Storm)
	}
	pd, err := d.Pool(ctx, "p")
	if err != nil || len(pd.Nodes) != 1 || pd.Nodes[0].NodeID != "n1" || !pd.Nodes[0].Local {
		t.Fatalf("Pool(p) = %+v, %v", pd, err)
	}
	if d := cmp.Diff([]string{"m"}, pd.Nodes[0].Unavailable); d != "" {
		t.Errorf("unavailable models of n1 (-want +got):\n%s", d)
	}

	// Dead letters of another instance's inbox.
	if err := st.Presence.Announce(ctx, "view-b", time.Hour); err != nil {
		t.Fatal(err)
	}
	in := st.Inbox("view-b")
	if err := in.EnsureGroup(ctx); err != nil {
		t.Fatal(err)
	}
	var dead []string
	for range 2 {
		id, _ := st.Sender.Send(ctx, "view-b", scheduler.Fields{{Name: "type", Value: "x"}})
		in.Read(ctx, "c", 1, 0)
		dl, ok, err := in.DeadLetter(ctx, "c", id, 0, "test")
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		dead = append(dead, dl.ID)
	}
	boxes, err := d.Inboxes(ctx, 10)
	if err != nil || len(boxes) != 2 || boxes[1].InstanceID != "view-b" || boxes[1].DeadLetters != 2 || boxes[1].Error != "" {
		t.Fatalf("Inboxes = %+v, %v", boxes, err)
	}
	if _, err := d.RequeueDeadLetter(ctx, "view-b", dead[0]); err != nil {
		t.Errorf("RequeueDeadLetter: %v", err)
	}
	if err := d.DeleteDeadLetter(ctx, "view-b", dead[1]); err != nil {
		t.Errorf("DeleteDeadLetter: %v", err)
	}
	if err := d.DeleteDeadLetter(ctx, "view-b", dead[1]); !errors.Is(err, scheduler.ErrNoDeadLetter) {
		t.Errorf("DeleteDeadLetter again: %v, want ErrNoDeadLetter", err)
	}
	boxes, _ = d.Inboxes(ctx, 10)
	if b := boxes[1]; b.Len != 1 || b.Pending != 0 || b.DeadLetters != 0 {
		t.Errorf("view-b's inbox after the requeue = %+v, want one entry, no dead letter", b)
	}
}

// noAdminInbox hides the DeadLetterAdmin capability of an inbox.
type noAdminInbox struct{ scheduler.Inbox }

func TestDeadLetterActionsNeedTheCapability(t *testing.T) {
	t.Parallel()
	cfg := scheduler.Config{InstanceID: "view-c"}
	st, err := scheduler.NewMemStores(cfg)
	if err != nil {
		t.Fatal(err)
	}
	inbox := st.Inbox
	st.Inbox = func(id string) scheduler.Inbox { return noAdminInbox{inbox(id)} }
	d, err := scheduler.NewDispatcher(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.RequeueDeadLetter(context.Background(), "view-c", "1-1"); !errors.Is(err, scheduler.ErrNotSupported) {
		t.Errorf("RequeueDeadLetter: %v, want ErrNotSupported", err)
	}
	if err := d.DeleteDeadLetter(context.Background(), "view-c", "1-1"); !errors.Is(err, scheduler.ErrNotSupported) {
		t.Errorf("DeleteDeadLetter: %v, want ErrNotSupported", err)
	}
	boxes, err := d.Inboxes(context.Background(), 1)
	if err != nil || len(boxes) != 1 || boxes[0].DeadLetters != -1 {
		t.Errorf("Inboxes = %+v, %v; want the DLQ's length unknown (-1)", boxes, err)
	}
}
