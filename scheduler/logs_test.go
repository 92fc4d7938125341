package scheduler_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/storetest"
)

// syncBuffer is a bytes.Buffer safe for the handler's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDispatcherLogs: an instance says when it adopts a dead instance's
// inbox and when it takes jobs off a node.
func TestDispatcherLogs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, err := scheduler.NewMemStores(storetest.DispatchTestConfig("x"))
		if err != nil {
			t.Fatal(err)
		}
		p := storetest.NewTestPlane(t, storetest.DispatcherHarness{Stores: func() scheduler.Stores { return st }})
		var logs syncBuffer
		logged := func(c *scheduler.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) }
		a := p.Start("inst-a", true, nil)
		b := p.Start("inst-b", false, logged)
		n := storetest.NewTestNode(scheduler.NodeInfo{NodeID: "n1"})
		n.Decide = func(scheduler.Envelope) storetest.NodeAction { return storetest.Hold }
		n.Attach(t, b)
		s := storetest.NewTestSession("s1")
		s.Attach(t, b)
		s.Submit(t, scheduler.Request{RequestID: "r", Payload: []byte("r")})
		storetest.Eventually(t, "n1 holds the job", 5*time.Second, func() bool { return n.Held() == 1 })
		n.Detach(t) // its job is taken off it
		storetest.Eventually(t, "A announced", 5*time.Second, func() bool {
			alive, _ := st.Presence.Alive(context.Background(), a.InstanceID())
			return alive
		})
		p.Stop("inst-a") // dies without clean-up: B adopts its inbox
		storetest.Eventually(t, "both log lines", 10*time.Second, func() bool {
			l := logs.String()
			return strings.Contains(l, `msg="scheduler: adopted the inbox of a dead instance" instance_id=inst-a`) &&
				strings.Contains(l, `msg="scheduler: job taken off its node"`) && strings.Contains(l, "reason=failover")
		})
	})
}
