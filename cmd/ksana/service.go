package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/console"
	"github.com/ksana-dev/ksana/cron/httpapi"
	"github.com/ksana-dev/ksana/metrics"
	"github.com/ksana-dev/ksana/store/jsonstore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// service is the assembled timed-job service: store, runner, API.
type service struct {
	cfg     config
	log     *slog.Logger
	store   *jsonstore.Store // nil with DATABASE_URL
	db      *dbStore         // nil without DATABASE_URL
	runner  *cron.Runner
	handler http.Handler
	metrics *metrics.Cron
	tokens  *httpapi.TokenSet // nil without KSANA_API_TOKENS_FILE
	reload  tokenReload       // the last reload of the tokens file, for /health
	// hup receives SIGHUP from the start of the process (main sets it);
	// nil: the service catches SIGHUP itself while it runs.
	hup <-chan os.Signal
}

func newService(cfg config, log *slog.Logger) (*service, error) {
	m := metrics.NewCron(metrics.CronConfig{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	var (
		store  *jsonstore.Store
		db     *dbStore
		cstore cron.Store
		err    error
	)
	if cfg.DatabaseURL != "" {
		if db, err = openDB(cfg, log); err != nil {
			return nil, err
		}
		cstore = db.st
	} else {
		if store, err = jsonstore.New(cfg.DataDir, jsonstore.Config{Journal: true, RunHistory: cfg.RunHistory, Logger: log, OnFlush: m.Flush}); err != nil {
			return nil, err
		}
		cstore = store
	}
	svc := &service{cfg: cfg, log: log, store: store, db: db, metrics: m}
	// With KSANA_CALLBACK_ALLOW set, a callback reaches a loopback address
	// only where the list names it (127.0.0.1, ::1, 127.0.0.0/8), as an
	// alert does; unset, nothing is checked (the README's tour calls
	// 127.0.0.1).
	exec := cron.NewHTTPExecutor(cron.HTTPExecutorConfig{Logger: log, AllowHosts: cfg.CallbackAllow, AllowLoopback: false})
	runner, err := cron.New(cstore, exec, cron.Config{
		Workers:             cfg.Workers,
		DrainTimeout:        cfg.DrainTimeout,
		DefaultTimeout:      cfg.DefaultTimeout,
		DefaultRetryBackoff: cfg.RetryBackoff,
		MinInterval:         cfg.MinInterval,
		Alert:               cfg.Alert,
		AlertHorizon:        cfg.AlertHorizon,
		AlertAllowHosts:     cron.HostAllowList(cfg.CallbackAllow),
		Observer:            m,
		Logger:              log,
	})
	if err != nil {
		svc.closeStore()
		return nil, err
	}
	m.Watch(runner)
	storeNotes := func() map[string]any { return db.notes(runner) }
	if store != nil {
		storeNotes = func() map[string]any { return recoveryNotes(store.Recovered()) }
	}
	reg.MustRegister(alertCollector{runner})
	if db != nil {
		reg.MustRegister(leaseCollector{db.st.Leases()})
	}
	notes := func() map[string]any {
		n := storeNotes()
		if a := alertNotes(runner); a != nil {
			if n == nil {
				n = map[string]any{}
			}
			maps.Copy(n, a)
		}
		if u := unhandledNote(runner.Unhandled()); u != "" {
			if n == nil {
				n = map[string]any{}
			}
			n["unhandled_types"] = u
		}
		if r := svc.reload.notes(); r != nil {
			if n == nil {
				n = map[string]any{}
			}
			maps.Copy(n, r)
		}
		return n
	}
	if rec := recovered(store); rec != nil {
		// jobs.json could not be read whole at start: say so until the next start.
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ksana_store_recovered",
			Help: "1 when jobs.json could not be read whole at start: kind unreadable (the service started empty) or skipped (some jobs were dropped); backup holds the file as it was."},
			[]string{"kind", "backup"})
		g.WithLabelValues(recoveryKind(rec), rec.Backup).Set(1)
		reg.MustRegister(g)
	}
	maxRetries := cfg.MaxRetries
	if maxRetries == 0 {
		maxRetries = -1 // httpapi: negative means no retries
	}
	var auth httpapi.Authenticator
	if cfg.TokensFile != "" {
		if svc.tokens, err = httpapi.NewTokenSet(cfg.Tokens); err != nil {
			svc.closeStore()
			return nil, &ConfigError{Var: "KSANA_API_TOKENS_FILE", Value: cfg.TokensFile, Want: err.Error()}
		}
		auth = svc.tokens
	}
	// The runner keeps the audit log and the Idempotency-Keys of run-now
	// in the store: on a shared database every instance appends to the
	// same log and reserves in the same table.
	var hosts []string
	if cfg.Token == "" && cfg.TokensFile == "" {
		hosts = allowedHosts(cfg.AllowedHosts)
	}
	api, err := httpapi.New(runner, httpapi.Config{
		Token:             cfg.Token,
		Authenticator:     auth,
		AllowedHosts:      hosts,
		CallbackAllow:     cfg.CallbackAllow,
		DefaultMaxRetries: maxRetries,
		Metrics:           promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		OnRequest:         m.Request,
		HealthNotes:       notes,
		Logger:            log,
	})
	if err != nil {
		svc.closeStore()
		return nil, err
	}
	svc.runner, svc.handler = runner, api
	if !cfg.ConsoleOff {
		ui := console.New(runner, console.Config{API: api, Prefix: consolePath, Notes: notes, Logger: log,
			ReadOnly: cfg.ConsoleReadOnly, Secret: cfg.ConsoleSecret})
		svc.handler = withConsole(api, ui)
	}
	return svc, nil
}

