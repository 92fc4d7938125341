package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command failed
	exitUsage = 2 // bad arguments or environment
)

// run runs one sub-command and returns the exit code.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "run":
		return cmdRun(args, getenv, stdout, stderr)
	case "add":
		return cmdAdd(args, getenv, stdout, stderr)
	case "enable", "disable":
		return cmdSetEnabled(cmd, args, getenv, stdout, stderr)
	case "remove":
		return cmdRemove(args, getenv, stdout, stderr)
	case "list":
		return cmdList(args, getenv, stdout, stderr)
	case "nodes":
		return cmdNodes(args, getenv, stdout, stderr)
	case "status":
		return cmdStatus(args, getenv, stdout, stderr)
	case "help":
		printUsage(stdout)
		return exitOK
	}
	fmt.Fprintf(stderr, "nodeunit: unknown command %q (nodeunit -h lists the commands)\n", cmd)
	return exitUsage
}

const usageHead = `nodeunit: a node-unit agent. Node-units sharing one database (SQLite or
PostgreSQL) place the enabled deployments among themselves, run the ones
bound to them and every enabled daemon as local processes, and take over
the deployments of a node-unit that goes away.

Usage:

  nodeunit [run]                         run a node-unit until SIGINT or SIGTERM
  nodeunit add --id ID [flags] COMMAND [ARG...]
                                         add a deployment (enabled unless --disabled)
  nodeunit enable ID...                  enable deployments
  nodeunit disable ID...                 disable deployments (their processes stop)
  nodeunit remove ID...                  delete deployments
  nodeunit list                          show the deployments: id, type, enabled, address, command
  nodeunit nodes                         show the active node-units and their deployment counts
  nodeunit status                        show each deployment's state on each node-unit: running,
                                         restarting (with its last exit), refused by the trust rule
  nodeunit help                          show this help

Flags of add:

  --id ID            deployment id (required)
  --type TYPE        deployment (placed on one node-unit) or daemon (runs on every node-unit); default deployment
  --command CMD      the command, instead of the first word after the flags
  --arg ARG          one argument (repeatable), instead of the words after the command
  --env KEY=VALUE    one environment variable (repeatable)
  --address ADDR     bind to a node-unit by hand (type deployment only)
  --package NAME     package name; --version VERSION package version
  --disabled         add it disabled

Environment (defaults in brackets). The sub-commands other than run read
only DATABASE_URL, NODE_UNIT_DATA, LOG_LEVEL, LOG_FORMAT,
NODE_UNIT_SCHEDULER_INTERVAL_MS and NODE_UNIT_MEMBERSHIP_TTL_MS (nodes and
status use the last two to tell which node-units are active); add also
reads NODE_UNIT_TRUSTED_COMMAND_REGEXP, to warn about a command it would
refuse. list, nodes and status only read: they create no table.

`

const usageTail = `
The usage endpoint answers GET /NodeUnit/InspectResourceUsage with
{"cpu_percent": ..., "memory_mb": ...}: the CPU of this process and its
deployment processes as a share of the machine's total CPU (0-100) and their
resident memory in MB. The same listener serves GET /NodeUnit/Status (the
state of this node-unit's deployments, read by nodeunit status) and
GET /metrics (Prometheus). Each deployment's output goes to
$NODE_UNIT_DATA/logs/ADDRESS/ID.log. A bad variable stops start-up with a
message naming it (exit status 2).
`

func printUsage(w io.Writer) {
	fmt.Fprint(w, usageHead)
	for _, v := range envVars {
		fmt.Fprintf(w, "  %s  [%s]\n", v.Name, v.Default)
		for _, line := range wrap(v.Help, 70) {
			fmt.Fprintf(w, "      %s\n", line)
		}
	}
	fmt.Fprint(w, usageTail)
}

// wrap splits s into lines of at most width bytes, at spaces.
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// newLogger returns the structured logger on stderr.
func newLogger(c baseConfig, stderr io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.LogLevel}
	if c.LogJSON {
		return slog.New(slog.NewJSONHandler(stderr, opts))
	}
	return slog.New(slog.NewTextHandler(stderr, opts))
}

// newFlags returns a flag set whose -h prints the full help.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args; -h prints the help. done reports that run should
// return code.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, done bool) {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printUsage(stdout)
		return exitOK, true
	case err != nil:
		fmt.Fprintf(stderr, "nodeunit %s: %v (nodeunit -h shows the usage)\n", fs.Name(), err)
		return exitUsage, true
	}
	return 0, false
}

func cmdRun(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := newFlags("run")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "nodeunit run: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	cfg, err := loadRun(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "nodeunit: %v\n", err)
		return exitUsage
	}
	log := newLogger(cfg.baseConfig, stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal ends the process at once
	}()
	err = runAgent(ctx, cfg, log)
	stop()
	if err != nil {
		// A bad setting found while starting (DATABASE_URL, NODE_UNIT_LISTEN,
		// NODE_UNIT_DATA) reads like the ones found before: one plain line.
		var ee *EnvError
		if errors.As(err, &ee) {
			fmt.Fprintf(stderr, "nodeunit: %v\n", err)
			return exitUsage
		}
		log.Error("node-unit failed", "err", err)
		return exitError
	}
	return exitOK
}

// redactURL hides the password of a URL.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}
