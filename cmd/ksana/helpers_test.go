package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// testService is the whole service running in this process over a data
// directory, serving on a local port.
type testService struct {
	url  string
	svc  *service
	logs *syncBuffer
	stop func() // graceful shutdown; checks that run returns nil
}

func startService(t *testing.T, dir string, env map[string]string) *testService {
	t.Helper()
	// The tests' every jobs run every few hundred milliseconds.
	vars := map[string]string{"KSANA_DATA": dir, "PORT": "0", "LOG_LEVEL": "warn", "MIN_INTERVAL": "10ms"}
	for k, v := range env {
		vars[k] = v
	}
	cfg, err := loadConfig(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	logs := &syncBuffer{}
	svc, err := newService(cfg, newLogger(cfg, logs))
	if err != nil {
		t.Fatalf("newService: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.run(ctx, ln) }()
	ts := &testService{url: "http://" + ln.Addr().String(), svc: svc, logs: logs}
	var once sync.Once
	ts.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("service run: %v\nlogs:\n%s", err, logs.String())
				}
			case <-time.After(60 * time.Second):
				t.Errorf("service did not stop within 60s")
			}
			// The children forked while the service ran have exec'd:
			// none holds its data directory's lock any more.
			waitForks()
		})
	}
	t.Cleanup(ts.stop)
	waitFor(t, "the service answers /health", func() bool {
		resp, err := http.Get(ts.url + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return ts
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// onDatabases runs fn as two subtests side by side, on a PostgreSQL
// schema of its own named after schema and on an SQLite file of its own;
// the test runs beside the others, and -short skips it.
func onDatabases(t *testing.T, schema string, fn func(t *testing.T, dbURL string)) {
	t.Helper()
	t.Parallel()
	if testing.Short() {
		t.Skip("PostgreSQL and SQLite")
	}
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, postgresSchemaURL(t, schema))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, "sqlite:"+filepath.Join(t.TempDir(), "ksana.db"))
	})
}

// waitFor polls cond every 10ms for up to 20s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitWithin(t, 20*time.Second, what, cond)
}

// waitWithin is waitFor with a deadline of d.
func waitWithin(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// call sends a request and decodes a JSON answer into out (when not nil).
func call(t *testing.T, method, url, body string, out any) int {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, url, resp.StatusCode, b, err)
		}
	}
	if resp.StatusCode >= 300 && out != nil {
		t.Logf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return resp.StatusCode
}

func (ts *testService) create(t *testing.T, body string) cron.Job {
	t.Helper()
	var j cron.Job
	if code := call(t, "POST", ts.url+"/jobs", body, &j); code != 201 {
		t.Fatalf("create %s: status %d", body, code)
	}
	return j
}

func (ts *testService) job(t *testing.T, id string) cron.Job {
	t.Helper()
	var j cron.Job
	if code := call(t, "GET", ts.url+"/jobs/"+id, "", &j); code != 200 {
		t.Fatalf("get %s: status %d", id, code)
	}
	return j
}

func (ts *testService) jobs(t *testing.T) []cron.Job {
	t.Helper()
	var js []cron.Job
	if code := call(t, "GET", ts.url+"/jobs", "", &js); code != 200 {
		t.Fatalf("list: status %d", code)
	}
	return js
}

func (ts *testService) runs(t *testing.T, id string) []cron.Run {
	t.Helper()
	var rs []cron.Run
	if code := call(t, "GET", ts.url+"/jobs/"+id+"/runs", "", &rs); code != 200 {
		t.Fatalf("runs %s: status %d", id, code)
	}
	return rs
}

// waitRuns polls the runs of id until there are at least n.
func (ts *testService) waitRuns(t *testing.T, id string, n int) []cron.Run {
	t.Helper()
	var rs []cron.Run
	waitFor(t, fmt.Sprintf("%d runs of job %s", n, id), func() bool {
		rs = ts.runs(t, id)
		return len(rs) >= n
	})
	return rs
}

