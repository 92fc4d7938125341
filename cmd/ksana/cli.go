package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/client"
)

// DefaultAddr is the address the commands call when neither -addr nor
// KSANA_ADDR is given.
const DefaultAddr = "http://127.0.0.1:7100"

// Exit statuses of the commands.
const (
	exitOK       = 0
	exitAPIError = 1 // the API refused, or could not be reached
	exitUsage    = 2
)

// command is one subcommand of ksana: jobs ls, health, ...
type command struct {
	name  string // "jobs ls"
	args  string // the positional arguments, for usage: "ID"
	short string
	flags func(fs *flag.FlagSet, o *cmdOpts)
	run   func(ctx context.Context, e *cmdEnv, args []string) error
	// fields names the flag of each field of the API's errors whose name
	// is not the flag's (last_status: -status); a field named as a flag
	// of the command is that flag.
	fields map[string]string
}

// cmdOpts are the flags of a command.
type cmdOpts struct {
	addr, token, output string
	file                string
	limit, n            int
	after, enabled      string
	kind, status, name  string
	typ                 string
	job                 string
	jobs                []string // ksana runs -job
	since, until        string
	instance            string
	forDur              string
	reason, who         string
	all, reverse        bool            // jobs ls -all, audit -reverse
	dead                bool            // alerts ls -dead
	wait                string          // runs get -wait
	run                 runFlags        // jobs run
	set                 map[string]bool // the flags given
}

// runFlags are the flags of jobs run.
type runFlags struct {
	body, args, key string
	bodySet         bool
	headers         headerFlag
	force           bool
}

// headerFlag collects -header K=V flags.
type headerFlag map[string]string

func (h *headerFlag) String() string { return "" }

func (h *headerFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("want NAME=VALUE, got %q", v)
	}
	if *h == nil {
		*h = headerFlag{}
	}
	(*h)[strings.TrimSpace(k)] = val
	return nil
}

