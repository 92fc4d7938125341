package scheduler_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
)

// echoNode is a node that answers every job at once: job_ack, job_started,
// then job_result with the payload in upper case.
type echoNode struct{ d *scheduler.Dispatcher }

func (n echoNode) Send(ctx context.Context, m scheduler.Envelope) error {
	if m.Type != scheduler.TypeJobAssign {
		return nil
	}
	go func() {
		for _, t := range []scheduler.MessageType{scheduler.TypeJobAck, scheduler.TypeJobStarted} {
			n.d.NodeEvent(context.Background(), m.NodeID, scheduler.Envelope{Type: t, JobID: m.JobID, Attempt: m.Attempt})
		}
		out := []byte(fmt.Sprintf("%s on %s", m.Payload, m.NodeID))
		n.d.NodeEvent(context.Background(), m.NodeID, scheduler.Envelope{Type: scheduler.TypeJobResult, JobID: m.JobID, Attempt: m.Attempt, Payload: out})
	}()
	return nil
}

// printSession prints each answer and signals it.
type printSession struct{ done chan struct{} }

func (s printSession) Send(ctx context.Context, m scheduler.Envelope) error {
	fmt.Printf("%s for %s: %s\n", m.Type, m.RequestID, m.Payload)
	s.done <- struct{}{}
	return nil
}

// One dispatch instance in memory: a node and a session attach, the
// session sends two requests of one turn, and both go to the turn's node.
// With store/redisstore.NewStores instead of NewMemStores, several
// instances share the work.
func ExampleDispatcher() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := scheduler.Config{InstanceID: "a"}
	stores, err := scheduler.NewMemStores(cfg)
	if err != nil {
		panic(err)
	}
	d, err := scheduler.NewDispatcher(stores, cfg)
	if err != nil {
		panic(err)
	}
	go d.Run(ctx)

	_ = d.AttachNode(ctx, scheduler.NodeInfo{NodeID: "node-1", Pools: []string{"zh-en"}, Capacity: 2}, echoNode{d})
	s := printSession{done: make(chan struct{})}
	_ = d.AttachSession(ctx, "session-1", s)
	for i, reason := range []string{"max_duration", "manual"} {
		_, err := d.Submit(ctx, "session-1", scheduler.Request{
			RequestID: fmt.Sprintf("req-%d", i), TurnID: "turn-1", Pool: "zh-en",
			Reason: reason, Payload: []byte(fmt.Sprintf("segment %d", i)),
		})
		if err != nil {
			panic(err)
		}
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			fmt.Println("no answer")
		}
	}
	// Output:
	// job_result for req-0: segment 0 on node-1
	// job_result for req-1: segment 1 on node-1
}
