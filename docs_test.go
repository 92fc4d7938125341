package ksana_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/ksana-dev/ksana/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the sample outputs of README.md and docs/*.md from the binaries")

// The sample outputs in the docs are the marked blocks: a line
//
//	<!-- sample: NAME -->
//
// right before a fenced block. TestDocSamples runs the commands behind each
// one against the built binaries and compares what they print with the
// block, after both are stripped of what differs from run to run (times,
// durations, ids, pids, ports); with -update it writes the new output into
// the block instead:
//
//	go test -run TestDocSamples -update .
var sampleMark = regexp.MustCompile(`^<!-- sample: ([a-z0-9-]+) -->$`)

// The ports the docs show; the test runs on free ones and prints these.
const (
	docKsanaPort = "7100"
	docEchoPort  = "8000"
)

func TestDocSamples(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binaries and runs them")
	}
	files, _ := filepath.Glob("docs/*.md")
	files = append([]string{"README.md"}, files...)
	got := runSamples(t)
	used := map[string]bool{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitAfter(string(src), "\n")
		var out strings.Builder
		for i := 0; i < len(lines); i++ {
			out.WriteString(lines[i])
			m := sampleMark.FindStringSubmatch(strings.TrimSpace(lines[i]))
			if m == nil {
				continue
			}
			name := m[1]
			used[name] = true
			if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
				t.Errorf("%s:%d: sample %s is not followed by a fenced block", f, i+1, name)
				continue
			}
			i++
			out.WriteString(lines[i]) // the opening fence
			var block strings.Builder
			for i+1 < len(lines) && !strings.HasPrefix(lines[i+1], "```") {
				i++
				block.WriteString(lines[i])
			}
			want, ok := got[name]
			switch {
			case !ok:
				t.Errorf("%s:%d: no command produces sample %s", f, i+1, name)
				out.WriteString(block.String())
			case stable(name, block.String()) == stable(name, want):
				out.WriteString(block.String()) // only what changes from run to run differs
			case *update:
				out.WriteString(want)
			default:
				out.WriteString(block.String())
				t.Errorf("%s: sample %s drifted (go test -run TestDocSamples -update . refreshes it):\n--- the docs:\n%s--- the binaries now:\n%s", f, name, block.String(), want)
			}
		}
		if *update && out.String() != string(src) {
			if err := os.WriteFile(f, []byte(out.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name := range got {
		if !used[name] {
			t.Errorf("sample %s is in no document", name)
		}
	}
}

// unordered are the samples whose lines come in an order that changes
// from run to run (answers to requests sent at once): they are compared as
// sets of lines.
var unordered = map[string]bool{"dispatcher-session": true}

// stable removes from sample name what changes from run to run.
func stable(name, s string) string {
	s = stableText(s)
	if unordered[name] {
		lines := strings.Split(s, "\n")
		slices.Sort(lines)
		s = strings.Join(lines, "\n")
	}
	return s
}

func stableText(s string) string {
	for _, r := range []struct {
		re   *regexp.Regexp
		with string
	}{
		{regexp.MustCompile(`\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?`), "TIME"},
		{regexp.MustCompile(`\b\d\d:\d\d:\d\d\.\d{3}\b`), "TIME"},
		{regexp.MustCompile(`\b([0-9]+(\.[0-9]+)?(h|ms|m|µs|us|ns|s))+\b|\b[0-9]+ days\b`), "DUR"},
		{regexp.MustCompile(`\b[0-9a-f]{16,}\b`), "HEX"},
		{regexp.MustCompile(`\bvm-[0-9a-f]{8}\b`), "vm-X"},
		{regexp.MustCompile(`\b[0-9a-f]{8}-([rt][0-9])`), "ID-$1"},
		{regexp.MustCompile(`\bpid[ =]\d+`), "pid N"},
		{regexp.MustCompile(`\bms=\d+|_ms=\d+`), "ms=N"},
		{regexp.MustCompile(`127\.0\.0\.1:\d+`), "127.0.0.1:PORT"},
		{regexp.MustCompile(`"(lease_[a-z_]+|partitions_gained|partitions_lost)":-?\d+`), `"$1":N`},
		{regexp.MustCompile(`[ \t]+`), " "},
	} {
		s = r.re.ReplaceAllString(s, r.with)
	}
	return s
}

// buildBins builds into a directory of t's the binaries the tours run:
// the three of cmd/ and the examples the tours use.
func buildBins(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", dir+"/", "./cmd/ksana", "./cmd/nodeunit", "./cmd/dispatcher",
		"./examples/echo", "./examples/dispatch-node", "./examples/dispatch-session").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// runSamples runs every documented command and returns each sample's
// output by name. The tours run side by side: each has its own
// directories, ports and database schema.
func runSamples(t *testing.T) map[string]string {
	bin := buildBins(t)
	tours := []struct {
		name string
		run  func(*session)
	}{
		{"ksana", (*session).ksana},
		{"ksana-shared", (*session).ksanaShared},
		{"nodeunit", (*session).nodeunit},
		{"dispatcher", (*session).dispatcher},
	}
	var mu sync.Mutex
	out := map[string]string{}
	t.Run("tours", func(t *testing.T) {
		for _, tour := range tours {
			t.Run(tour.name, func(t *testing.T) {
				t.Parallel()
				s := &session{t: t, bin: bin, out: map[string]string{}}
				tour.run(s)
				mu.Lock()
				defer mu.Unlock()
				maps.Copy(out, s.out)
			})
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	return out
}

type session struct {
	t   *testing.T
	bin string
	out map[string]string
	// ports maps the free ports the test uses to the ones the docs show.
	ports *strings.Replacer
}

// run runs a binary of the session to its end in dir: "$ cmdline", what it
// prints (standard output, then standard error), and "$ echo $?" with its
// status when it is not 0.
func (s *session) run(dir, cmdline string, env []string, name string, args ...string) string {
	s.t.Helper()
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		s.t.Fatalf("%s: %v", cmdline, err)
	}
	out := "$ " + cmdline + "\n" + stdout.String() + stderr.String()
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		out += "$ echo $?\n" + strconv.Itoa(code) + "\n"
	}
	return out
}

// proc is a running binary whose standard error (lines) and standard
// output (outLines) are read line by line.
type proc struct {
	cmd      *exec.Cmd
	mu       sync.Mutex
	lines    []string
	outLines []string
	done     chan struct{}
}

func (s *session) start(dir string, env []string, name string, args ...string) *proc {
	s.t.Helper()
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	var wg sync.WaitGroup
	scan := func(r io.Reader, dst *[]string) {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			*dst = append(*dst, sc.Text())
			p.mu.Unlock()
		}
	}
	wg.Go(func() { scan(stderr, &p.lines) })
	wg.Go(func() { scan(stdout, &p.outLines) })
	go func() {
		defer close(p.done)
		wg.Wait()
		_ = cmd.Wait()
	}()
	s.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// waitLine waits for a line containing want and returns the lines from
// line from on, through it.
func (p *proc) waitLine(t *testing.T, from int, want string) (string, int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p.mu.Lock()
		for i := from; i < len(p.lines); i++ {
			if strings.Contains(p.lines[i], want) {
				out := strings.Join(p.lines[from:i+1], "\n") + "\n"
				p.mu.Unlock()
				return out, i + 1
			}
		}
		n := len(p.lines)
		p.mu.Unlock()
		select {
		case <-p.done:
			t.Fatalf("exited before logging %q; it logged:\n%s", want, strings.Join(p.lines, "\n"))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line with %q in 30s; %d lines:\n%s", want, n, strings.Join(p.lines, "\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// call makes one request to the service and returns the body as curl -s
// prints it.
func (s *session) call(method, url, body string) string {
	s.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if method != http.MethodGet {
		// As the documented curl commands send it: every write is JSON.
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return s.ports.Replace(string(b))
}

// eventually polls cond until it holds, for up to a minute.
func eventually(t *testing.T, what string, cond func() bool, show ...*string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			if len(show) > 0 {
				t.Fatalf("%s: not within a minute; last:\n%s", what, *show[0])
			}
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ksana runs the tour of docs/ksana.md.
func (s *session) ksana() {
	t := s.t
	dir := t.TempDir()
	s.out["ksana-help"] = s.run(dir, "bin/ksana -h", nil, "ksana", "-h")
	s.out["ksana-bad-setting"] = s.run(dir, "WORKERS=many bin/ksana", []string{"WORKERS=many"}, "ksana")

	port, echoPort := freePort(t), freePort(t)
	s.ports = strings.NewReplacer(":"+port, ":"+docKsanaPort, ":"+echoPort, ":"+docEchoPort)
	echo := s.start(dir, nil, "echo", "-addr", "127.0.0.1:"+echoPort)
	listening, _ := echo.waitLine(t, 0, "echo: listening")
	s.out["ksana-echo-start"] = "$ bin/echo\n" + s.ports.Replace(listening)

	svc := s.start(dir, []string{"LISTEN_ADDR=127.0.0.1", "PORT=" + port}, "ksana")
	start, next := svc.waitLine(t, 0, "ksana: access")
	s.out["ksana-start"] = s.ports.Replace(start)
	base := "http://127.0.0.1:" + port

	echoURL := "http://127.0.0.1:" + echoPort + "/"
	s.out["ksana-create"] = s.call("POST", base+"/jobs", `{"id": "ping", "name": "ping", "http": {"method": "GET", "url": "`+echoURL+`"},
       "schedule": {"kind": "every", "every": "10s"}}`)
	s.out["ksana-run-now"] = s.call("POST", base+"/jobs/ping/run-now", "")
	line, _ := svc.waitLine(t, next, "cron: run finished")
	s.out["ksana-run-log"] = line
	eventually(t, "the echo server printing the call", func() bool {
		echo.mu.Lock()
		defer echo.mu.Unlock()
		return len(echo.outLines) >= 5
	})
	echo.mu.Lock()
	s.out["ksana-echo"] = strings.Join(echo.outLines, "\n") + "\n"
	echo.mu.Unlock()
	eventually(t, "the run recorded", func() bool {
		return strings.Contains(s.call("GET", base+"/jobs/ping/runs?limit=1", ""), `"status"`)
	})
	s.out["ksana-runs"] = s.call("GET", base+"/jobs/ping/runs?limit=1", "")
	s.out["ksana-runs-filter"] = s.call("GET", base+"/jobs/ping/runs?status=failed", "")
	s.out["ksana-job"] = s.call("GET", base+"/jobs/ping", "")
	s.out["ksana-reject"] = s.call("PATCH", base+"/jobs/ping", `{"timeout": "soon"}`)
	s.out["ksana-patch-kind"] = s.call("PATCH", base+"/jobs/ping", `{"schedule": {"kind": "cron", "cron": "*/5 * * * *"}}`)
	s.out["ksana-past-once"] = s.call("POST", base+"/jobs", `{"id": "late", "http": {"url": "`+echoURL+`"},
       "schedule": {"kind": "once", "run_at": "2020-01-01T00:00:00Z"}}`)
	s.out["ksana-health"] = s.call("GET", base+"/health", "")

	_ = svc.cmd.Process.Signal(syscall.SIGTERM)
	stop, _ := svc.waitLine(t, next, "ksana: stopped")
	i := strings.Index(stop, "\n")
	for !strings.Contains(stop[:i], "ksana: shutting down") {
		stop = stop[i+1:]
		i = strings.Index(stop, "\n")
	}
	s.out["ksana-stop"] = stop
	<-svc.done
	if code := svc.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("ksana after SIGTERM: exit %d, want 0", code)
	}
}

