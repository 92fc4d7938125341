//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/internal/testenv"
	"github.com/ksana-dev/ksana/store/sqlstore"
)

var schemaSeq atomic.Int64

// postgresSchemaURL creates a schema of its own for t, dropped at
// cleanup, and returns a URL whose search_path selects it and whose
// connections carry application_name app.
func postgresSchemaURL(t testing.TB, app string) string {
	t.Helper()
	base := testenv.PostgresURL(t)
	schema := fmt.Sprintf("ksana_cmd_test_%d_%d", time.Now().UnixNano(), schemaSeq.Add(1))
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		admin, err := sql.Open("pgx", base)
		if err != nil {
			return
		}
		defer admin.Close()
		if _, err := admin.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	return u.String()
}

// buildKsana builds the binary once per test.
func buildKsana(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "ksana-test-bin-"); built.err != nil {
			return
		}
		bin := filepath.Join(built.dir, "ksana")
		var out bytes.Buffer
		cmd := exec.Command("go", "build", "-o", bin, ".")
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := runProcess(cmd); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out.String())
			return
		}
		built.bin = bin
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// built is the binary the process tests run: built once per test
// process, in a directory that TestMain removes.
var built struct {
	once     sync.Once
	bin, dir string
	err      error
}

func TestMain(m *testing.M) {
	flag.Parse()
	parallelByDefault(4)
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// parallelByDefault sets -parallel to n unless it was given. The process
// tests spend most of their time waiting (for a slot, a lease, a callback
// that answers in 6s, a process to start), not running on the CPU, and
// may run side by side. By default four run at once (with two, the
// package's tests waited for each other about half of their time; test.sh
// runs the lease-timing tests apart, after the rest).
func parallelByDefault(n int) {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(n))
	}
}

// member is one ksana process on the shared database.
type member struct {
	name string
	cmd  *exec.Cmd
	url  string
	logs *syncBuffer
	dead bool
}

func startMember(t *testing.T, bin, name string, env ...string) *member {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "PORT=0", "LISTEN_ADDR=127.0.0.1", "LOG_FORMAT=json", "LOG_LEVEL=info", "WORKERS=8",
		"MIN_INTERVAL=10ms", "MAX_RETRIES=0", "KSANA_INSTANCE="+name)
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := startProcess(cmd); err != nil {
		t.Fatal(err)
	}
	m := &member{name: name, cmd: cmd, logs: &syncBuffer{}}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			m.logs.Write([]byte(line + "\n"))
			var rec struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "ksana: listening" {
				addr <- rec.Addr
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case a := <-addr:
		m.url = "http://" + a
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("%s did not start listening; logs:\n%s", name, m.logs.String())
	}
	t.Cleanup(func() {
		if !m.dead {
			m.cmd.Process.Signal(syscall.SIGCONT)
			m.cmd.Process.Signal(syscall.SIGTERM)
			m.cmd.Wait()
		}
		if t.Failed() {
			// The lines that say more than that a run finished well.
			var keep []string
			for _, l := range strings.Split(m.logs.String(), "\n") {
				if !strings.Contains(l, `"msg":"cron: run finished"`) || !strings.Contains(l, `"status":"success"`) {
					keep = append(keep, l)
				}
			}
			t.Logf("logs of %s:\n%s", name, tail(strings.Join(keep, "\n"), 60))
		}
	})
	return m
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// health returns the /health fields of m.
func (m *member) health(t *testing.T) map[string]any {
	t.Helper()
	var h map[string]any
	call(t, "GET", m.url+"/health", "", &h)
	return h
}

// slotCounter is the callback server: it counts the calls of each slot,
// by the job id and scheduled time the executor sends.
type slotCounter struct {
	*httptest.Server
	mu    sync.Mutex
	slots map[string]int         // job id + " " + scheduled at -> calls
	times map[string][]time.Time // job id -> scheduled times called
	runs  map[string]int         // run id -> calls
	// after, when set, is called (in a goroutine of its own) with the job
	// id once the answer to a call has been sent.
	after atomic.Pointer[func(job string)]
}

func newSlotCounter(t *testing.T) *slotCounter {
	c := &slotCounter{slots: map[string]int{}, times: map[string][]time.Time{}, runs: map[string]int{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		job, at, run := r.Header.Get("X-Ksana-Job-Id"), r.Header.Get("X-Ksana-Scheduled-At"), r.Header.Get("X-Ksana-Run-Id")
		ts, _ := time.Parse(time.RFC3339Nano, at)
		c.mu.Lock()
		c.slots[job+" "+at]++
		c.times[job] = append(c.times[job], ts)
		c.runs[run]++
		c.mu.Unlock()
		if f := c.after.Load(); f != nil {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			go (*f)(job)
		}
	}))
	t.Cleanup(c.Close)
	return c
}

