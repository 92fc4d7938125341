package metrics

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/fsm"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// family is what a test compares of a gathered metric family: its name,
// its type and the label names and values of each series with its value.
type family struct {
	Type   string
	Series []string
}

func gather(t *testing.T, reg *prometheus.Registry) map[string]family {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := map[string]family{}
	for _, mf := range mfs {
		f := family{Type: mf.GetType().String()}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			f.Series = append(f.Series, fmt.Sprintf("{%s} %g", strings.Join(labels, ","), value(m)))
		}
		sort.Strings(f.Series)
		out[mf.GetName()] = f
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return -1
}

func TestSchedulerMetrics(t *testing.T) {
	t.Parallel()
	m := NewScheduler(func() (int, int) { return 3, 5 })
	reg := prometheus.NewRegistry()
	if err := reg.Register(m); err != nil {
		t.Fatalf("Register: %v", err)
	}
	h := m.Hooks()
	op := m.OpHook()
	op("fsm_apply", "ok", 0)
	op("fsm_apply", "ok", 0)
	op("reserve", "error", 0)
	h.InboxPending(7)
	h.DLQMoved(scheduler.DeadLetter{})
	h.Lost([]string{"1-0", "2-0"})
	h.JobState(fsm.Created)
	h.JobState(fsm.Released)
	h.Failover("j1", scheduler.CancelTimeout)
	h.Rejected(scheduler.TypeJobResult, scheduler.Refusal(&fsm.TransitionError{Err: fsm.ErrStaleAttempt}))
	h.Rejected(scheduler.TypeJobAck, scheduler.Refusal(fmt.Errorf("job j: %w", scheduler.ErrWrongNode)))
	h.SelectionMiss("zh-en", "")
	h.Answered(scheduler.TypeJobResult)
	h.Storm("n1", "m", scheduler.StormDecision{Action: scheduler.StormMarked})
	h.Adopted("dead")
	h.Shed("zh-en", scheduler.FailQueueFull)
	h.Shed("zh-en", scheduler.FailQueueFull)
	h.Shed("en-de", scheduler.FailNoNode)

	got := gather(t, reg)
	want := map[string]family{
		"scheduler_phase2_redis_op_total":       {"COUNTER", []string{"{op=fsm_apply,result=ok} 2", "{op=reserve,result=error} 1"}},
		"scheduler_phase2_inbox_pending":        {"GAUGE", []string{"{} 7"}},
		"scheduler_phase2_dlq_moved_total":      {"COUNTER", []string{"{} 1"}},
		"scheduler_phase2_inbox_lost_total":     {"COUNTER", []string{"{} 2"}},
		"scheduler_phase2_job_state_total":      {"COUNTER", []string{"{state=CREATED} 1", "{state=RELEASED} 1"}},
		"scheduler_phase2_failover_total":       {"COUNTER", []string{"{reason=timeout} 1"}},
		"scheduler_phase2_rejected_total":       {"COUNTER", []string{"{reason=stale_attempt,type=job_result} 1", "{reason=wrong_node,type=job_ack} 1"}},
		"scheduler_phase2_selection_miss_total": {"COUNTER", []string{"{} 1"}},
		"scheduler_phase2_answered_total":       {"COUNTER", []string{"{type=job_result} 1"}},
		"scheduler_phase2_storm_total":          {"COUNTER", []string{"{action=marked} 1"}},
		"scheduler_phase2_adopted_total":        {"COUNTER", []string{"{} 1"}},
		"scheduler_phase2_shed_total":           {"COUNTER", []string{"{reason=no_node} 1", "{reason=queue_full} 2"}},
		"scheduler_phase2_connected_nodes":      {"GAUGE", []string{"{} 3"}},
		"scheduler_phase2_connected_sessions":   {"GAUGE", []string{"{} 5"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("gathered metrics (-want +got):\n%s", diff)
	}
}

func TestSchedulerWithoutConnected(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewScheduler(nil))
	got := gather(t, reg)
	for _, name := range []string{"scheduler_phase2_connected_nodes", "scheduler_phase2_connected_sessions"} {
		if _, ok := got[name]; ok {
			t.Errorf("%s gathered with no connected function", name)
		}
	}
	// Gauges and counters without labels are exported from the start.
	for _, name := range []string{"scheduler_phase2_inbox_pending", "scheduler_phase2_dlq_moved_total"} {
		if _, ok := got[name]; !ok {
			t.Errorf("%s missing before any event", name)
		}
	}
}

// TestSchedulerQueues: the queue gauges report, per pool, the snapshot
// read at the scrape: its depth and the age of its oldest job; a pool
// whose queue emptied has no series, and without ReadQueues there are
// none.
func TestSchedulerQueues(t *testing.T) {
	t.Parallel()
	m := NewScheduler(nil)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m.queues.now = func() time.Time { return now }
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	names := []string{"scheduler_phase2_queue_depth", "scheduler_phase2_queue_oldest_seconds"}
	for _, name := range names {
		if _, ok := gather(t, reg)[name]; ok {
			t.Errorf("%s gathered before ReadQueues", name)
		}
	}
	var (
		mu     sync.Mutex
		queues = []scheduler.QueueStat{
			{Pool: "en-de", Depth: 1, Oldest: now.Add(-1500 * time.Millisecond)},
			{Pool: "zh-en", Depth: 40, Oldest: now.Add(-7 * time.Second)},
		}
	)
	m.ReadQueues(func() []scheduler.QueueStat {
		mu.Lock()
		defer mu.Unlock()
		return queues
	})
	got := gather(t, reg)
	want := map[string]family{
		"scheduler_phase2_queue_depth":          {"GAUGE", []string{"{pool=en-de} 1", "{pool=zh-en} 40"}},
		"scheduler_phase2_queue_oldest_seconds": {"GAUGE", []string{"{pool=en-de} 1.5", "{pool=zh-en} 7"}},
	}
	for _, name := range names {
		if diff := cmp.Diff(want[name], got[name]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	mu.Lock()
	queues = queues[1:]
	mu.Unlock()
	if got, want := gather(t, reg)["scheduler_phase2_queue_depth"].Series, []string{"{pool=zh-en} 40"}; !cmp.Equal(got, want) {
		t.Errorf("queue_depth after en-de emptied = %v; want %v", got, want)
	}
}