// nodeunit runs the tour of docs/nodeunit.md.
func (s *session) nodeunit() {
	t := s.t
	dir := t.TempDir()
	env := []string{"NODE_UNIT_DATA=nodeunit-data", "NODE_UNIT_TRUSTED_COMMAND_REGEXP=sleep", "NODE_UNIT_SCHEDULER_INTERVAL_MS=1000", "NODE_UNIT_REBALANCE=true"}
	s.out["nodeunit-no-database"] = s.run(dir, "bin/nodeunit list", env, "nodeunit", "list")
	a := s.start(dir, env, "nodeunit")
	startA, _ := a.waitLine(t, 0, "node-unit started")
	b := s.start(dir, env, "nodeunit")
	startB, _ := b.waitLine(t, 0, "node-unit started")
	s.out["nodeunit-start"] = "$ bin/nodeunit\n" + startA
	s.out["nodeunit-start-2"] = "$ bin/nodeunit\n" + startB
	sub := func(cmdline string, args ...string) string {
		return s.run(dir, cmdline, env, "nodeunit", args...)
	}
	eventually(t, "two node-units in the membership", func() bool {
		return strings.Count(sub("bin/nodeunit nodes", "nodes"), "\n") == 4
	})
	s.out["nodeunit-nodes"] = sub("bin/nodeunit nodes", "nodes")
	var added strings.Builder
	for i := 1; i <= 4; i++ {
		out := sub(fmt.Sprintf("bin/nodeunit add --id d%d sleep 3600", i), "add", "--id", fmt.Sprintf("d%d", i), "sleep", "3600")
		if i == 1 {
			added.WriteString(out)
		} else {
			added.WriteString(strings.SplitN(out, "\n", 2)[1])
		}
	}
	s.out["nodeunit-add"] = "$ for i in 1 2 3 4; do bin/nodeunit add --id d$i sleep 3600; done\n" +
		strings.SplitN(added.String(), "\n", 2)[1]
	eventually(t, "every deployment running", func() bool {
		return strings.Count(sub("bin/nodeunit status", "status"), " running ") == 4
	})
	s.out["nodeunit-list"] = sub("bin/nodeunit list", "list")
	s.out["nodeunit-status"] = sub("bin/nodeunit status", "status")
	s.out["nodeunit-refused"] = sub("bin/nodeunit add --id full /bin/sleep 3600", "add", "--id", "full", "/bin/sleep", "3600")
	var last string
	eventually(t, "the refusal reported", func() bool {
		last = sub("bin/nodeunit status", "status")
		return strings.Contains(last, " refused ")
	}, &last)
	// Only the rows of the refused deployment: the others are above.
	var rows []string
	for _, l := range strings.SplitAfter(last, "\n") {
		if strings.HasPrefix(l, "$ ") || strings.HasPrefix(l, "ID ") || strings.HasPrefix(l, "full ") {
			rows = append(rows, l)
		}
	}
	s.out["nodeunit-status-refused"] = strings.Join(rows, "")

	// kill -9 of the first: the second takes its deployments over once
	// its membership is lost (3 intervals).
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.done
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		list := sub("bin/nodeunit list", "list")
		if strings.Count(list, addressOf(startB)) == 4 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.out["nodeunit-list-after-kill"] = sub("bin/nodeunit list", "list")
	s.out["nodeunit-nodes-after-kill"] = sub("bin/nodeunit nodes", "nodes")

	// The first starts again with nothing: the second holds 4, but does
	// not rebalance while "full" waits, and says so.
	again := s.start(dir, env, "nodeunit")
	again.waitLine(t, 0, "node-unit started")
	var held string
	eventually(t, "the hold reported", func() bool {
		held = sub("bin/nodeunit status", "status")
		return strings.Contains(held, "holds rebalancing")
	}, &held)
	s.out["nodeunit-held"] = "$ bin/nodeunit status | tail -1\n" + held[strings.LastIndex(held, "node-unit "):]
	s.out["nodeunit-remove"] = sub("bin/nodeunit remove full", "remove", "full")
	var list string
	eventually(t, "the deployments shared again", func() bool {
		list = sub("bin/nodeunit list", "list")
		return strings.Count(list, addressOf(startB)) == 2 && strings.Count(list, " - ") == 0
	}, &list)
	s.out["nodeunit-list-rebalanced"] = list
}

