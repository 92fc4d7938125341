package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/ksana-dev/ksana/cmd/ksana/internal/sighup"
	"github.com/ksana-dev/ksana/store/jsonstore"
	"github.com/ksana-dev/ksana/store/sqlstore"
)

// SIGHUP is caught from the start of the process, before main: package
// sighup asks for it in its init. The service reloads its tokens on it, or
// logs and ignores it; it never ends the process.

func main() {
	lowerGOGC = os.Getenv("GOGC") == ""
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// defaultGOGC is the collector's target once the jobs are loaded, when
// the environment sets no GOGC (lowerGOGC): the heap may grow by half of
// what is live between collections, not by all of it (Go's default of
// 100). The service's heap is mostly its jobs, which live as long as it
// does, and a run leaves a few kilobytes of garbage: at a million jobs
// and 1,000 runs a second, 50 keeps the resident memory at about 600
// bytes a job instead of 800, for a few percent more of one core
// (examples/jsonstore-load). The start, which builds that heap from
// nothing, runs at Go's default: at 50 it collects twice as often while
// it reads the files.
const defaultGOGC = 50

// lowerGOGC is set by main when the environment sets no GOGC: the
// service sets defaultGOGC once its jobs are loaded.
var lowerGOGC bool

// run is main without the process: it returns the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isCommand(args[0]) {
		// A client, not the service: a hangup ends it.
		signal.Reset(syscall.SIGHUP)
		return runCommand(ctx, args, getenv, os.Stdin, stdout, stderr)
	}
	fs := flag.NewFlagSet("ksana", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			fmt.Fprint(stdout, usage())
			return 0
		}
		fmt.Fprint(stderr, usage())
		return 2
	}
	if fs.NArg() > 0 {
		if s := typoOf(fs.Args()); s != "" {
			fmt.Fprintf(stderr, "ksana: unknown command %q; did you mean %q? (ksana -h lists the commands)\n", strings.Join(fs.Args()[:min(2, fs.NArg())], " "), s)
			return 2
		}
		fmt.Fprintf(stderr, "ksana: unexpected argument %q (configuration comes from the environment; see ksana -h)\n", fs.Arg(0))
		return 2
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "ksana: bad configuration: %v (see ksana -h)\n", err)
		return 2
	}
	log := newLogger(cfg, stderr)
	svc, err := newService(cfg, log)
	if errors.Is(err, jsonstore.ErrLocked) {
		log.Error("ksana: start: the data directory is in use by another process (another ksana?); stop it or set KSANA_DATA to another directory",
			"data_dir", cfg.DataDir, "error", err)
		return 1
	}
	if errors.Is(err, sqlstore.ErrInstanceInUse) {
		log.Error("ksana: start: KSANA_INSTANCE names a live instance on this database; give each instance its own name (or leave KSANA_INSTANCE unset for a unique one)",
			"error", err)
		return 2
	}
	var cerr *ConfigError
	if errors.As(err, &cerr) {
		fmt.Fprintf(stderr, "ksana: bad configuration: %v (see ksana -h)\n", err)
		return 2
	}
	if err != nil {
		log.Error("ksana: start", "error", err)
		return 1
	}
	svc.hup = sighup.C
	ln, err := listen(cfg.Listen, cfg.Port)
	if err != nil {
		log.Error("ksana: start", "error", err)
		svc.closeStore()
		return 1
	}
	if err := svc.run(ctx, ln); err != nil {
		return 1
	}
	return 0
}
