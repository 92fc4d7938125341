package main

import (
	"strings"
	"testing"
	"time"
)

// TestOverloadOverWebSocket: with dispatcher.queue_limit = 1 and one node
// of capacity 1 busy, a second request waits and a third gets job_failed
// "queue_full" at once; /metrics shows the queue and the shed job; the
// waiting job takes the slot when the first ends.
func TestOverloadOverWebSocket(t *testing.T) {
	cfg := testPlane("overload", nil)
	cfg.Plane.Dispatch.QueueLimit = 1
	inst := startInstance(t, cfg, ServerConfig{})
	n := mustDial(t, wsURL(inst.addr, "/ws/node"), "")
	n.send(wire{Type: "register", NodeID: "n1", Pools: []string{"p"}, Capacity: 1})
	n.expect("registered")
	s := mustDial(t, wsURL(inst.addr, "/ws/session", "session_id", "s1"), "")
	s.send(wire{Type: "job_request", RequestID: "r1", Pool: "p"})
	first := n.expect("job_assign")
	s.send(wire{Type: "job_request", RequestID: "r2", Pool: "p"})
	eventually(t, "r2 waiting", 5*time.Second, func() bool {
		return scrape(inst.addr, `scheduler_phase2_queue_depth{pool="p"}`) == 1
	})
	s.send(wire{Type: "job_request", RequestID: "r3", Pool: "p"})
	if got := s.expect("job_failed"); got.RequestID != "r3" || !strings.HasPrefix(got.Error, "queue_full:") {
		t.Errorf("answer %+v; want job_failed for r3 with queue_full", got)
	}
	if got := scrape(inst.addr, `scheduler_phase2_shed_total{reason="queue_full"}`); got != 1 {
		t.Errorf(`scheduler_phase2_shed_total{reason="queue_full"} = %v, want 1`, got)
	}
	n.send(wire{Type: "job_result", JobID: first.JobID, Attempt: 1, Payload: []byte("x")})
	if got := s.expect("job_result"); got.RequestID != "r1" {
		t.Errorf("answer %+v; want job_result for r1", got)
	}
	second := n.next(5 * time.Second)
	if second.Type != "job_assign" || second.RequestID != "r2" {
		t.Fatalf("node got %+v; want the job_assign of r2", second)
	}
	n.send(wire{Type: "job_result", JobID: second.JobID, Attempt: 1, Payload: []byte("y")})
	if got := s.expect("job_result"); got.RequestID != "r2" {
		t.Errorf("answer %+v; want job_result for r2", got)
	}
}