// addressOf is the address in a node-unit's start-up line.
func addressOf(line string) string {
	m := regexp.MustCompile(`address=(\S+)`).FindStringSubmatch(line)
	if m == nil {
		return "?"
	}
	return m[1]
}

// dispatcher runs the first tour of docs/dispatcher.md: one instance in
// memory, a node and a session.
func (s *session) dispatcher() {
	t := s.t
	dir := t.TempDir()
	port := freePort(t)
	s.ports = strings.NewReplacer(":"+port, ":7200")
	d := s.start(dir, nil, "dispatcher", "-listen", "127.0.0.1:"+port)
	d.waitLine(t, 0, "dispatcher: started")
	node := s.start(dir, nil, "dispatch-node", "-id", "node-1", "-quiet", "-url", "ws://127.0.0.1:"+port+"/ws/node")
	eventually(t, "the node registered", func() bool {
		node.mu.Lock()
		defer node.mu.Unlock()
		return len(node.outLines)+len(node.lines) > 0
	})
	node.mu.Lock()
	registered := strings.Join(append(append([]string{}, node.outLines...), node.lines...), "\n") + "\n"
	node.mu.Unlock()
	session := s.run(dir, "bin/dispatch-session", nil, "dispatch-session", "-url", "ws://127.0.0.1:"+port+"/ws/session")
	_, rest, _ := strings.Cut(session, "\n") // the command line, shown once in the doc
	s.out["dispatcher-session"] = s.ports.Replace(registered + rest)
}

