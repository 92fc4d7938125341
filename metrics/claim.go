package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ksana-dev/ksana/claim"
)

// ClaimBuckets are the default upper bounds, in seconds, of the cycle
// duration histogram of [Claim]: 1 ms to 30 s.
var ClaimBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// ClaimActions are the values of the action label of
// ksana_claim_actions_total, one per list of a [claim.Report]: claimed,
// conflict (another node-unit won the claim), released (rebalance),
// started, stopped, restarted (what the deployment runs changed) and
// daemon_missing (an enabled daemon found not running).
var ClaimActions = []string{"claimed", "conflict", "released", "started", "stopped", "restarted", "daemon_missing"}

// ClaimConfig tunes a [Claim]. The zero value is ready to use.
type ClaimConfig struct {
	// Namespace is the first part of every metric name. Default "ksana".
	Namespace string
	// Buckets are the upper bounds of the cycle duration histogram.
	// Default [ClaimBuckets].
	Buckets []float64
}

// Claim is a prometheus.Collector fed by a claim loop: it is a
// [claim.Observer], so it goes into claim.Config.Observer, and each cycle's
// [claim.Report] updates its series. It is safe for concurrent use. Create
// it with [NewClaim].
type Claim struct {
	cycles        *prometheus.CounterVec
	duration      prometheus.Histogram
	active        prometheus.Gauge
	deployments   prometheus.Gauge
	eligible      prometheus.Gauge
	actions       *prometheus.CounterVec
	problems      prometheus.Counter
	probeFailures prometheus.Counter
	fenced        prometheus.Counter
}

var _ claim.Observer = (*Claim)(nil)
var _ prometheus.Collector = (*Claim)(nil)

// NewClaim returns a Claim with every series at zero: both results of the
// cycle counter and every action in [ClaimActions] are present before the
// first cycle.
func NewClaim(cfg ClaimConfig) *Claim {
	ns := cfg.Namespace
	if ns == "" {
		ns = "ksana"
	}
	buckets := cfg.Buckets
	if len(buckets) == 0 {
		buckets = ClaimBuckets
	}
	const sub = "claim"
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help})
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help})
	}
	c := &Claim{
		cycles: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "cycles_total",
			Help: "Claim cycles by result: ok, or error (the membership or the deployments could not be read, or a claim or release failed)."}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "cycle_seconds",
			Help: "Duration of one claim cycle.", Buckets: buckets}),
		active:      gauge("active_node_units", "Active node-units seen by the last cycle that read the membership."),
		deployments: gauge("deployments", "Enabled deployments and daemons read by the last cycle that read them."),
		eligible:    gauge("eligible", "1 when the last cycle found this node-unit eligible to claim, else 0."),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "actions_total",
			Help: "Deployments acted on by claim cycles, by action."}, []string{"action"}),
		problems:      counter("problems_total", "Errors about single records or processes (invalid type, daemon with an address, a refused or failed start or stop), one per record per cycle."),
		probeFailures: counter("probe_failures_total", "Usage probes of other node-units that failed or timed out."),
		fenced:        counter("fenced_cycles_total", "Cycles in which self-fencing stopped this node-unit's deployments."),
	}
	for _, r := range []string{"ok", "error"} {
		c.cycles.WithLabelValues(r)
	}
	for _, a := range ClaimActions {
		c.actions.WithLabelValues(a)
	}
	return c
}

// ObserveCycle updates the series from one cycle's report. It implements
// [claim.Observer]. A failed cycle leaves the deployments and eligible
// gauges at their previous values, and the active gauge too when it could
// not read the membership.
func (c *Claim) ObserveCycle(r claim.Report) {
	if r.Err != nil {
		c.cycles.WithLabelValues("error").Inc()
	} else {
		c.cycles.WithLabelValues("ok").Inc()
	}
	c.duration.Observe(max(r.Duration, 0).Seconds())
	if r.Active > 0 {
		c.active.Set(float64(r.Active))
	}
	if r.Err == nil {
		c.deployments.Set(float64(r.Deployments))
		if r.Eligible {
			c.eligible.Set(1)
		} else {
			c.eligible.Set(0)
		}
	}
	for action, ids := range map[string][]string{
		"claimed": r.Claimed, "conflict": r.Conflicts, "released": r.Released,
		"started": r.Started, "stopped": r.Stopped, "restarted": r.Restarted,
		"daemon_missing": r.Missing,
	} {
		if len(ids) > 0 {
			c.actions.WithLabelValues(action).Add(float64(len(ids)))
		}
	}
	c.problems.Add(float64(len(r.Problems)))
	c.probeFailures.Add(float64(r.ProbeFailures))
	if r.Fenced {
		c.fenced.Inc()
	}
}

func (c *Claim) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.cycles, c.duration, c.active, c.deployments, c.eligible, c.actions, c.problems, c.probeFailures, c.fenced}
}

// Describe implements prometheus.Collector.
func (c *Claim) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.collectors() {
		m.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (c *Claim) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.collectors() {
		m.Collect(ch)
	}
}
