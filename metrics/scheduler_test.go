package metrics

import (
	"fmt"
	"sort"
	"strings"
	"testing"

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