// ksanaShared runs the tour of three ksana instances on one PostgreSQL
// database (a schema of its own on the test server): what /health says
// once they share the partitions, and after kill -9 of one. Rendezvous
// hashing over fixed instance names makes the counts the same every run.
func (s *session) ksanaShared() {
	t := s.t
	dir := t.TempDir()
	_, dbURL := testenv.PostgresSchema(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}

	ports := []string{freePort(t), freePort(t), freePort(t)}
	echoPort := freePort(t)
	s.ports = strings.NewReplacer(":"+ports[0], ":7101", ":"+ports[1], ":7102", ":"+ports[2], ":7103", ":"+echoPort, ":"+docEchoPort)
	echo := s.start(dir, nil, "echo", "-addr", "127.0.0.1:"+echoPort)
	echo.waitLine(t, 0, "echo: listening")
	var members []*proc
	for i, port := range ports {
		p := s.start(dir, []string{"DATABASE_URL=" + u.String(), "PORT=" + port, "LISTEN_ADDR=127.0.0.1",
			fmt.Sprintf("KSANA_INSTANCE=ksana-%d", i+1)}, "ksana")
		p.waitLine(t, 0, "ksana: listening")
		members = append(members, p)
	}
	for i := 1; i <= 12; i++ {
		body := fmt.Sprintf(`{"id": "ping-%d", "name": "ping", "http": {"method": "GET", "url": "http://127.0.0.1:%s/"},
         "schedule": {"kind": "every", "every": "2s"}}`, i, echoPort)
		if out := s.call("POST", "http://127.0.0.1:"+ports[0]+"/jobs", body); !strings.Contains(out, `"id":"ping-`) {
			t.Fatalf("create ping-%d: %s", i, out)
		}
	}
	// health waits until the live instances hold every partition and
	// every job between them, the same answer twice in a row.
	health := func(live []string) string {
		var last string
		eventually(t, "the instances sharing the partitions", func() bool {
			var out strings.Builder
			parts, jobs := 0, 0
			for _, port := range live {
				h := s.call("GET", "http://127.0.0.1:"+port+"/health", "")
				var v struct{ Members, PartitionsHeld, JobsHeld int }
				_ = json.Unmarshal([]byte(strings.NewReplacer("partitions_held", "PartitionsHeld", "jobs_held", "JobsHeld").Replace(h)), &v)
				if v.Members != len(live) {
					return false
				}
				parts += v.PartitionsHeld
				jobs += v.JobsHeld
				out.WriteString(h)
			}
			now := out.String()
			settled := parts == 1024 && jobs == 12 && stableText(now) == stableText(last)
			last = now
			if !settled {
				time.Sleep(500 * time.Millisecond)
			}
			return settled
		}, &last)
		return last
	}
	s.out["ksana-health-db"] = "$ for p in 7101 7102 7103; do curl -s localhost:$p/health; done\n" + health(ports)
	_ = members[1].cmd.Process.Signal(syscall.SIGKILL)
	<-members[1].done
	s.out["ksana-health-db-after-kill"] = "$ for p in 7101 7103; do curl -s localhost:$p/health; done\n" + health([]string{ports[0], ports[2]})
}