// check reports slots called more than once, and for each job the
// longest gap between consecutive called slots from `from` on.
func (c *slotCounter) check(from time.Time) (dups []string, gaps map[string]time.Duration, calls int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, n := range c.slots {
		if n > 1 {
			dups = append(dups, fmt.Sprintf("%s x%d", k, n))
		}
	}
	for k, n := range c.runs {
		if n > 1 {
			dups = append(dups, fmt.Sprintf("run %s x%d", k, n))
		}
	}
	gaps = map[string]time.Duration{}
	for job, ts := range c.times {
		s := append([]time.Time(nil), ts...)
		sort.Slice(s, func(i, j int) bool { return s[i].Before(s[j]) })
		prev := from
		for _, x := range s {
			if x.Before(from) {
				continue
			}
			calls++
			if d := x.Sub(prev); d > gaps[job] {
				gaps[job] = d
			}
			prev = x
		}
	}
	return dups, gaps, calls
}

// visible waits until every live member answers job id with the given name
// (or 404 when name is ""), and returns how long that took.
func visible(t *testing.T, ms []*member, id, name string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for _, m := range ms {
		if m.dead {
			continue
		}
		for {
			// GET /jobs/{id} and the list read the database; the
			// instance that fires the job holds it through its watcher.
			var j cron.Job
			code := call(t, "GET", m.url+"/jobs/"+id, "", &j)
			var list []cron.Job
			call(t, "GET", m.url+"/jobs", "", &list)
			listed := ""
			for _, l := range list {
				if l.ID == id {
					listed = l.Name
				}
			}
			if (name == "" && code == 404 && listed == "") || (name != "" && code == 200 && j.Name == name && listed == name) {
				break
			}
			if time.Since(start) > limit {
				t.Fatalf("job %s with name %q not visible on %s after %v (status %d, name %q)", id, name, m.name, limit, code, j.Name)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return time.Since(start)
}

// TestClusterKillStopJoin runs three built ksana processes on one
// PostgreSQL schema with jobs firing every second against a local callback
// server, then kills one with SIGKILL, pauses another with SIGSTOP past its
// lease and wakes it, and starts a fourth. Throughout: no slot is called
// twice, no job goes without a run for longer than the lease TTL plus its
// renewal period plus one interval, and every acknowledged API write is
// visible from every live instance.
func TestClusterKillStopJoin(t *testing.T) {
	onDatabases(t, "ksana_cluster_test", func(t *testing.T, dbURL string) {
		testClusterKillStopJoin(t, buildKsana(t), dbURL)
	})
}

func testClusterKillStopJoin(t *testing.T, bin, dbURL string) {
	runAs(t, timingTest)
	const ttl = 2 * time.Second
	cb := newSlotCounter(t)
	env := []string{"DATABASE_URL=" + dbURL, "KSANA_LEASE_TTL=" + ttl.String()}
	ms := []*member{startMember(t, bin, "a", env...), startMember(t, bin, "b", env...), startMember(t, bin, "c", env...)}
	live := func() []*member { return alive(ms) }

	const jobs = 24
	var maxVisible time.Duration
	for i := range jobs {
		m := ms[i%len(ms)]
		body := fmt.Sprintf(`{"id":"job-%02d","name":"v0","schedule":{"kind":"every","every":"1s"},"http":{"method":"POST","url":%q},"timeout":"2s"}`, i, cb.URL)
		if code := call(t, "POST", m.url+"/jobs", body, nil); code != 201 {
			t.Fatalf("create job-%02d on %s: %d", i, m.name, code)
		}
		maxVisible = max(maxVisible, visible(t, ms, fmt.Sprintf("job-%02d", i), "v0", 5*time.Second))
	}
	t.Logf("created %d jobs; slowest to be visible everywhere: %v", jobs, maxVisible)
	// Let the leases settle: each of three holds a share.
	waitFor(t, "three members holding partitions", func() bool {
		for _, m := range ms {
			if h := m.health(t); h["partitions_held"] == float64(0) || h["members"] != float64(3) {
				return false
			}
		}
		return true
	})
	start := time.Now()
	time.Sleep(4 * time.Second)

	// kill -9 of a.
	if err := ms[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ms[0].cmd.Wait()
	ms[0].dead = true
	t.Log("killed a")
	time.Sleep(ttl + 4*time.Second)

	// SIGSTOP of b past its lease, then SIGCONT.
	if err := ms[1].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Log("stopped b")
	time.Sleep(2*ttl + time.Second)
	if err := ms[1].cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Log("continued b")
	time.Sleep(3 * time.Second)
	// b's /health and /metrics show the stop: a gap between renewals
	// past the TTL, and partitions run out (and taken again).
	hb := ms[1].health(t)
	if gap, lost := hb["lease_gap_max_ms"], hb["partitions_lost"]; gap.(float64) < float64((2*ttl).Milliseconds()) || lost.(float64) == 0 {
		t.Errorf("b after a stop of %v: lease_gap_max_ms %v, partitions_lost %v; want the stop shown", 2*ttl+time.Second, gap, lost)
	}
	// On PostgreSQL c was never held up. On SQLite it may have been: b,
	// stopped while it held the file's write lock, holds up every writer
	// of the file until it continues.
	if hc := ms[2].health(t); !strings.HasPrefix(dbURL, "sqlite:") && (hc["lease_failures"] != float64(0) || hc["lease_gap_max_ms"].(float64) >= float64(ttl.Milliseconds())) {
		t.Errorf("c, never held up: lease_failures %v, lease_gap_max_ms %v; want none, and gaps under the TTL", hc["lease_failures"], hc["lease_gap_max_ms"])
	}
	if m, err := httpGet(ms[1].url + "/metrics"); err != nil || !strings.Contains(m, "ksana_lease_gap_max_seconds ") || !strings.Contains(m, `ksana_partitions_moved_total{direction="lost"}`) {
		t.Errorf("b's /metrics lacks the lease stats (%v)", err)
	}

	// d joins and takes its share.
	ms = append(ms, startMember(t, bin, "d", env...))
	waitFor(t, "d holding partitions", func() bool { return ms[3].health(t)["partitions_held"] != float64(0) })
	t.Logf("d holds %v partitions", ms[3].health(t)["partitions_held"])
	// Writes through every live member are visible everywhere.
	for i, m := range live() {
		id := fmt.Sprintf("job-%02d", i)
		name := "v-" + m.name
		if code := call(t, "PATCH", m.url+"/jobs/"+id, fmt.Sprintf(`{"name":%q}`, name), nil); code != 200 {
			t.Fatalf("PATCH %s on %s: %d", id, m.name, code)
		}
		maxVisible = max(maxVisible, visible(t, live(), id, name, 5*time.Second))
	}
	time.Sleep(3 * time.Second)

	// Every slot claimed before now is final within the bound, the ones b
	// claimed ahead before its stop among them: b records them (missed,
	// "holder stopped") when it wakes, or the next holders do (missed,
	// "holder died").
	end := time.Now()
	db, err := sqlstore.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	deadline := end.Add(ttl + 2*ttl/3 + 5*time.Second)
	if open := openRuns(t, db, end, deadline); open > 0 {
		t.Errorf("%d run rows claimed before %v still without a status at %v", open, end.Format(time.TimeOnly), deadline.Format(time.TimeOnly))
	}

	// Every slot is there: each job's history, read from any instance,
	// counts each row as max(slots, 1) and adds up to the slots of its
	// schedule from its first row to its last.
	for i := range jobs {
		id := fmt.Sprintf("job-%02d", i)
		var runs []cron.Run
		if code := call(t, "GET", live()[i%len(live())].url+"/jobs/"+id+"/runs?limit=1000", "", &runs); code != 200 {
			t.Fatalf("GET /jobs/%s/runs: %d", id, code)
		}
		recorded, first, last := 0, time.Time{}, time.Time{}
		for _, run := range runs {
			if !run.ScheduledAt.Before(end) {
				continue
			}
			n := max(run.Slots, 1)
			recorded += n
			if first.IsZero() || run.ScheduledAt.Before(first) {
				first = run.ScheduledAt
			}
			if l := run.ScheduledAt.Add(time.Duration(n-1) * time.Second); l.After(last) {
				last = l
			}
		}
		if want := int(last.Sub(first)/time.Second) + 1; recorded != want {
			t.Errorf("job %s: its rows stand for %d slots from %v to %v, want %d; rows:\n%s", id, recorded, first.Format(time.TimeOnly), last.Format(time.TimeOnly), want, describeRuns(runs, end))
		}
	}

	dups, gaps, calls := cb.check(start)
	if len(dups) > 0 {
		t.Errorf("slots called more than once: %v", dups)
	}
	bound := ttl + ttl/3 + time.Second + 1500*time.Millisecond // TTL, one renewal, one interval, scheduling slack
	var worst time.Duration
	for job, g := range gaps {
		worst = max(worst, g)
		if g > bound {
			t.Errorf("job %s went %v without a run, want at most %v", job, g, bound)
		}
	}
	if len(gaps) != jobs {
		t.Errorf("%d of %d jobs ran after the start", len(gaps), jobs)
	}
	t.Logf("%d calls over %v, no slot twice: %v; longest gap %v (bound %v); slowest write visible everywhere in %v",
		calls, time.Since(start).Round(time.Second), len(dups) == 0, worst, bound, maxVisible)
	if maxVisible > time.Second {
		t.Errorf("a write took %v to be visible on every instance, want at most 1s", maxVisible)
	}
}

// TestClusterConflictAndOutage: two instances updating one job at once
// leave every instance with one and the same result, and the instances
// survive the database's connections being cut (pg_terminate_backend):
// the jobs keep firing and writes keep propagating, with no restart.
func TestClusterConflictAndOutage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("processes on PostgreSQL")
	}
	runAs(t, timingTest)
	app := "ksana_outage_test_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	dbURL := postgresSchemaURL(t, app)
	bin := buildKsana(t)
	cb := newSlotCounter(t)
	env := []string{"DATABASE_URL=" + dbURL, "KSANA_LEASE_TTL=2s"}
	ms := []*member{startMember(t, bin, "a", env...), startMember(t, bin, "b", env...)}
	body := fmt.Sprintf(`{"id":"j","name":"v0","schedule":{"kind":"every","every":"1s"},"http":{"method":"POST","url":%q},"timeout":"2s"}`, cb.URL)
	if code := call(t, "POST", ms[0].url+"/jobs", body, nil); code != 201 {
		t.Fatalf("create: %d", code)
	}
	visible(t, ms, "j", "v0", 5*time.Second)

	for round := range 20 {
		var wg sync.WaitGroup
		for i, m := range ms {
			wg.Go(func() {
				call(t, "PATCH", m.url+"/jobs/j", fmt.Sprintf(`{"name":"r%d-%s","http":{"method":"POST","url":"%s/%d"}}`, round, m.name, cb.URL, i), nil)
			})
		}
		wg.Wait()
	}
	// Every instance converges on the stored row.
	waitFor(t, "one result on both instances", func() bool {
		var a, b cron.Job
		call(t, "GET", ms[0].url+"/jobs/j", "", &a)
		call(t, "GET", ms[1].url+"/jobs/j", "", &b)
		var la, lb []cron.Job
		call(t, "GET", ms[0].url+"/jobs", "", &la)
		call(t, "GET", ms[1].url+"/jobs", "", &lb)
		return a.Name == b.Name && a.HTTP.URL == b.HTTP.URL && len(la) == 1 && len(lb) == 1 &&
			la[0].Name == a.Name && lb[0].Name == a.Name && la[0].HTTP.URL == a.HTTP.URL && lb[0].HTTP.URL == a.HTTP.URL
	})

	// Cut every connection of the instances.
	admin, err := sql.Open("pgx", testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var cut int
	if err := admin.QueryRow("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&cut); err != nil {
		t.Fatal(err)
	}
	if cut == 0 {
		t.Fatal("no connection of the instances was found to cut")
	}
	t.Logf("terminated %d backends", cut)
	cutAt := time.Now()
	// Writes work again and reach the other instance (its listener
	// connected again).
	waitFor(t, "a write after the outage", func() bool {
		return call(t, "PATCH", ms[1].url+"/jobs/j", `{"name":"after"}`, nil) == 200
	})
	visible(t, ms, "j", "after", 10*time.Second)
	time.Sleep(3 * time.Second)
	dups, gaps, _ := cb.check(cutAt.Add(-time.Second))
	if len(dups) > 0 {
		t.Errorf("slots called more than once: %v", dups)
	}
	if g := gaps["j"]; g == 0 || g > 4*time.Second {
		t.Errorf("after the outage the job's longest gap is %v, want runs again within 4s", g)
	}
}

// alive returns the members of ms not killed by the test.
func alive(ms []*member) []*member {
	var out []*member
	for _, m := range ms {
		if !m.dead {
			out = append(out, m)
		}
	}
	return out
}

// describeRuns lists the rows of one job scheduled before end, oldest
// first, one per line, for a failure's message.
func describeRuns(runs []cron.Run, end time.Time) string {
	rows := slices.Clone(runs)
	slices.SortFunc(rows, func(a, b cron.Run) int { return a.ScheduledAt.Compare(b.ScheduledAt) })
	var b strings.Builder
	for _, r := range rows {
		if !r.ScheduledAt.Before(end) {
			continue
		}
		fmt.Fprintf(&b, "  %s slots=%d %s instance=%s reason=%q trigger=%q triggered=%s finished=%s\n",
			r.ScheduledAt.Format("15:04:05.000"), r.Slots, r.Status, r.Instance, r.Reason, r.Trigger,
			r.TriggeredAt.Format("15:04:05.000"), r.FinishedAt.Format("15:04:05.000"))
	}
	return b.String()
}