// consolePath is where the web console is served; GET / redirects there.
const consolePath = "/ui"

// withConsole serves the console under consolePath, redirects GET / to
// it, and hands every other request to the API as it is (no path is
// cleaned or redirected on the API's behalf).
func withConsole(api, ui http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		p := req.URL.Path
		switch {
		case p == "/" && (req.Method == http.MethodGet || req.Method == http.MethodHead):
			http.Redirect(w, req, consolePath+"/", http.StatusFound)
		case p == consolePath || strings.HasPrefix(p, consolePath+"/"):
			ui.ServeHTTP(w, req)
		default:
			api.ServeHTTP(w, req)
		}
	})
}

// recovered is the recovery of the JSON store, nil for none or for a
// database.
func recovered(s *jsonstore.Store) *jsonstore.Recovery {
	if s == nil {
		return nil
	}
	return s.Recovered()
}

// closeStore closes the JSON file or the database.
func (s *service) closeStore() error {
	if s.db != nil {
		return s.db.close()
	}
	return s.store.Close()
}

func recoveryKind(rec *jsonstore.Recovery) string {
	if rec.Unreadable {
		return "unreadable"
	}
	return "skipped"
}

// recoveryNotes are the /health fields of a store recovered from a bad
// jobs.json (none when rec is nil).
func recoveryNotes(rec *jsonstore.Recovery) map[string]any {
	if rec == nil {
		return nil
	}
	notes := map[string]any{"store": "recovered: " + recoveryKind(rec), "store_backup": rec.Backup}
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
	rec := recovered(s.store)
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

// unhandledNote describes the job types without a handler, for /health:
// "report: 3 jobs, sync: 1 job" ("" for none). This binary runs HTTP jobs
// only: a Go function job comes from a program that shares its store.
func unhandledNote(u map[string]int) string {
	var parts []string
	for _, typ := range slices.Sorted(maps.Keys(u)) {
		jobs := "jobs"
		if u[typ] == 1 {
			jobs = "job"
		}
		parts = append(parts, fmt.Sprintf("%s: %d %s", typ, u[typ], jobs))
	}
	return strings.Join(parts, ", ")
}

// reportUnhandled says, once at start, which stored jobs have a type that
// no handler runs here: they are kept, and each of their runs fails.
func (s *service) reportUnhandled() {
	if u := unhandledNote(s.runner.Unhandled()); u != "" {
		s.log.Error("ksana: stored jobs have a type that this binary has no handler for (it runs http jobs): they are kept, and their runs fail",
			"unhandled_types", u)
	}
}

// reportDisallowed warns about each stored job whose callback host is
// outside KSANA_CALLBACK_ALLOW: it was stored before the list was set, and
// its runs will fail. On a database it sees every stored job, not only
// those this instance holds (List reads the store).
func (s *service) reportDisallowed() {
	allow := cron.HostAllowList(s.cfg.CallbackAllow)
	if len(allow) == 0 {
		return
	}
	bad := func(j *cron.Job) bool {
		if !j.IsHTTP() {
			return false
		}
		u, err := url.Parse(j.HTTP.URL)
		return err != nil || !allow.Allows(u.Hostname())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	jobs, _, err := s.runner.List(ctx, cron.JobQuery{Keep: bad})
	if err != nil {
		s.log.Warn("ksana: cannot read the jobs to check them against KSANA_CALLBACK_ALLOW", "error", err)
		return
	}
	for _, j := range jobs {
		s.log.Warn("ksana: job calls a host outside KSANA_CALLBACK_ALLOW; its runs will fail until its URL or the list changes",
			"job_id", j.ID, "name", j.Name, "url", cron.RedactURL(j.HTTP.URL))
	}
}

// run loads the jobs, serves the API on ln and fires jobs until ctx ends.
// Then it stops accepting requests (waiting up to 10s for those in
// progress), lets the runs in flight finish up to the drain timeout and
// cancels them, flushes the store and closes it.
func (s *service) run(ctx context.Context, ln net.Listener) error {
	start := time.Now()
	if s.db != nil {
		// Start loads the runner, then keeps the leases and follows the
		// other instances' writes until the store is closed.
		if err := s.db.st.Start(ctx, s.runner); err != nil {
			s.log.Error("ksana: loading jobs", "error", err)
			s.closeStore()
			return err
		}
		s.log.Info("ksana: jobs loaded", "jobs", s.runner.Len(), "database", s.db.db.Dialect(), "instance", s.db.st.Leases().Instance(),
			"ms", time.Since(start).Milliseconds())
	} else {
		if err := s.runner.Load(ctx); err != nil {
			s.log.Error("ksana: loading jobs", "error", err)
		}
		s.log.Info("ksana: jobs loaded", "jobs", s.runner.Len(), "data_dir", s.cfg.DataDir, "ms", time.Since(start).Milliseconds())
	}
	s.reportRecovery()
	s.reportDisallowed()
	s.reportUnhandled()

	runCtx, stopRuns := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRuns()
	runDone := make(chan error, 1)
	go func() { runDone <- s.runner.Run(runCtx) }()

	stopHup := s.watchSighup(ctx)
	defer stopHup()
	// A client has 10 s to send its headers and 30 s for the whole
	// request (bodies are at most 1 MiB), so that slow senders cannot hold
	// connections open; an idle keep-alive connection closes after 2 min.
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(ln) }()
	s.log.Info("ksana: listening", "addr", ln.Addr().String())
	s.reportExposure(ln.Addr())
	if lowerGOGC {
		debug.SetGCPercent(defaultGOGC)
	}

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
	closeErr := s.closeStore()
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

// allowedHosts are the Host headers the API answers without a token:
// the names of this machine (localhost, its host name, the addresses of
// its interfaces) and extra (KSANA_ALLOWED_HOSTS). A page of another
// site that a browser resolves to this machine (DNS rebinding) sends its
// own name, and is refused.
func allowedHosts(extra []string) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if h, err := os.Hostname(); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				hosts = append(hosts, n.IP.String())
			}
		}
	}
	return append(hosts, extra...)
}

// reportExposure logs whether the API asks for a token and holds callbacks
// to an allow-list, and warns when it serves beyond the loopback interface
// without a token: anyone who reaches the port could then create jobs.
func (s *service) reportExposure(addr net.Addr) {
	token := s.cfg.Token != "" || s.cfg.TokensFile != ""
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
			"Set KSANA_API_TOKEN or KSANA_API_TOKENS_FILE, or LISTEN_ADDR=127.0.0.1 to serve this machine only", "addr", addr.String())
	}
}
