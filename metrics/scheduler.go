package metrics

import (
	"sync/atomic"
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
//	scheduler_phase2_shed_total{reason}            counter: jobs refused or failed for want of a node (queue_full, no_node)
//	scheduler_phase2_connected_nodes               gauge: nodes connected to this instance
//	scheduler_phase2_connected_sessions            gauge: sessions connected to this instance
//	scheduler_phase2_queue_depth{pool}             gauge: jobs waiting on this instance for a node, per pool
//	scheduler_phase2_queue_oldest_seconds{pool}    gauge: how long the oldest of them has waited, per pool
//
// The two connection gauges are read when scraped, from the function given
// to [NewScheduler]; the two queue gauges likewise, from the function
// given to [Scheduler.ReadQueues], and only for the pools that have jobs
// waiting (a pool whose queue empties has no series until jobs wait
// again). A Scheduler is safe for concurrent use.
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
	shed          *prometheus.CounterVec
	nodes         prometheus.Collector
	sessions      prometheus.Collector
	queues        *queueCollector
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
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scheduler_phase2_shed_total",
			Help: "Jobs refused or failed for want of a node, by reason (queue_full: refused on arrival; no_node: waited the queue timeout).",
		}, []string{"reason"}),
		queues: newQueueCollector(),
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
		m.selectionMiss, m.answered, m.storm, m.adopted, m.shed, m.queues,
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
		Shed:          func(_, reason string) { m.shed.WithLabelValues(reason).Inc() },
	}
}

// ReadQueues sets the function the queue gauges read at each scrape: the
// queues of jobs waiting on the instance for a node, such as
// [scheduler.Dispatcher.Queues]. It must be safe for concurrent use.
// Until it is set (or with nil) the queue gauges have no series.
func (m *Scheduler) ReadQueues(f func() []scheduler.QueueStat) {
	m.queues.read.Store(&f)
}

// queueCollector reports the queue gauges from a snapshot taken at each
// scrape.
type queueCollector struct {
	depth, oldest *prometheus.Desc
	read          atomic.Pointer[func() []scheduler.QueueStat]
	now           func() time.Time
}

func newQueueCollector() *queueCollector {
	return &queueCollector{
		depth: prometheus.NewDesc("scheduler_phase2_queue_depth",
			"Jobs waiting on this instance for a node (a free slot on an eligible node), per pool.", []string{"pool"}, nil),
		oldest: prometheus.NewDesc("scheduler_phase2_queue_oldest_seconds",
			"How long the oldest job waiting on this instance for a node has waited, per pool.", []string{"pool"}, nil),
		now: time.Now,
	}
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.depth
	ch <- c.oldest
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.read.Load()
	if f == nil || *f == nil {
		return
	}
	now := c.now()
	for _, q := range (*f)() {
		ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(q.Depth), q.Pool)
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, max(now.Sub(q.Oldest).Seconds(), 0), q.Pool)
	}
}

// OpHook returns the Redis operation hook that feeds
// scheduler_phase2_redis_op_total{op,result}: pass it as the hook of
// store/redisstore.NewStores (its OpHook type has this signature).
func (m *Scheduler) OpHook() func(op, result string, d time.Duration) {
	return func(op, result string, _ time.Duration) { m.redisOps.WithLabelValues(op, result).Inc() }
}
