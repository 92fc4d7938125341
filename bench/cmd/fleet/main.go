// Command fleet measures the dispatch plane as it is deployed: K
// dispatcher processes on one Redis, N nodes and M sessions attached over
// WebSocket from this one process.
//
// It builds cmd/dispatcher (or runs the binary given with -dispatcher),
// starts -instances of it, each with a config file of its own in a
// temporary directory and one key prefix ksana-bench-<hex> on the Redis
// of -redis (by default a redis-server of its own on a free port), and
// reports:
//
//   - register_s: from the first dial until every node got registered and
//     every instance's /health counts every node in fleet_online;
//   - idle_redis_cmds_per_s: Redis commands a second while the fleet is
//     idle for -idle, from INFO commandstats (the whole server's: on a
//     shared Redis other clients count too), and the top commands;
//   - mem_per_node_kib: the growth of the instances' VmRSS from before the
//     nodes attached to after, over the nodes;
//   - load: -rate requests a second for -duration, spread over the
//     sessions and the pools; answered jobs a second, the latency
//     (request sent to job_result received) p50, p99 and max and how many
//     took over a second, the requests unanswered after -drain (and up to
//     10 of their ids) and the failures by reason;
//   - cpu_ms_per_job: the instances' utime+stime over the load phase (sent
//     to drained), less the idle rate over as long, over the answered
//     requests;
//   - kill (-kill): the load again, with a kill -9 of the last instance at
//     half-time; the time until every node that was on it registered on
//     another instance, and how many of the requests in flight at the
//     kill were answered, the last one how long after the kill.
//
// For each request left unanswered it logs when and where it was sent
// (and sent again) and its job's record in Redis, and the warnings of the
// live instances' logs.
//
// Nodes serve one of 10 pools (node i: pool i mod 10) with -capacity jobs
// at once; each acks and starts a job at once and sends its result after
// -work. A node or session whose connection drops goes to the next
// instance of its list (at once, then backing off from 100 ms to 5 s); a
// node registers there with the jobs it still runs, a session sends its
// unanswered requests again. Everything started is stopped at the end,
// also on failure or Ctrl-C: the processes are killed and waited for, the
// keys of the prefix deleted, the temporary directory removed.
//
//	go run ./cmd/fleet -nodes 300 -instances 2 -sessions 20 -rate 100 -duration 10s -kill
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := mainRun(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func mainRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.Dispatcher, "dispatcher", "", "the dispatcher binary (default: build ./cmd/dispatcher of the ksana module)")
	fs.StringVar(&o.Redis, "redis", "", "redis:// URL of the Redis the instances share (default: start a redis-server on a free port)")
	fs.IntVar(&o.Instances, "instances", 2, "dispatcher processes")
	fs.IntVar(&o.Nodes, "nodes", 300, "node connections, spread over the instances")
	fs.IntVar(&o.Sessions, "sessions", 20, "session connections, spread over the instances")
	fs.IntVar(&o.Pools, "pools", 10, "pools; node i serves pool i mod pools")
	fs.IntVar(&o.Capacity, "capacity", 4, "jobs at once per node")
	fs.DurationVar(&o.Work, "work", 20e6, "a node's time per job")
	fs.DurationVar(&o.Idle, "idle", 10e9, "idle phase (Redis commands and processor time at rest)")
	fs.Float64Var(&o.Rate, "rate", 100, "job requests a second during the load")
	fs.DurationVar(&o.Duration, "duration", 10e9, "load phase")
	fs.DurationVar(&o.Drain, "drain", 30e9, "longest wait for the last answers after a load phase")
	fs.BoolVar(&o.Kill, "kill", false, "then kill -9 one instance in the middle of a second load phase")
	asJSON := fs.Bool("json", false, "print the report as JSON instead of a table")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "fleet: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	o.Log = stderr
	rep, err := run(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "fleet: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
		return 0
	}
	printTable(stdout, rep)
	return 0
}

func printTable(w io.Writer, r *report) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, f string, v ...any) { fmt.Fprintf(tw, "%s\t"+f+"\n", append([]any{k}, v...)...) }
	row("fleet", "%d instances, %d nodes (capacity %d), %d sessions; work %.0f ms", r.Instances, r.Nodes, r.Capacity, r.Sessions, r.WorkMS)
	row("register_s", "%.2f", r.RegisterS)
	top := make([]string, 0, len(r.IdleTop))
	for _, c := range r.IdleTop {
		top = append(top, fmt.Sprintf("%s %.0f", c.Command, c.PerS))
	}
	row("idle_redis_cmds_per_s", "%.0f (%s)", r.IdleRedisPerS, strings.Join(top, ", "))
	row("idle_cpu_pct", "%.1f %% of a core, all instances", r.IdleCPUPct)
	row("mem_per_node_kib", "%.1f (VmRSS KiB before %v, after %v; nodes %v)", r.MemPerNodeKiB, r.RSSBeforeKiB, r.RSSAfterKiB, r.NodesPerInst)
	loadRows(row, "load", r.Load, r.Rate, r.DurationS)
	row("cpu_ms_per_job", "%.3f", r.CPUPerJobMS)
	if k := r.KillPhase; k != nil {
		loadRows(row, "kill.load", k.Load, r.Rate, r.DurationS)
		row("kill.nodes_back_s", "%.2f (%d of %d nodes of %s registered elsewhere)", k.NodesBackS, k.NodesBack, k.NodesMoved, k.Instance)
		row("kill.in_flight", "%d answered of %d (%d results), the last %.2f s after the kill", k.InFlightAnswered, k.InFlight, k.InFlightResults, k.InFlightLastS)
	}
	if len(r.NodeErrors) > 0 {
		row("errors", "%s (error frames without a request id)", counts(r.NodeErrors))
	}
	tw.Flush()
}

func loadRows(row func(string, string, ...any), name string, l loadReport, rate, dur float64) {
	row(name, "%d sent at %.0f/s for %.0f s: %d answered (%d results), %d unanswered", l.Sent, rate, dur, l.Answered, l.Results, l.Unanswered)
	row(name+".jobs_per_s", "%.1f", l.JobsPerS)
	row(name+".latency_ms", "p50 %.1f  p99 %.1f  max %.1f  (%d over 1 s)", l.P50MS, l.P99MS, l.MaxMS, l.Over1S)
	if len(l.Open) > 0 {
		row(name+".unanswered", "%s", strings.Join(l.Open, " "))
	}
	if len(l.Failures) > 0 {
		row(name+".failures", "%s", counts(l.Failures))
	}
}

func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
