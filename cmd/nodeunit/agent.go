package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/internal/nodeunit/proc"
	"github.com/ksana-dev/ksana/internal/nodeunit/usage"
	"github.com/ksana-dev/ksana/metrics"
	"github.com/ksana-dev/ksana/store/sqlstore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// openDB opens the configured database, creating the default data
// directory first; errors name DATABASE_URL.
func openDB(ctx context.Context, c baseConfig) (*sqlstore.DB, error) {
	if c.DefaultDB {
		if err := os.MkdirAll(c.DataDir, 0o755); err != nil {
			return nil, &EnvError{Name: "NODE_UNIT_DATA", Value: c.DataDir, Err: err}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	db, err := sqlstore.Open(ctx, c.DatabaseURL)
	if err != nil {
		return nil, &EnvError{Name: "DATABASE_URL", Value: redactURL(c.DatabaseURL), Err: err}
	}
	return db, nil
}

// errNoDatabase is connectDB's error when there is nothing to read yet.
var errNoDatabase = errors.New(`nothing was added yet ("nodeunit add" or "nodeunit run" creates it)`)

// connectDB connects to the configured database for reading only: it
// creates and migrates nothing. When there is nothing to read yet (the
// SQLite file does not exist, or the database has no node-unit tables) the
// error wraps errNoDatabase and says where it looked. A search_path naming
// no schema is an error naming DATABASE_URL.
func connectDB(ctx context.Context, c baseConfig) (*sqlstore.DB, error) {
	if path, ok := sqlitePath(c.DatabaseURL); ok {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			from := "DATABASE_URL"
			if c.DefaultDB {
				from = "the default in NODE_UNIT_DATA; set DATABASE_URL for another"
			}
			return nil, fmt.Errorf("no database at %s (%s): %w", path, from, errNoDatabase)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	db, err := sqlstore.Connect(ctx, c.DatabaseURL)
	if err != nil {
		return nil, &EnvError{Name: "DATABASE_URL", Value: redactURL(c.DatabaseURL), Err: err}
	}
	v, err := db.SchemaVersion(ctx)
	if err != nil {
		db.Close()
		return nil, &EnvError{Name: "DATABASE_URL", Value: redactURL(c.DatabaseURL), Err: err}
	}
	if v == 0 {
		db.Close()
		return nil, fmt.Errorf("no node-unit tables in DATABASE_URL=%q: %w", redactURL(c.DatabaseURL), errNoDatabase)
	}
	return db, nil
}

// sqlitePath returns the file of an SQLite database URL (sqlite:PATH,
// file:PATH or a plain path, query removed); ok is false for PostgreSQL,
// for any other scheme, and for an in-memory database.
func sqlitePath(u string) (path string, ok bool) {
	s := strings.TrimSpace(u)
	lower := strings.ToLower(s)
	switch {
	case strings.HasPrefix(lower, "sqlite:"):
		s = strings.TrimPrefix(s[len("sqlite:"):], "//")
	case strings.HasPrefix(lower, "file:"):
		s = strings.TrimPrefix(s[len("file:"):], "//")
	case strings.Contains(lower, "://"):
		return "", false // PostgreSQL, or a scheme Open refuses with a message
	}
	s, _, _ = strings.Cut(s, "?")
	if s == "" || s == ":memory:" {
		return "", false
	}
	return s, true
}

// agent is a running node-unit.
type agent struct {
	cfg     runConfig
	log     *slog.Logger
	slot    *addressSlot
	addr    string
	db      *sqlstore.DB
	runner  *proc.Runner
	coll    *usage.Collector
	ln      net.Listener
	srv     *http.Server
	loop    *claim.Loop
	board   *board
	metrics *metrics.Claim
	usage   string // the usage endpoint URL
	schema  string // where the tables are
}

// runAgent runs "nodeunit run" until ctx ends; it returns nil after a clean
// shutdown.
func runAgent(ctx context.Context, c runConfig, log *slog.Logger) (err error) {
	a := &agent{cfg: c, log: log}
	defer func() {
		if cerr := a.close(); err == nil {
			err = cerr
		}
	}()
	if err := a.setup(ctx); err != nil {
		return err
	}
	log = a.log
	log.Info("node-unit started", "pid", os.Getpid(),
		"usage_endpoint", a.usage, "database", redactURL(c.DatabaseURL), "schema", a.schema,
		"policy", c.Policy.Name(), "interval", c.Interval, "membership_ttl", c.ttl(),
		"logs", a.runner.LogPath("ID"))
	if c.Trusted == nil {
		log.Warn("NODE_UNIT_TRUSTED_COMMAND_REGEXP is unset: every command is refused; set it (for example to 'sleep' or '/opt/apps/.*') to run deployments")
	}

	bg, cancelBg := context.WithCancel(context.Background())
	collDone := make(chan struct{})
	go func() { defer close(collDone); _ = a.coll.Run(bg) }()
	srvDone := make(chan error, 1)
	go func() { srvDone <- a.srv.Serve(a.ln) }()

	err = a.loop.Run(ctx) // on return it has stopped the deployments and left the membership
	log.Info("node-unit stopping")

	stopCtx, cancel := context.WithTimeout(context.Background(), c.StopGrace+5*time.Second)
	defer cancel()
	if cerr := a.runner.Close(stopCtx); cerr != nil {
		log.Error("stopping processes", "err", cerr)
	}
	// Leave again: the loop's own attempt is bounded by one interval.
	if lerr := a.db.Membership().Leave(stopCtx, a.addr); lerr != nil {
		log.Warn("leaving the membership", "err", lerr)
	}
	shutCtx, cancelShut := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancelShut()
	_ = a.srv.Shutdown(shutCtx)
	if serr := <-srvDone; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		log.Warn("usage endpoint", "err", serr)
	}
	cancelBg()
	<-collDone
	log.Info("node-unit stopped")
	return err
}

func (a *agent) setup(ctx context.Context) error {
	c := a.cfg
	if err := os.MkdirAll(c.DataDir, 0o755); err != nil {
		return &EnvError{Name: "NODE_UNIT_DATA", Value: c.DataDir, Err: err}
	}
	a.addr = c.Address
	if a.addr == "" {
		slot, err := claimAddress(c.DataDir, generateAddress)
		if err != nil {
			return err
		}
		a.slot, a.addr = slot, slot.Address
		a.log.Debug("address from file", "address", a.addr, "file", slot.Path)
	}
	base := a.log
	a.log = base.With("address", a.addr)

	db, err := openDB(ctx, c.baseConfig)
	if err != nil {
		return err
	}
	// The loop runs one statement at a time: one connection per node-unit.
	db.SQL().SetMaxOpenConns(1)
	a.db = db
	if a.schema, err = db.Schema(ctx); err != nil {
		return &EnvError{Name: "DATABASE_URL", Value: redactURL(c.DatabaseURL), Err: err}
	}

	a.runner, err = proc.New(proc.Config{
		LogDir:    filepath.Join(c.DataDir, "logs", proc.EscapeID(a.addr)),
		Trusted:   c.Trusted,
		StopGrace: c.StopGrace,
		Logger:    a.log,
	})
	if err != nil {
		return err
	}
	a.coll = usage.NewCollector(usage.Config{Roots: a.runner.PIDs, Logger: a.log})

	a.ln, err = net.Listen("tcp", c.Listen)
	if err != nil {
		return &EnvError{Name: "NODE_UNIT_LISTEN", Value: c.Listen, Err: err}
	}
	a.metrics = metrics.NewClaim(metrics.ClaimConfig{})
	a.board = newBoard(a.metrics)
	a.srv = &http.Server{Handler: a.handler(), ReadHeaderTimeout: 5 * time.Second}
	a.usage = c.UsageURL
	if a.usage == "" {
		a.usage = usageURL(a.ln.Addr())
	}

	a.loop, err = claim.New(db.Deployments(), db.Membership(), procRunner{r: a.runner, b: a.board}, &usage.Probe{}, claim.Config{
		Address:           a.addr,
		UsageEndpoint:     a.usage,
		Policy:            c.Policy,
		Interval:          c.Interval,
		MembershipTTL:     c.MemberTTL,
		ProbeFailure:      c.ProbeFailure,
		LostAfter:         c.LostAfter,
		MaxClaimsPerCycle: c.MaxClaims,
		Rebalance:         claim.Rebalance{Enabled: c.Rebalance},
		SelfFence:         c.SelfFence,
		Observer:          a.board,
		Logger:            base, // the loop adds the address itself
	})
	return err
}

// handler serves the usage endpoint, the status endpoint and /metrics: the
// claim loop's series and the latest usage reading.
func (a *agent) handler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(a.metrics,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ksana_nodeunit_cpu_percent",
			Help: "CPU of the node-unit and its deployment processes, as a share of the machine's total CPU (0-100)."},
			func() float64 { return a.coll.Usage().CPUPercent }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ksana_nodeunit_memory_mb",
			Help: "Resident memory of the node-unit and its deployment processes, in MiB."},
			func() float64 { return a.coll.Usage().MemoryMB }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ksana_nodeunit_processes",
			Help: "Deployments and daemons this node-unit supervises, running or waiting to restart."},
			func() float64 { return float64(len(a.runner.Running())) }),
	)
	mux := http.NewServeMux()
	mux.Handle(usage.Path, usage.Handler(a.coll.Usage))
	mux.Handle(StatusPath, statusHandler(func() nodeStatus {
		return a.board.status(a.addr, a.runner.Processes(), func(id string) string { return lastLogLine(a.runner.LogPath(id)) })
	}))
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

// close releases what setup acquired; safe after a partial setup.
func (a *agent) close() error {
	if a.ln != nil {
		a.ln.Close() // already closed after a clean shutdown
	}
	if a.runner != nil {
		ctx, cancel := context.WithTimeout(context.Background(), a.cfg.StopGrace+5*time.Second)
		_ = a.runner.Close(ctx) // a no-op after a clean shutdown
		cancel()
	}
	var err error
	if a.db != nil {
		err = a.db.Close()
	}
	a.slot.Close()
	return err
}

// usageURL is the endpoint URL of a listener; an unspecified host (0.0.0.0
// or ::) becomes the host name.
func usageURL(addr net.Addr) string {
	host, port, _ := net.SplitHostPort(addr.String())
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		} else {
			host = "127.0.0.1"
		}
	}
	return fmt.Sprintf("http://%s%s", net.JoinHostPort(host, port), usage.Path)
}
