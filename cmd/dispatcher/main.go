package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ksana-dev/ksana/metrics"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/redisstore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func usage() string {
	var b strings.Builder
	b.WriteString(`Usage: dispatcher [-config config.toml] [-listen host:port]

One dispatch instance: nodes connect to /ws/node, sessions to
/ws/session?session_id=ID; /metrics serves Prometheus metrics, /health the
instance's state. Without -config (or with scheduler.phase2.enabled = false)
it runs alone, in memory; with enabled = true it shares the dispatch plane
with every instance on the same Redis and key prefix.

Flags:
  -config path     the config.toml to read (default: none, every default)
  -listen addr     overrides dispatcher.listen

Settings of config.toml (key = default, then its meaning):
`)
	for _, s := range settings {
		def := s.def
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(&b, "  %s = %s\n      %s\n", s.key, def, s.doc)
	}
	b.WriteString(`
Node credentials: each [[dispatcher.node_credentials]] table binds a token
(at least 16 bytes) to the node ids it may register:

  [[dispatcher.node_credentials]]
  token = "a-long-random-secret-of-n1"
  node_ids = ["n1"]

A node presenting that token as its bearer token may register n1 and no
other id (a register for another id gets an error frame with code
forbidden_node). dispatcher.node_token, when also set, still admits any
node id; with neither set, /ws/node is open.

A bad value, an unknown key or an unknown table stops the start with a
message naming the file and the key (exit status 2).

On SIGINT or SIGTERM the instance stops accepting connections, withdraws its
presence, hands every node and session a close frame after the messages
queued for it, lets the nodes' jobs go to other nodes, and exits 0.
`)
	return b.String()
}

// run is main without the process: it returns the exit status. getenv
// reads the environment (KSANA_DISPATCHER_METRICS_TOKEN).
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dispatcher", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	path := fs.String("config", "", "")
	listen := fs.String("listen", "", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage())
			return 0
		}
		fmt.Fprintf(stderr, "dispatcher: %v\n\n%s", err, usage())
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "dispatcher: unexpected argument %q (see dispatcher -h)\n", fs.Arg(0))
		return 2
	}
	cfg, err := loadConfig(*path, *listen, getenv)
	if err != nil {
		fmt.Fprintf(stderr, "dispatcher: bad configuration: %v (see dispatcher -h)\n", err)
		return 2
	}
	log := newLogger(cfg.Server, stderr)
	if err := serve(ctx, cfg, log, stdout); err != nil {
		log.Error("dispatcher: stopped", "err", err)
		return 1
	}
	return 0
}

func newLogger(cfg ServerConfig, w io.Writer) *slog.Logger {
	level, _ := parseLevel(cfg.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// serve runs the instance until ctx ends, then shuts it down.
func serve(ctx context.Context, cfg config, log *slog.Logger, stdout io.Writer) error {
	plane := cfg.Plane
	plane.Logger = log
	var d *scheduler.Dispatcher
	m := metrics.NewScheduler(func() (int, int) { return d.Counts() })
	m.ReadQueues(func() []scheduler.QueueStat { return d.Queues() })
	plane.Hooks = m.Hooks()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	var st scheduler.Stores
	var err error
	if cfg.Redis != nil {
		client, cerr := redisstore.NewClient(cfg.Redis.Client)
		if cerr != nil {
			return cerr
		}
		defer client.Close()
		sc := cfg.Redis.Stores
		sc.OpHook = m.OpHook()
		st, err = redisstore.NewStores(client, plane, sc)
	} else {
		st, err = scheduler.NewMemStores(plane)
	}
	if err != nil {
		return err
	}
	if d, err = scheduler.NewDispatcher(st, plane); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return err
	}
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	runDone := make(chan error, 1)
	go func() { runDone <- d.Run(runCtx) }()

	srv := newServer(d, st, cfg.Server, log, reg)
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	// The WebSocket handlers lift the read and write deadlines of their
	// connection when they upgrade it: their frames have a write timeout
	// of their own, and pings find a peer that is gone.
	hs := &http.Server{
		Handler:           srv.handler(),
		ReadHeaderTimeout: ms(cfg.Server.ReadHeaderTimeoutMS),
		WriteTimeout:      ms(cfg.Server.WriteTimeoutMS),
		IdleTimeout:       ms(cfg.Server.IdleTimeoutMS),
		ConnContext:       withConn,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	httpDone := make(chan error, 1)
	go func() { httpDone <- hs.Serve(newPendingListener(ln, cfg.Server.MaxPendingConns, log)) }()
	mode := "memory"
	if cfg.Redis != nil {
		mode = "redis " + cfg.Redis.Mode
	}
	log.Info("dispatcher: started", "instance_id", d.InstanceID(), "addr", ln.Addr().String(), "store", mode)
	fmt.Fprintf(stdout, "dispatcher %s listening on %s\n", d.InstanceID(), ln.Addr())

	select {
	case <-ctx.Done():
	case err := <-runDone:
		hs.Close()
		return fmt.Errorf("dispatch loops: %w", err)
	case err := <-httpDone:
		stopRun()
		<-runDone
		return fmt.Errorf("http server: %w", err)
	}

	// Shutdown: stop accepting, withdraw presence, close frames, drain.
	log.Info("dispatcher: stopping", "instance_id", d.InstanceID())
	drain := time.Duration(cfg.Server.DrainTimeoutMS) * time.Millisecond
	srv.stopping.Store(true)
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("dispatcher: http shutdown", "err", err)
	}
	stopRun()
	if err := <-runDone; err != nil {
		log.Warn("dispatcher: dispatch loops", "err", err)
	}
	if err := srv.shutdown(sctx); err != nil {
		log.Warn("dispatcher: connections still open at the drain timeout", "err", err)
	}
	log.Info("dispatcher: stopped", "instance_id", d.InstanceID())
	return nil
}
