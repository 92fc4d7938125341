package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/httpapi"
	"github.com/ksana-dev/ksana/internal/promtext"
	"github.com/ksana-dev/ksana/store/jsonstore"
)

// metrics are the series of GET /metrics.
type metrics struct {
	reg        *promtext.Registry
	runs       *promtext.CounterVec
	lag        *promtext.Histogram
	latency    *promtext.Histogram
	flush      *promtext.Histogram
	flushErrs  *promtext.CounterVec
	fileBytes  *promtext.GaugeVec
	requests   *promtext.CounterVec
	reqLatency *promtext.Histogram
}

func newMetrics() *metrics {
	reg := promtext.NewRegistry()
	return &metrics{
		reg:        reg,
		runs:       reg.Counter("ksana_runs_total", "Runs by final status (success, failed, timeout, skipped, missed).", "status"),
		lag:        reg.Histogram("ksana_run_lag_seconds", "How late runs start: triggered_at minus scheduled_at.", promtext.DefaultBuckets),
		latency:    reg.Histogram("ksana_callback_latency_seconds", "Duration of a run's callback, retries included.", promtext.DefaultBuckets),
		flush:      reg.Histogram("ksana_store_flush_seconds", "Duration of one rewrite of jobs.json (encode, write, fsync, rename).", promtext.DefaultBuckets),
		flushErrs:  reg.Counter("ksana_store_flush_errors_total", "Rewrites of jobs.json that failed."),
		fileBytes:  reg.Gauge("ksana_store_file_bytes", "Size of jobs.json after the last rewrite."),
		requests:   reg.Counter("ksana_http_requests_total", "API requests by route and status code.", "route", "code"),
		reqLatency: reg.Histogram("ksana_http_request_seconds", "API request latency (a write includes its durable save).", promtext.DefaultBuckets),
	}
}

// RunFinished implements cron.Observer.
func (m *metrics) RunFinished(r cron.Run) {
	m.runs.Add(1, string(r.Status))
	if r.Attempts > 0 {
		m.lag.Observe(max(r.Lag(), 0).Seconds())
		m.latency.Observe(r.Latency.D().Seconds())
	}
}

func (m *metrics) onFlush(fi jsonstore.FlushInfo) {
	m.flush.Observe(fi.Duration.Seconds())
	if fi.Err != nil {
		m.flushErrs.Add(1)
		return
	}
	m.fileBytes.Set(float64(fi.Bytes))
}

func (m *metrics) onRequest(ri httpapi.RequestInfo) {
	route := ri.Route
	if route == "" {
		route = "other"
	}
	m.requests.Add(1, route, strconv.Itoa(ri.Status))
	m.reqLatency.Observe(ri.Duration.Seconds())
}

// service is the assembled timed-job service: store, runner, API.
type service struct {
	cfg     config
	log     *slog.Logger
	store   *jsonstore.Store
	runner  *cron.Runner
	handler http.Handler
	metrics *metrics
}

func newService(cfg config, log *slog.Logger) (*service, error) {
	m := newMetrics()
	store, err := jsonstore.New(cfg.DataDir, jsonstore.Config{Journal: true, Logger: log, OnFlush: m.onFlush})
	if err != nil {
		return nil, err
	}
	exec := cron.NewHTTPExecutor(cron.HTTPExecutorConfig{Logger: log, AllowHosts: cfg.CallbackAllow})
	runner, err := cron.New(store, exec, cron.Config{
		Workers:             cfg.Workers,
		DrainTimeout:        cfg.DrainTimeout,
		DefaultTimeout:      cfg.DefaultTimeout,
		DefaultRetryBackoff: cfg.RetryBackoff,
		MinInterval:         cfg.MinInterval,
		Observer:            m,
		Logger:              log,
	})
	if err != nil {
		store.Close()
		return nil, err
	}
	m.reg.GaugeFunc("ksana_jobs", "Jobs by state (enabled, paused).", []string{"state"}, func(emit func(float64, ...string)) {
		var on, off float64
		for _, j := range runner.List() {
			if j.Enabled {
				on++
			} else {
				off++
			}
		}
		emit(on, "enabled")
		emit(off, "paused")
	})
	m.reg.GaugeFunc("ksana_store_recovered", "1 when jobs.json could not be read whole at start: kind unreadable (the service started empty) or skipped (some jobs were dropped); backup holds the file as it was.",
		[]string{"kind", "backup"}, func(emit func(float64, ...string)) {
			if rec := store.Recovered(); rec != nil {
				emit(1, recoveryKind(rec), rec.Backup)
			}
		})
	maxRetries := cfg.MaxRetries
	if maxRetries == 0 {
		maxRetries = -1 // httpapi: negative means no retries
	}
	api, err := httpapi.New(runner, httpapi.Config{
		Token:             cfg.Token,
		CallbackAllow:     cfg.CallbackAllow,
		DefaultMaxRetries: maxRetries,
		Metrics:           m.reg,
		OnRequest:         m.onRequest,
		HealthNotes:       func() map[string]string { return recoveryNotes(store.Recovered()) },
		Logger:            log,
	})
	if err != nil {
		store.Close()
		return nil, err
	}
	return &service{cfg: cfg, log: log, store: store, runner: runner, handler: api, metrics: m}, nil
}

func recoveryKind(rec *jsonstore.Recovery) string {
	if rec.Unreadable {
		return "unreadable"
	}
	return "skipped"
}

