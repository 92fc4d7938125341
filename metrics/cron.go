package metrics

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/httpapi"
	"github.com/ksana-dev/ksana/store/jsonstore"
)

// CronBuckets are the default histogram upper bounds of [Cron], in
// seconds: 1 ms to 60 s, for lags, callback and request latencies, and
// rewrites of jobs.json.
var CronBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// CronConfig tunes a [Cron]. The zero value is ready to use.
type CronConfig struct {
	// Namespace is the first part of every metric name. Default "ksana",
	// which gives the names listed in the package documentation.
	Namespace string
	// Buckets are the upper bounds, in seconds, of the four histograms.
	// Default [CronBuckets].
	Buckets []float64
}

// Cron is a prometheus.Collector fed by the hooks of the timed-job
// packages: it is a [cron.Observer] (RunFinished), its [Cron.Flush] fits
// jsonstore.Config.OnFlush, its [Cron.Request] fits httpapi.Config.OnRequest,
// and [Cron.Watch] gives it the runner whose jobs it counts. Hooks that are
// not wired leave their series at zero (or absent, for labelled counters).
// It is safe for concurrent use. Create it with [NewCron].
type Cron struct {
	jobsDesc   *prometheus.Desc
	runner     atomic.Pointer[cron.Runner]
	runs       *prometheus.CounterVec
	lag        prometheus.Histogram
	latency    prometheus.Histogram
	flush      prometheus.Histogram
	flushErrs  prometheus.Counter
	fileBytes  prometheus.Gauge
	requests   *prometheus.CounterVec
	reqLatency prometheus.Histogram
}

var _ cron.Observer = (*Cron)(nil)
var _ prometheus.Collector = (*Cron)(nil)

// NewCron returns a Cron with every series at zero.
func NewCron(cfg CronConfig) *Cron {
	ns := cfg.Namespace
	if ns == "" {
		ns = "ksana"
	}
	buckets := cfg.Buckets
	if len(buckets) == 0 {
		buckets = CronBuckets
	}
	hist := func(name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: name, Help: help, Buckets: buckets})
	}
	return &Cron{
		jobsDesc: prometheus.NewDesc(ns+"_jobs", "Jobs by state (enabled, paused).", []string{"state"}, nil),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "runs_total",
			Help: "Runs by final status (success, failed, timeout, skipped, missed); each slot of a record of several slots not called counts."}, []string{"status"}),
		lag:       hist("run_lag_seconds", "How late runs start: triggered_at minus scheduled_at."),
		latency:   hist("callback_latency_seconds", "Duration of a run's callback, retries included."),
		flush:     hist("store_flush_seconds", "Duration of one rewrite of jobs.json (encode, write, fsync, rename)."),
		flushErrs: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "store_flush_errors_total", Help: "Rewrites of jobs.json that failed."}),
		fileBytes: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "store_file_bytes", Help: "Size of jobs.json after the last rewrite."}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "http_requests_total",
			Help: "API requests by route and status code."}, []string{"route", "code"}),
		reqLatency: hist("http_request_seconds", "API request latency (a write includes its durable save)."),
	}
}

// Watch makes the jobs gauge count r's jobs, enabled and paused, at each
// collection. Before Watch both series are 0.
func (c *Cron) Watch(r *cron.Runner) { c.runner.Store(r) }

// RunFinished counts a finished run by status (a record of several slots
// not called, [cron.Run.Slots], counts each) and, when a callback was
// attempted, observes its lag and its latency. It implements [cron.Observer].
func (c *Cron) RunFinished(r cron.Run) {
	c.runs.WithLabelValues(string(r.Status)).Add(float64(max(r.Slots, 1)))
	if r.Attempts > 0 {
		c.lag.Observe(max(r.Lag(), 0).Seconds())
		c.latency.Observe(r.Latency.D().Seconds())
	}
}

// Flush observes one rewrite of jobs.json: its duration, and either the
// file's new size or one more failure. It fits jsonstore.Config.OnFlush.
func (c *Cron) Flush(fi jsonstore.FlushInfo) {
	c.flush.Observe(fi.Duration.Seconds())
	if fi.Err != nil {
		c.flushErrs.Inc()
		return
	}
	c.fileBytes.Set(float64(fi.Bytes))
}

// Request counts one answered API request by route pattern ("other" when
// no route matched) and status code, and observes its latency. It fits
// httpapi.Config.OnRequest.
func (c *Cron) Request(ri httpapi.RequestInfo) {
	route := ri.Route
	if route == "" {
		route = "other"
	}
	c.requests.WithLabelValues(route, strconv.Itoa(ri.Status)).Inc()
	c.reqLatency.Observe(ri.Duration.Seconds())
}

func (c *Cron) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.runs, c.lag, c.latency, c.flush, c.flushErrs, c.fileBytes, c.requests, c.reqLatency}
}

// Describe implements prometheus.Collector.
func (c *Cron) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.jobsDesc
	for _, m := range c.collectors() {
		m.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (c *Cron) Collect(ch chan<- prometheus.Metric) {
	var on, off float64
	if r := c.runner.Load(); r != nil {
		// Every job, also over a shared store whose runners each hold
		// only the jobs they fire (then counted in the store).
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		e, p, err := r.Count(ctx)
		cancel()
		if err != nil {
			ch <- prometheus.NewInvalidMetric(c.jobsDesc, err)
			on, off = -1, -1
		} else {
			on, off = float64(e), float64(p)
		}
	}
	if on >= 0 {
		ch <- prometheus.MustNewConstMetric(c.jobsDesc, prometheus.GaugeValue, on, "enabled")
		ch <- prometheus.MustNewConstMetric(c.jobsDesc, prometheus.GaugeValue, off, "paused")
	}
	for _, m := range c.collectors() {
		m.Collect(ch)
	}
}
