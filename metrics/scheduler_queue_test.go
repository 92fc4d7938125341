package metrics

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/storetest"
	"github.com/prometheus/client_golang/prometheus"
)

// TestSchedulerQueuesOfDispatcher feeds a Scheduler from a Dispatcher
// whose one node (capacity 1) holds its job: two more jobs wait, the
// queue gauges show them and their age, a request beyond the queue's
// bound is counted as shed with queue_full, and the waiting jobs past
// the queue timeout as shed with no_node, their pool's series gone.
func TestSchedulerQueuesOfDispatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewScheduler(nil)
		reg := prometheus.NewRegistry()
		reg.MustRegister(m)
		st, err := scheduler.NewMemStores(storetest.DispatchTestConfig("x"))
		if err != nil {
			t.Fatal(err)
		}
		p := storetest.NewTestPlane(t, storetest.DispatcherHarness{Stores: func() scheduler.Stores { return st }})
		d := p.Start("x", false, func(c *scheduler.Config) {
			c.Hooks = m.Hooks()
			c.Dispatch.QueueLimit = 2
			c.Dispatch.QueueTimeout = 3 * time.Second
		})
		m.ReadQueues(d.Queues)
		node := storetest.NewTestNode(scheduler.NodeInfo{NodeID: "n1", Pools: []string{"zh-en"}, Capacity: 1})
		node.Decide = func(scheduler.Envelope) storetest.NodeAction { return storetest.Hold }
		node.Attach(t, d)
		t.Cleanup(func() { node.ReleaseHeld() })
		s := storetest.NewTestSession("s1")
		s.Attach(t, d)
		for _, r := range []string{"r1", "r2", "r3", "r4"} {
			s.Submit(t, scheduler.Request{RequestID: r, Pool: "zh-en"})
			synctest.Wait()
		}
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		got := gather(t, reg)
		want := map[string]family{
			"scheduler_phase2_queue_depth":          {"GAUGE", []string{"{pool=zh-en} 2"}},
			"scheduler_phase2_queue_oldest_seconds": {"GAUGE", []string{"{pool=zh-en} 1.5"}},
			"scheduler_phase2_shed_total":           {"COUNTER", []string{"{reason=queue_full} 1"}},
		}
		for name, w := range want {
			if diff := cmp.Diff(w, got[name]); diff != "" {
				t.Errorf("%s with two jobs waiting (-want +got):\n%s", name, diff)
			}
		}
		time.Sleep(2 * time.Second) // past the queue timeout
		synctest.Wait()
		got = gather(t, reg)
		if f, ok := got["scheduler_phase2_queue_depth"]; ok {
			t.Errorf("scheduler_phase2_queue_depth = %v after the waiting jobs failed; want no series", f.Series)
		}
		if diff := cmp.Diff(family{"COUNTER", []string{"{reason=no_node} 2", "{reason=queue_full} 1"}}, got["scheduler_phase2_shed_total"]); diff != "" {
			t.Errorf("scheduler_phase2_shed_total after the queue timeout (-want +got):\n%s", diff)
		}
	})
}
