package storetest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
)

// testDispatchOverload: a saturated pool (two nodes of capacity 1 that
// hold their jobs) sheds what its queue cannot hold. Requests beyond
// Dispatch.QueueLimit waiting jobs get job_failed with queue_full before
// Submit returns, and may be sent again later; the jobs within the bound
// take the slots as they free, oldest first; a job that waits longer than
// QueueTimeout for a free slot fails with no_node. The Shed hook counts
// both, and Queues shows the queue.
func testDispatchOverload(t *testing.T, h DispatcherHarness) {
	const (
		limit        = 4
		queueTimeout = 2 * time.Second
	)
	var (
		mu   sync.Mutex
		shed = map[string]int{}
	)
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", false, func(c *scheduler.Config) {
		c.Dispatch.QueueLimit = limit
		c.Dispatch.QueueTimeout = queueTimeout
		c.Dispatch.RetryInterval = time.Second // the queue is woken by freed slots, not only by the timer
		c.Hooks.Shed = func(_, reason string) {
			mu.Lock()
			shed[reason]++
			mu.Unlock()
		}
	})
	var nodes []*TestNode
	for _, id := range []string{"n1", "n2"} {
		n := NewTestNode(scheduler.NodeInfo{NodeID: id, Pools: []string{"p"}, Capacity: 1})
		n.Decide = func(scheduler.Envelope) NodeAction { return Hold }
		n.Attach(t, a)
		nodes = append(nodes, n)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.ReleaseHeld()
		}
	})
	held := func() int { return nodes[0].Held() + nodes[1].Held() }
	s := NewTestSession("s1")
	s.Attach(t, a)
	req := func(i int) scheduler.Request {
		return scheduler.Request{RequestID: fmt.Sprintf("r%d", i), Pool: "p", Payload: []byte(fmt.Sprint(i))}
	}
	// Two jobs take the slots, limit wait, and three are refused.
	for i := range 2 + limit + 3 {
		s.Submit(t, req(i))
		if i < 2 {
			Eventually(t, "the first jobs on the nodes", 5*time.Second, func() bool { return held() == i+1 })
		}
	}
	answers := s.Answers()
	for i := range 2 + limit + 3 {
		r := fmt.Sprintf("r%d", i)
		got := answers[r]
		if i < 2+limit {
			if len(got) != 0 {
				t.Errorf("%s (within the bound) answered %+v at once; want it to wait", r, got)
			}
			continue
		}
		if len(got) != 1 || got[0].Type != scheduler.TypeJobFailed || !strings.HasPrefix(got[0].Error, scheduler.FailQueueFull+":") {
			t.Errorf("%s (over the bound) answered %+v when Submit returned; want one job_failed with %s", r, got, scheduler.FailQueueFull)
		}
	}
	if q := a.Queues(); len(q) != 1 || q[0].Pool != "p" || q[0].Depth != limit || q[0].Oldest.IsZero() {
		t.Errorf("Queues() = %+v; want pool p with %d jobs", q, limit)
	}
	// Every freed slot goes to a waiting job, well within QueueTimeout.
	within := []string{}
	for i := range 2 + limit {
		within = append(within, fmt.Sprintf("r%d", i))
	}
	for done := 0; done < 2+limit; {
		Eventually(t, "the nodes holding jobs", queueTimeout/4, func() bool { return held() == min(2, 2+limit-done) })
		for _, n := range nodes {
			done += len(n.ReleaseHeld())
		}
	}
	answers = s.WaitAnswers(t, within, 5*time.Second)
	for _, r := range within {
		if got := answers[r]; len(got) != 1 || got[0].Type != scheduler.TypeJobResult {
			t.Errorf("%s answered %+v; want one job_result", r, got)
		}
	}
	// A refused request id may be sent again once there is room.
	s.Submit(t, req(2+limit))
	Eventually(t, "the request sent again on a node", 5*time.Second, func() bool { return held() == 1 })
	for _, n := range nodes {
		n.ReleaseHeld()
	}
	again := fmt.Sprintf("r%d", 2+limit)
	if got := s.WaitAnswers(t, []string{again}, 5*time.Second)[again]; len(got) != 2 || got[1].Type != scheduler.TypeJobResult {
		t.Errorf("%s sent again answered %+v; want job_failed, then job_result", again, got)
	}
	// Jobs that wait longer than QueueTimeout for a free slot fail with
	// no_node.
	base := 100
	for i := range 2 {
		s.Submit(t, req(base+i))
		Eventually(t, "the nodes full again", 5*time.Second, func() bool { return held() == i+1 })
	}
	start := time.Now()
	late := []string{}
	for i := 2; i < 5; i++ {
		s.Submit(t, req(base+i))
		late = append(late, fmt.Sprintf("r%d", base+i))
	}
	answers = s.WaitAnswers(t, late, queueTimeout+5*time.Second)
	if waited := time.Since(start); waited < queueTimeout {
		t.Errorf("waiting jobs answered after %v; want no sooner than QueueTimeout %v", waited, queueTimeout)
	}
	for _, r := range late {
		if got := answers[r]; len(got) != 1 || got[0].Type != scheduler.TypeJobFailed || !strings.HasPrefix(got[0].Error, scheduler.FailNoNode+":") {
			t.Errorf("%s answered %+v; want one job_failed with %s", r, got, scheduler.FailNoNode)
		}
	}
	if q := a.Queues(); len(q) != 0 {
		t.Errorf("Queues() = %+v after every waiting job failed; want none", q)
	}
	mu.Lock()
	got := map[string]int{scheduler.FailQueueFull: shed[scheduler.FailQueueFull], scheduler.FailNoNode: shed[scheduler.FailNoNode]}
	mu.Unlock()
	if want := map[string]int{scheduler.FailQueueFull: 3, scheduler.FailNoNode: 3}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Shed hook counts %v; want %v", got, want)
	}
}
