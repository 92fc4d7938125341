package metrics

import (
	"time"

	"github.com/ksana-dev/ksana/fsm"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/prometheus/client_golang/prometheus"
)

// Scheduler holds the collectors of one dispatch instance. Its hooks feed
// these metrics:
//
//	scheduler_phase2_redis_op_total{op,result}     counter: Redis operations by name and result (ok, miss, error)
//	scheduler_phase2_inbox_pending                 gauge: entries of this instance's inbox read but not yet acknowledged
//	scheduler_phase2_dlq_moved_total               counter: inbox entries moved to the dead-letter queue
//	scheduler_phase2_inbox_lost_total              counter: pending inbox entries found deleted when taken over
//	scheduler_phase2_job_state_total{state}        counter: jobs this instance moved into each state
//	scheduler_phase2_failover_total{reason}        counter: attempts ended on their node (failover, timeout, model_not_available)
//	scheduler_phase2_rejected_total{type,reason}   counter: node events refused (stale_attempt, wrong_node, job_not_found, invalid_transition)
//	scheduler_phase2_selection_miss_total          counter: selections that found no eligible node
//	scheduler_phase2_answered_total{type}          counter: answers handed to sessions here (job_result, job_failed)
//	scheduler_phase2_storm_total{action}           counter: model_not_available decisions (marked, debounced, rate_limited)
//	scheduler_phase2_adopted_total                 counter: dead instances' inboxes drained here
//	scheduler_phase2_connected_nodes               gauge: nodes connected to this instance
//	scheduler_phase2_connected_sessions            gauge: sessions connected to this instance
//
// The two connection gauges are read when scraped, from the function given
// to [NewScheduler]. A Scheduler is safe for concurrent use.
type Scheduler struct {
	redisOps      *prometheus.CounterVec
	inboxPending  prometheus.Gauge
	dlqMoved      prometheus.Counter
	lost          prometheus.Counter
	jobState      *prometheus.CounterVec
	failover      *prometheus.CounterVec
	rejected      *prometheus.CounterVec
	selectionMiss prometheus.Counter
	answered      *prometheus.CounterVec
	storm         *prometheus.CounterVec
	adopted       prometheus.Counter
	nodes         prometheus.Collector
	sessions      prometheus.Collector
}

var _ prometheus.Collector = (*Scheduler)(nil)

// NewScheduler returns the collectors of a dispatch instance. connected,
// when not nil, reports the nodes and sessions connected to the instance
// (such as [scheduler.Dispatcher.Counts]); it is called at each scrape
// and must be safe for concurrent use. With nil, the two connection
// gauges are left out.
func NewScheduler(connected func() (nodes, sessions int)) *Scheduler {
	m := &Scheduler{
		redisOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scheduler_phase2_redis_op_total",
			Help: "Redis operations of the dispatch plane's stores, by operation and result (ok, miss, error).",
		}, []string{"op", "result"}),
		inboxPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "scheduler_phase2_inbox_pending",
			Help: "Entries of this instance's inbox read but not yet acknowledged.",
		}),
		dlqMoved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scheduler_phase2_dlq_moved_total",
			Help: "Inbox entries moved to the dead-letter queue.",
		}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scheduler_phase2_inbox_lost_total",
			Help: "Pending inbox entries found deleted when they were taken over.",
		}),
		jobState: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scheduler_phase2_job_state_total",
			Help: "Jobs this instance moved into each state.",
		}, []string{"state"}),
		failover: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scheduler_phase2_failover_total",
			Help: "Job attempts ended on their node, by reason (failover, timeout, model_not_available).",
		}, []string{"reason"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scheduler_phase2_rejected_total",
			Help: "Node events refused, by message type and reason (stale_attempt, wrong_node, job_not_found, invalid_transition).",
		}, []string{"type", "reason"}),
		selectionMiss: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scheduler_phase2_selection_miss_total",
			Help: "Node selections that found no eligible node.",
		}),
		answered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scheduler_phase2_answered_total",
			Help: "Answers handed to sessions connected to this instance, by type.",
		}, []string{"type"}),
		storm: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scheduler_phase2_storm_total",
			Help: "model_not_available reports, by the storm guard's decision (marked, debounced, rate_limited).",
		}, []string{"action"}),
		adopted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scheduler_phase2_adopted_total",
			Help: "Inboxes of dead instances drained by this instance.",
		}),
	}
	if connected != nil {
		m.nodes = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "scheduler_phase2_connected_nodes",
			Help: "Nodes connected to this instance.",
		}, func() float64 { n, _ := connected(); return float64(n) })
		m.sessions = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "scheduler_phase2_connected_sessions",
			Help: "Sessions connected to this instance.",
		}, func() float64 { _, s := connected(); return float64(s) })
	}
	return m
}

func (m *Scheduler) collectors() []prometheus.Collector {
	cs := []prometheus.Collector{
		m.redisOps, m.inboxPending, m.dlqMoved, m.lost, m.jobState, m.failover, m.rejected,
		m.selectionMiss, m.answered, m.storm, m.adopted,
	}
	if m.nodes != nil {
		cs = append(cs, m.nodes, m.sessions)
	}
	return cs
}

// Describe implements [prometheus.Collector].
func (m *Scheduler) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements [prometheus.Collector].
func (m *Scheduler) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// Hooks returns the [scheduler.Hooks] that feed m; set them in
// [scheduler.Config].Hooks. DeliveryHandled is left nil.
func (m *Scheduler) Hooks() scheduler.Hooks {
	return scheduler.Hooks{
		InboxPending: func(n int64) { m.inboxPending.Set(float64(n)) },
		DLQMoved:     func(scheduler.DeadLetter) { m.dlqMoved.Inc() },
		Lost:         func(ids []string) { m.lost.Add(float64(len(ids))) },
		JobState:     func(s fsm.State) { m.jobState.WithLabelValues(string(s)).Inc() },
		Failover:     func(_, why string) { m.failover.WithLabelValues(why).Inc() },
		Rejected: func(t scheduler.MessageType, reason string) {
			m.rejected.WithLabelValues(string(t), reason).Inc()
		},
		SelectionMiss: func(string, string) { m.selectionMiss.Inc() },
		Answered:      func(t scheduler.MessageType) { m.answered.WithLabelValues(string(t)).Inc() },
		Storm:         func(_, _ string, d scheduler.StormDecision) { m.storm.WithLabelValues(string(d.Action)).Inc() },
		Adopted:       func(string) { m.adopted.Inc() },
	}
}

// OpHook returns the Redis operation hook that feeds
// scheduler_phase2_redis_op_total{op,result}: pass it as the hook of
// store/redisstore.NewStores (its OpHook type has this signature).
func (m *Scheduler) OpHook() func(op, result string, d time.Duration) {
	return func(op, result string, _ time.Duration) { m.redisOps.WithLabelValues(op, result).Inc() }
}