// callback is an HTTP server that jobs call; it answers with status after
// delay and counts the calls.
type callback struct {
	*httptest.Server
	mu     sync.Mutex
	calls  []time.Time
	runIDs []string
	status int
	delay  time.Duration
}

func newCallback(t *testing.T, status int, delay time.Duration) *callback {
	c := &callback{status: status, delay: delay}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.calls = append(c.calls, time.Now())
		c.runIDs = append(c.runIDs, r.Header.Get("X-Ksana-Run-Id"))
		st, d := c.status, c.delay
		c.mu.Unlock()
		if d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
			}
		}
		w.WriteHeader(st)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *callback) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

// readJobsFile decodes dir/jobs.json as a user's program would.
func readJobsFile(t *testing.T, dir string) []cron.Job {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "jobs.json"))
	if err != nil {
		t.Fatalf("read jobs.json: %v", err)
	}
	var doc struct {
		Version int        `json:"version"`
		Jobs    []cron.Job `json:"jobs"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("jobs.json does not parse: %v\n%.2000s", err, data)
	}
	if doc.Version != 1 {
		t.Fatalf("jobs.json version %d", doc.Version)
	}
	return doc.Jobs
}

func badFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "jobs.bad*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func httpGet(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// callBody makes a request without a body and decodes any JSON answer.
func callBody(t *testing.T, method, url string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if method != http.MethodGet && method != http.MethodHead {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(resp.Body).Decode(out)
	return resp.StatusCode
}

// The process tests run side by side (t.Parallel); two kinds of them are
// kept apart. The timing tests bound how long a partition, a slot or a
// write may go without a live lease holder (a TTL of 2s, a renewal every
// 667ms), or need one instance to see another's run in flight; the heavy
// tests keep both cores busy for tens of seconds (50,000
// jobs rewritten, 50 crashes under a stream of writes, 3,000 jobs on three
// instances). Beside a heavy test, a timing test's processes miss their
// renewals for want of CPU and the test fails without a bug. Tests of one
// kind run beside each other and beside every other test, never beside a
// test of the other kind. Only a test that holds its own slot (a test with
// no parallel subtests, or such a subtest) may enter: then whoever runs
// makes progress, whatever -parallel is, and no one waits for ever.
const (
	timingTest = iota + 1
	heavyTest
)

var testKinds struct {
	mu      sync.Mutex
	cond    *sync.Cond
	kind    int // the kind of the tests running: timingTest or heavyTest, 0 when none
	running int
}

// runAs waits until no test of the other kind runs, then counts t as one
// of kind until it ends.
func runAs(t *testing.T, kind int) {
	t.Helper()
	k := &testKinds
	k.mu.Lock()
	if k.cond == nil {
		k.cond = sync.NewCond(&k.mu)
	}
	for k.running > 0 && k.kind != kind {
		k.cond.Wait()
	}
	k.kind = kind
	k.running++
	k.mu.Unlock()
	t.Cleanup(func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.running--; k.running == 0 {
			k.kind = 0
			k.cond.Broadcast()
		}
	})
}

// forks keeps the tests' child processes from holding the lock of a data
// directory that a service in this process has let go. A child holds a
// copy of every file of this process from its fork to its exec, the
// directory's lock (a flock, which lives as long as any copy of its file)
// among them: a service stopped in that window leaves the directory
// locked for a moment, and a test that starts a service on it again, while
// another test starts a process, is refused. Children are started under
// the read lock (cmd.Start returns once the child has exec'd); a stopped
// service takes the write lock once, to wait for the children forked
// before it stopped.
var forks sync.RWMutex

// startProcess is cmd.Start under forks.
func startProcess(cmd *exec.Cmd) error {
	forks.RLock()
	defer forks.RUnlock()
	return cmd.Start()
}

// waitForks returns once every child whose start had begun has exec'd.
func waitForks() {
	forks.Lock()
	defer forks.Unlock()
}

// runProcess is cmd.Run under forks.
func runProcess(cmd *exec.Cmd) error {
	if err := startProcess(cmd); err != nil {
		return err
	}
	return cmd.Wait()
}