// cmdEnv is what a command runs with.
type cmdEnv struct {
	c      *client.Client
	o      *cmdOpts
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// usageError is a command line the command does not take (exit status 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

func commands() []command {
	return []command{
		{"jobs ls", "", "list the jobs, a page at a time (-all: every job), with filters", func(fs *flag.FlagSet, o *cmdOpts) {
			fs.IntVar(&o.limit, "limit", defaultListPage, "a page of at most `N` jobs (1 to 1000); when more follow, the next page's -after is printed on stderr")
			fs.BoolVar(&o.all, "all", false, "list every job that matches, page after page (not with -limit)")
			fs.StringVar(&o.after, "after", "", "start after the job of this `ID` (the last of the previous page)")
			fs.StringVar(&o.enabled, "enabled", "", "only the enabled (true) or paused (false) jobs")
			fs.StringVar(&o.kind, "kind", "", "only the jobs of this schedule `kind`: once, every or cron")
			fs.StringVar(&o.status, "status", "", "only the jobs whose last run had this `status` (success, failed, timeout, skipped, paused, missed; never: not run yet)")
			fs.StringVar(&o.name, "name", "", "only the jobs of this exact `name`")
			fs.StringVar(&o.typ, "type", "", "only the jobs of this `type` (http, or a Go function's)")
		}, cmdList, map[string]string{"last_status": "status"}},
		{"jobs get", "ID", "show a job", nil, cmdGet, nil},
		{"jobs add", "", "create a job from its JSON form (-f FILE, or -f - for stdin)", fileFlag, cmdAdd, nil},
		{"jobs edit", "ID", "change a job by a JSON merge patch (-f FILE, or -f - for stdin): only the fields given change, null resets one", fileFlag, cmdEdit, nil},
		{"jobs rm", "ID", "delete a job", nil, cmdRemove, nil},
		{"jobs run", "ID", "queue a run of a job now, optionally with another body, headers or args for that run", runFlagsOf, cmdRunNow,
			map[string]string{"headers": "header", "Idempotency-Key": "idempotency-key"}},
		{"jobs pause", "ID", "pause a job, for good or until a time (-until, -for)", untilFlags, cmdPause, nil},
		{"jobs resume", "ID", "resume a job", nil, cmdResume, nil},
		{"jobs runs", "ID", "show a job's newest runs, newest first", func(fs *flag.FlagSet, o *cmdOpts) {
			fs.IntVar(&o.limit, "limit", 0, "at most `N` runs (default the API's, 50)")
			fs.StringVar(&o.status, "status", "", "only the runs of this `status`: success, failed, timeout, skipped or missed")
		}, cmdRuns, nil},
		{"jobs next", "ID", "show a job's next run times", func(fs *flag.FlagSet, o *cmdOpts) {
			fs.IntVar(&o.n, "n", 0, "how many times, 1 to 1000 (default the API's, 10)")
		}, cmdNext, nil},
		{"runs", "", "show the run history of every job, newest first, with filters: called runs, and the slots not called with their reason", historyFlags, cmdHistory, nil},
		{"runs get", "RUN_ID", "show one run by its run id (the one jobs run prints), whichever job it belongs to", func(fs *flag.FlagSet, o *cmdOpts) {
			fs.StringVar(&o.wait, "wait", "", "wait up to this `duration` (30s, 5m) for the run to end, then show it")
		}, cmdRunGet, nil},
		{"audit", "", "show the audit log of changes (who, what, when, the fields changed), oldest first (-reverse: newest first)", auditFlags, cmdAudit,
			map[string]string{"job_id": "job"}},
		{"alerts ls", "", "show the alerts waiting for delivery (-dead: those given up), oldest first, and how many of each there are", alertsFlags, cmdAlerts, nil},
		{"pause", "", "pause the whole service (maintenance): no job fires until resume or -until/-for; admin role", func(fs *flag.FlagSet, o *cmdOpts) {
			untilFlags(fs, o)
			fs.StringVar(&o.reason, "reason", "", "the `text` GET /health shows while paused")
		}, cmdPauseAll, nil},
		{"resume", "", "end the service pause; admin role", nil, cmdResumeAll, nil},
		{"health", "", "show the service's health (and its pause)", nil, cmdHealth, nil},
	}
}

// defaultListPage is the page of jobs ls without -limit.
const defaultListPage = 100

// commandNames are the names of the commands, for "did you mean".
func commandNames() []string {
	var out []string
	for _, c := range commands() {
		out = append(out, c.name)
	}
	return out
}

// didYouMean returns the command name closest to name, when one is close
// enough to be a typo of it ("job ls": "jobs ls"), else "".
func didYouMean(name string) string {
	best, bestD := "", 3
	for _, c := range commandNames() {
		if d := editDistance(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// flagOf returns the flag of cmd that the API's error field stands for,
// "" when none does (a field of a job's JSON, from -f).
func flagOf(fs *flag.FlagSet, cmd command, field string) string {
	if f, ok := cmd.fields[field]; ok {
		return f
	}
	if field != "" && fs.Lookup(field) != nil {
		return field
	}
	return ""
}

func runFlagsOf(fs *flag.FlagSet, o *cmdOpts) {
	fs.Func("body", "send this `text` as the HTTP body of this run (an HTTP job)", func(v string) error {
		o.run.body, o.run.bodySet = v, true
		return nil
	})
	fs.Var(&o.run.headers, "header", "set this request header for this run, `NAME=VALUE` (an HTTP job; repeatable)")
	fs.StringVar(&o.run.args, "args", "", "run a Go function job with these `JSON` args")
	fs.BoolVar(&o.run.force, "force", false, "run even when a run of the job is in flight")
	fs.StringVar(&o.run.key, "idempotency-key", "", "an Idempotency-Key: the same `key` again within 24h gives back the first run, without a second")
}

func fileFlag(fs *flag.FlagSet, o *cmdOpts) {
	fs.StringVar(&o.file, "f", "", "the JSON `file` (- for stdin); required")
}

// isCommand reports whether arg starts a command rather than the service.
func isCommand(arg string) bool {
	return arg == "jobs" || arg == "runs" || arg == "health" || arg == "audit" || arg == "alerts" || arg == "pause" || arg == "resume"
}

// commandsUsage lists the commands, for ksana -h.
func commandsUsage() string {
	var b strings.Builder
	b.WriteString("Commands (clients of a running service's API; each takes -h):\n")
	for _, c := range commands() {
		fmt.Fprintf(&b, "  ksana %-20s %s\n", strings.TrimSpace(c.name+" "+c.args), c.short)
	}
	b.WriteString("They take -addr (default $KSANA_ADDR, else " + DefaultAddr + "), -token (default\n" +
		"$KSANA_API_TOKEN) and -o table|json (default table). Exit status: 0 on success,\n" +
		"1 when the API refuses (its message and field are printed) or cannot be reached,\n" +
		"2 for a bad command line.\n")
	return b.String()
}

// runCommand runs the command of args (args[0] is "jobs" or "health")
// and returns the exit status.
func runCommand(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	// Everything the command prints goes through out and errOut.
	out, errOut := &termWriter{w: stdout}, &termWriter{w: stderr}
	defer out.Flush()
	defer errOut.Flush()
	stdout, stderr = out, errOut
	name := args[0]
	rest := args[1:]
	if name == "runs" && len(rest) > 0 && rest[0] == "get" {
		name, rest = "runs get", rest[1:]
	}
	if name == "jobs" {
		if len(rest) == 0 || rest[0] == "-h" || rest[0] == "-help" || rest[0] == "--help" {
			fmt.Fprint(stderr, "Usage: ksana jobs ls|get|add|edit|rm|run|pause|resume|runs|next [flags] [ID]\n\n"+commandsUsage())
			if len(rest) == 0 {
				return exitUsage
			}
			return exitOK
		}
		name += " " + rest[0]
		rest = rest[1:]
	}
	i := slices.IndexFunc(commands(), func(c command) bool { return c.name == name })
	if i < 0 {
		if s := didYouMean(name); s != "" {
			fmt.Fprintf(stderr, "ksana: unknown command %q; did you mean %q?\n", name, s)
			return exitUsage
		}
		fmt.Fprintf(stderr, "ksana: unknown command %q\n\n%s", name, commandsUsage())
		return exitUsage
	}
	cmd := commands()[i]
	o := &cmdOpts{}
	fs := flag.NewFlagSet("ksana "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.addr, "addr", "", "the service's `URL` (default $KSANA_ADDR, else "+DefaultAddr+")")
	fs.StringVar(&o.token, "token", "", "the API `token` (default $KSANA_API_TOKEN)")
	fs.StringVar(&o.output, "o", "table", "output `format`: table (for people) or json (for scripts)")
	if cmd.flags != nil {
		cmd.flags(fs, o)
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: ksana %s [flags]%s\n\n%s.\n\nFlags:\n", name, strings.TrimRight(" "+cmd.args, " "), cmd.short)
		fs.PrintDefaults()
	}
	// Flags may come before and after the positional arguments.
	var pos []string
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK
			}
			return exitUsage
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	if want := len(strings.Fields(cmd.args)); len(pos) != want {
		if want == 0 {
			fmt.Fprintf(stderr, "ksana %s: takes no argument, got %q\n", name, pos)
		} else {
			fmt.Fprintf(stderr, "ksana %s: takes %s, got %d arguments\n", name, cmd.args, len(pos))
		}
		fs.Usage()
		return exitUsage
	}
	if o.output != "table" && o.output != "json" {
		fmt.Fprintf(stderr, "ksana %s: -o must be table or json, got %q\n", name, o.output)
		return exitUsage
	}
	out.json = o.output == "json"
	addr := cmpOr(o.addr, strings.TrimSpace(getenv("KSANA_ADDR")), DefaultAddr)
	token := cmpOr(o.token, strings.TrimSpace(getenv("KSANA_API_TOKEN")))
	c, err := client.New(addr, &http.Client{Timeout: 30 * time.Second}, token)
	if err != nil {
		fmt.Fprintf(stderr, "ksana %s: -addr/KSANA_ADDR: %v\n", name, err)
		return exitUsage
	}
	err = cmd.run(ctx, &cmdEnv{c: c, o: o, stdin: stdin, stdout: stdout, stderr: stderr}, pos)
	var ue *usageError
	var ae *client.APIError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "ksana %s: %s\n", name, ue.msg)
		return exitUsage
	case errors.As(err, &ae):
		if f := flagOf(fs, cmd, ae.Field); f != "" {
			fmt.Fprintf(stderr, "ksana %s: -%s: %s (HTTP %d)\n", name, f, ae.Message, ae.Status)
		} else if ae.Field != "" {
			fmt.Fprintf(stderr, "ksana %s: %s (field %s; HTTP %d)\n", name, ae.Message, ae.Field, ae.Status)
		} else {
			fmt.Fprintf(stderr, "ksana %s: %s (HTTP %d)\n", name, ae.Message, ae.Status)
		}
		return exitAPIError
	default:
		fmt.Fprintf(stderr, "ksana %s: %v\n", name, err)
		return exitAPIError
	}
}

func cmpOr(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func (e *cmdEnv) json(v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func (e *cmdEnv) table() *table {
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	return &table{tw: tw, esc: &termWriter{w: tw}}
}

func cmdList(ctx context.Context, e *cmdEnv, _ []string) error {
	o := e.o
	opts := client.ListOptions{Limit: o.limit, After: o.after, Kind: o.kind, Name: o.name, Type: o.typ}
	if o.limit < 1 {
		return usagef("-limit: must be from 1 to 1000, got %d", o.limit)
	}
	if o.all && o.set["limit"] {
		return usagef("-all lists every job: leave out -limit")
	}
	switch o.enabled {
	case "":
	case "true", "false":
		on := o.enabled == "true"
		opts.Enabled = &on
	default:
		return usagef("-enabled: must be true or false, got %q", o.enabled)
	}
	if o.status == "never" {
		opts.NeverRun = true
	} else {
		opts.LastStatus = cron.Status(o.status)
	}
	var jobs []cron.Job
	if o.all {
		opts.Limit = 1000
	}
	for {
		p, err := e.c.List(ctx, opts)
		if err != nil {
			return err
		}
		jobs = append(jobs, p.Jobs...)
		if p.Next == "" {
			break
		}
		if !o.all {
			fmt.Fprintf(e.stderr, "more jobs follow: -after %s for the next page, -all for every job\n", p.Next)
			break
		}
		opts.After = p.Next
	}
	if o.output == "json" {
		if jobs == nil {
			jobs = []cron.Job{}
		}
		return e.json(jobs)
	}
	w := e.table()
	fmt.Fprintln(w, "ID\tNAME\tTYPE\tSCHEDULE\tENABLED\tNEXT RUN\tLAST RUN\tLAST STATUS")
	for _, j := range jobs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%t\t%s\t%s\t%s\n", j.ID, dash(j.Name), j.Type, scheduleText(j.Schedule), !j.Paused,
			timeText(j.NextRunAt), timeText(j.LastRunAt), dash(string(j.LastStatus)))
	}
	return w.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func timeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// scheduleText is a schedule in one short line: "every 5m", "cron 0 9 * * * (Europe/Paris)".
func scheduleText(s cron.ScheduleSpec) string {
	switch s.Kind {
	case cron.KindOnce:
		return "once at " + timeText(s.RunAt)
	case cron.KindEvery:
		t := "every " + s.Every.String()
		if s.Jitter > 0 {
			t += " jitter " + s.Jitter.String()
		}
		return t
	case cron.KindCron:
		if s.TZ != "" {
			return "cron " + s.Cron + " (" + s.TZ + ")"
		}
		return "cron " + s.Cron
	}
	return s.Kind
}

// printJob prints one job: its JSON form, or a field a line.
func (e *cmdEnv) printJob(j cron.Job) error {
	if e.o.output == "json" {
		return e.json(j)
	}
	w := e.table()
	row := func(k, v string) { fmt.Fprintf(w, "%s\t%s\n", k, v) }
	row("id", j.ID)
	row("name", dash(j.Name))
	row("enabled", strconv.FormatBool(!j.Paused))
	if !j.PausedUntil.IsZero() {
		row("paused_until", timeText(j.PausedUntil))
	}
	if !j.PausedAt.IsZero() {
		row("paused_at", timeText(j.PausedAt))
	}
	row("type", j.Type)
	if j.IsHTTP() {
		row("http", j.HTTP.Method+" "+j.HTTP.URL)
		for _, k := range slices.Sorted(mapKeys(j.HTTP.Headers)) {
			row("  header", k+": "+j.HTTP.Headers[k])
		}
		if j.HTTP.Body != "" {
			row("  body", j.HTTP.Body)
		}
	}
	if len(j.Args) > 0 {
		row("args", string(j.Args))
	}
	row("schedule", scheduleText(j.Schedule))
	row("timeout", j.Timeout.String())
	row("max_retries", strconv.Itoa(j.MaxRetries))
	row("retry_backoff", j.RetryBackoff.String())
	if j.MisfireGrace > 0 {
		row("misfire_grace", j.MisfireGrace.String())
	}
	if j.KeepRuns > 0 {
		row("keep_runs", strconv.Itoa(j.KeepRuns))
	}
	row("next_run_at", timeText(j.NextRunAt))
	row("last_run_at", timeText(j.LastRunAt))
	row("last_status", dash(string(j.LastStatus)))
	if j.LastError != "" {
		row("last_error", j.LastError)
	}
	return w.Flush()
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func cmdGet(ctx context.Context, e *cmdEnv, args []string) error {
	j, err := e.c.Get(ctx, args[0])
	if err != nil {
		return err
	}
	return e.printJob(j)
}

// readFile reads the JSON document of -f.
func (e *cmdEnv) readFile() ([]byte, error) {
	switch e.o.file {
	case "":
		return nil, usagef("-f is required: a JSON file, or - for stdin")
	case "-":
		b, err := io.ReadAll(io.LimitReader(e.stdin, 16<<20))
		if err != nil {
			return nil, fmt.Errorf("reading stdin: %w", err)
		}
		return b, nil
	}
	b, err := os.ReadFile(e.o.file)
	if err != nil {
		return nil, usagef("-f: %v", err)
	}
	return b, nil
}

func cmdAdd(ctx context.Context, e *cmdEnv, _ []string) error {
	b, err := e.readFile()
	if err != nil {
		return err
	}
	j, err := e.c.CreateJSON(ctx, b)
	if err != nil {
		return err
	}
	return e.printJob(j)
}

func cmdEdit(ctx context.Context, e *cmdEnv, args []string) error {
	b, err := e.readFile()
	if err != nil {
		return err
	}
	j, err := e.c.PatchJSON(ctx, args[0], b)
	if err != nil {
		return err
	}
	return e.printJob(j)
}

func cmdRemove(ctx context.Context, e *cmdEnv, args []string) error {
	if err := e.c.Delete(ctx, args[0]); err != nil {
		return err
	}
	if e.o.output == "json" {
		return e.json(map[string]string{"deleted": args[0]})
	}
	_, err := fmt.Fprintf(e.stdout, "deleted %s\n", args[0])
	return err
}

func cmdRunNow(ctx context.Context, e *cmdEnv, args []string) error {
	f := &e.o.run
	opts := client.RunNowOptions{Headers: f.headers, Force: f.force, IdempotencyKey: f.key}
	if f.bodySet {
		opts.Body = []byte(f.body)
	}
	if f.args != "" {
		if !json.Valid([]byte(f.args)) {
			return usagef("-args: not JSON: %s", f.args)
		}
		opts.Args = json.RawMessage(f.args)
	}
	runID, err := e.c.RunNowWith(ctx, args[0], opts)
	if err != nil {
		return err
	}
	if e.o.output == "json" {
		return e.json(map[string]string{"run_id": runID, "job_id": args[0]})
	}
	_, err = fmt.Fprintf(e.stdout, "queued run %s of %s\n", runID, args[0])
	return err
}

func cmdPause(ctx context.Context, e *cmdEnv, args []string) error {
	until, err := e.o.untilTime(time.Now())
	if err != nil {
		return err
	}
	j, err := e.c.PauseUntil(ctx, args[0], until)
	if err != nil {
		return err
	}
	return e.printJob(j)
}

func cmdResume(ctx context.Context, e *cmdEnv, args []string) error {
	j, err := e.c.Resume(ctx, args[0])
	if err != nil {
		return err
	}
	return e.printJob(j)
}

func cmdRuns(ctx context.Context, e *cmdEnv, args []string) error {
	runs, err := e.c.Runs(ctx, args[0], client.RunsOptions{Limit: e.o.limit, Status: cron.Status(e.o.status)})
	if err != nil {
		return err
	}
	if e.o.output == "json" {
		if runs == nil {
			runs = []cron.Run{}
		}
		return e.json(runs)
	}
	w := e.table()
	fmt.Fprintln(w, "RUN ID\tSCHEDULED\tTRIGGERED\tTRIGGER\tSTATUS\tATTEMPTS\tHTTP\tLATENCY\tINSTANCE\tERROR")
	for _, r := range runs {
		httpStatus := "-"
		if r.HTTPStatus != 0 {
			httpStatus = strconv.Itoa(r.HTTPStatus)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.ID, timeText(r.ScheduledAt), timeText(r.TriggeredAt), triggerText(r), r.Status,
			r.Attempts, httpStatus, r.Latency, dash(r.Instance), dash(oneLine(r.Error)))
	}
	return w.Flush()
}

// oneLine keeps a table row on one line.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return s
}

func cmdNext(ctx context.Context, e *cmdEnv, args []string) error {
	if e.o.set["n"] && (e.o.n < 1 || e.o.n > cron.MaxPreview) {
		return usagef("-n: must be from 1 to %d, got %d", cron.MaxPreview, e.o.n)
	}
	next, err := e.c.Next(ctx, args[0], e.o.n)
	if err != nil {
		return err
	}
	if e.o.output == "json" {
		if next.Times == nil {
			next.Times = []time.Time{}
		}
		return e.json(next)
	}
	if next.Paused {
		fmt.Fprintf(e.stdout, "job %s is paused: it fires none of these until resumed\n", next.JobID)
	}
	if len(next.Times) == 0 {
		_, err := fmt.Fprintf(e.stdout, "job %s has no further run\n", next.JobID)
		return err
	}
	var loc *time.Location
	if next.TZ != "" {
		loc, _ = time.LoadLocation(next.TZ)
	}
	w := e.table()
	if loc != nil {
		fmt.Fprintf(w, "UTC\t%s\n", next.TZ)
	} else {
		fmt.Fprintln(w, "UTC")
	}
	for _, t := range next.Times {
		if loc != nil {
			fmt.Fprintf(w, "%s\t%s\n", t.UTC().Format(time.RFC3339Nano), t.In(loc).Format("2006-01-02 15:04:05 MST"))
		} else {
			fmt.Fprintln(w, t.UTC().Format(time.RFC3339Nano))
		}
	}
	return w.Flush()
}

func cmdHealth(ctx context.Context, e *cmdEnv, _ []string) error {
	h, err := e.c.Health(ctx)
	if err != nil {
		return err
	}
	if e.o.output == "json" {
		return e.json(h)
	}
	w := e.table()
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	// status first.
	if i := slices.Index(keys, "status"); i > 0 {
		keys = append([]string{"status"}, slices.Delete(keys, i, i+1)...)
	}
	for _, k := range keys {
		v := h[k]
		s, ok := v.(string)
		if !ok {
			b, _ := json.Marshal(v)
			s = string(b)
		}
		fmt.Fprintf(w, "%s\t%s\n", k, s)
	}
	return w.Flush()
}

// typoOf returns the command that args (the words ksana did not take)
// most likely mistype: "job ls" gives "jobs ls", "helth" gives "health";
// "" when none is close.
func typoOf(args []string) string {
	if len(args) >= 2 {
		if s := didYouMean(args[0] + " " + args[1]); s != "" {
			return s
		}
	}
	best, bestD := "", 3
	for _, w := range []string{"jobs", "runs", "audit", "alerts", "pause", "resume", "health"} {
		if d := editDistance(args[0], w); d < bestD && d < len(args[0]) {
			best, bestD = w, d
		}
	}
	return best
}