// recoveryNotes are the /health fields of a store recovered from a bad
// jobs.json (none when rec is nil).
func recoveryNotes(rec *jsonstore.Recovery) map[string]string {
	if rec == nil {
		return nil
	}
	notes := map[string]string{"store": "recovered: " + recoveryKind(rec), "store_backup": rec.Backup}
	if rec.Unreadable {
		notes["store_note"] = "jobs.json could not be read and was moved aside: the service started with no jobs"
	} else {
		notes["store_note"] = fmt.Sprintf("%d invalid jobs of jobs.json were dropped", len(rec.Skipped))
	}
	return notes
}

// reportRecovery tells the operator, loudly, that jobs.json was not read
// whole, and what to do.
func (s *service) reportRecovery() {
	rec := s.store.Recovered()
	if rec == nil {
		return
	}
	if rec.Unreadable {
		s.log.Error("ksana: jobs.json could not be read: it was moved aside and the service started with NO jobs; none of them will fire. "+
			"To restore them: stop ksana, fix the backup, move it to jobs.json in the data directory, start again",
			"backup", rec.Backup, "error", rec.Err)
		return
	}
	ids := make([]string, len(rec.Skipped))
	for i, e := range rec.Skipped {
		ids[i] = e.ID
	}
	s.log.Error("ksana: invalid jobs of jobs.json were dropped and will not fire; the backup holds them. "+
		"To restore them: stop ksana, fix them in the backup, move it to jobs.json in the data directory, start again",
		"backup", rec.Backup, "dropped", len(ids), "job_ids", strings.Join(ids, ","))
}

// reportDisallowed warns about each stored job whose callback host is
// outside KSANA_CALLBACK_ALLOW: it was stored before the list was set, and
// its runs will fail.
func (s *service) reportDisallowed() {
	allow := cron.HostAllowList(s.cfg.CallbackAllow)
	if len(allow) == 0 {
		return
	}
	for _, j := range s.runner.List() {
		if u, err := url.Parse(j.HTTP.URL); err != nil || !allow.Allows(u.Hostname()) {
			s.log.Warn("ksana: job calls a host outside KSANA_CALLBACK_ALLOW; its runs will fail until its URL or the list changes",
				"job_id", j.ID, "name", j.Name, "url", j.HTTP.URL)
		}
	}
}

// run loads the jobs, serves the API on ln and fires jobs until ctx ends.
// Then it stops accepting requests (waiting up to 10s for those in
// progress), lets the runs in flight finish up to the drain timeout and
// cancels them, flushes the store and closes it.
func (s *service) run(ctx context.Context, ln net.Listener) error {
	start := time.Now()
	if err := s.runner.Load(ctx); err != nil {
		s.log.Error("ksana: loading jobs", "error", err)
	}
	s.log.Info("ksana: jobs loaded", "jobs", s.runner.Len(), "data_dir", s.cfg.DataDir, "ms", time.Since(start).Milliseconds())
	s.reportRecovery()
	s.reportDisallowed()

	runCtx, stopRuns := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRuns()
	runDone := make(chan error, 1)
	go func() { runDone <- s.runner.Run(runCtx) }()

	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(ln) }()
	s.log.Info("ksana: listening", "addr", ln.Addr().String())
	s.reportExposure(ln.Addr())

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-serveDone:
		s.log.Error("ksana: server stopped", "error", serveErr)
	}
	s.log.Info("ksana: shutting down: no new requests, draining runs", "drain_timeout", s.cfg.DrainTimeout.String())
	shCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if err := srv.Shutdown(shCtx); err != nil {
		s.log.Warn("ksana: requests still in progress were cut", "error", err)
	}
	cancel()
	stopRuns()
	runErr := <-runDone
	if runErr != nil {
		s.log.Error("ksana: runner", "error", runErr)
	}
	closeErr := s.store.Close()
	if closeErr != nil {
		s.log.Error("ksana: closing the store", "error", closeErr)
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	if err := errors.Join(serveErr, runErr, closeErr); err != nil {
		return err
	}
	s.log.Info("ksana: stopped")
	return nil
}

func newLogger(cfg config, w interface{ Write([]byte) (int, error) }) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func listen(host string, port int) (net.Listener, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (LISTEN_ADDR, PORT): %w", addr, err)
	}
	return ln, nil
}

// reportExposure logs whether the API asks for a token and holds callbacks
// to an allow-list, and warns when it serves beyond the loopback interface
// without a token: anyone who reaches the port could then create jobs.
func (s *service) reportExposure(addr net.Addr) {
	token := s.cfg.Token != ""
	allow := "any host"
	if len(s.cfg.CallbackAllow) > 0 {
		allow = strings.Join(s.cfg.CallbackAllow, ",")
	}
	s.log.Info("ksana: access", "token", map[bool]string{true: "required", false: "off"}[token], "callback_allow", allow)
	if token {
		return
	}
	loopback := false
	if ta, ok := addr.(*net.TCPAddr); ok {
		loopback = ta.IP.IsLoopback()
	}
	if !loopback {
		s.log.Warn("ksana: the API is served beyond this machine with no token: anyone who reaches it can create, change and run jobs. "+
			"Set KSANA_API_TOKEN, or LISTEN_ADDR=127.0.0.1 to serve this machine only", "addr", addr.String())
	}
}
