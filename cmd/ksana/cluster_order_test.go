//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/store/sqlstore"
)

// TestClusterNoSlotLost runs built ksana processes on one database (on
// PostgreSQL and on SQLite) with jobs firing every second, and makes each
// way of losing a slot or a status happen: a fourth instance joins (its
// share moves from three live ones), one is stopped past its lease and
// woken (its share moves away, then back), one is killed with SIGKILL,
// and jobs are paused right after a call, through the instance that fires
// them or through another. For every job: no slot is called twice; a
// slot is missed only while no live instance held the job's partition
// (from a kill or stop until the TTL, one renewal and some slack later);
// every claimed run row reaches a final status within a bounded time, the
// rows of the killed instance as missed, "holder died", listed by
// /jobs/{id}/runs with the instance that claimed them; and enabled and
// last_status are those of the last acknowledged write.
//
// It runs alone (not parallel: go test runs it before the package's
// parallel tests start, and test.sh runs it last, after the other
// packages), so that the slots and statuses it checks depend on the
// leases, not on how busy the other packages keep the 2 cores.
func TestClusterNoSlotLost(t *testing.T) {
	if testing.Short() {
		t.Skip("processes on PostgreSQL and SQLite")
	}
	bin := buildKsana(t)
	// The two databases side by side (seven processes, 48 jobs a second
	// each).
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		testClusterNoSlotLost(t, bin, postgresSchemaURL(t, "ksana_order_test"))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		testClusterNoSlotLost(t, bin, "sqlite:"+filepath.Join(t.TempDir(), "ksana.db"))
	})
}

// outage is a time during which no live instance held a job's partition.
type outage struct{ from, to time.Time }

func testClusterNoSlotLost(t *testing.T, bin, dbURL string) {
	runAs(t, timingTest)
	const (
		ttl    = 2 * time.Second
		jobs   = 48
		pauses = 9
		// How long a partition of an instance that stops renewing goes
		// without a live holder: the TTL, one renewal period, and slack
		// for loading its jobs on a loaded machine.
		takeover = ttl + ttl/3 + 2*time.Second
	)
	cb := newSlotCounter(t)
	env := []string{"DATABASE_URL=" + dbURL, "KSANA_LEASE_TTL=" + ttl.String()}
	ms := []*member{startMember(t, bin, "a", env...), startMember(t, bin, "b", env...), startMember(t, bin, "c", env...)}
	live := func() []*member { return alive(ms) }
	db, err := sqlstore.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	var ids []string
	for i := range jobs {
		ids = append(ids, fmt.Sprintf("job-%02d", i))
	}
	for i := range pauses {
		ids = append(ids, fmt.Sprintf("pause-%d", i))
	}
	for i, id := range ids {
		body := fmt.Sprintf(`{"id":%q,"name":"v0","schedule":{"kind":"every","every":"1s"},"http":{"method":"POST","url":%q},"timeout":"2s"}`, id, cb.URL)
		if code := call(t, "POST", ms[i%len(ms)].url+"/jobs", body, nil); code != 201 {
			t.Fatalf("create %s: %d", id, code)
		}
	}
	waitFor(t, "three members holding partitions", func() bool {
		for _, m := range ms {
			if h := m.health(t); h["partitions_held"] == float64(0) || h["members"] != float64(3) {
				return false
			}
		}
		return true
	})
	time.Sleep(2 * time.Second)
	start := time.Now()

	outages := map[string][]outage{}
	// down notes that from now on the partitions that name holds have no
	// live holder until the others take them over.
	down := func(name string) {
		rows, err := db.SQL().Query("SELECT part, owner FROM ksana_lease")
		if err != nil {
			t.Fatal(err)
		}
		owners := map[int]string{}
		for rows.Next() {
			var p int
			var o string
			if err := rows.Scan(&p, &o); err != nil {
				t.Fatal(err)
			}
			owners[p] = o
		}
		rows.Close()
		now := time.Now()
		for _, id := range ids {
			if owners[sqlstore.Partition(id, sqlstore.DefaultPartitions)] == name {
				outages[id] = append(outages[id], outage{now, now.Add(takeover)})
			}
		}
	}

	// 1. d joins: its share moves from three live instances, while once
	// jobs come due one after another.
	time.Sleep(2 * time.Second)
	const onces = 25
	onceAt := time.Now().Add(500 * time.Millisecond)
	for i := range onces {
		body := fmt.Sprintf(`{"id":"once-%02d","schedule":{"kind":"once","run_at":%q},"http":{"method":"POST","url":%q}}`,
			i, onceAt.Add(time.Duration(i)*100*time.Millisecond).UTC().Format(time.RFC3339Nano), cb.URL)
		if code := call(t, "POST", ms[i%3].url+"/jobs", body, nil); code != 201 {
			t.Fatalf("create once-%02d: %d", i, code)
		}
	}
	ms = append(ms, startMember(t, bin, "d", env...))
	waitFor(t, "d holding partitions", func() bool { return ms[3].health(t)["partitions_held"] != float64(0) })
	t.Log("d joined")
	time.Sleep(3 * time.Second)

	// 2. b stopped past its lease, then woken: it rejoins, and its share
	// moves back to it from live instances.
	down("b")
	if err := ms[1].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2*ttl + time.Second)
	if err := ms[1].cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Log("b stopped and woken")
	time.Sleep(3 * time.Second)

	// 3. kill -9 of a.
	// When it has claimed slots that it has not finished: a is stopped
	// while the rows are counted, so that none finishes between the
	// count and the kill.
	waitFor(t, "a run claimed by a and not finished", func() bool {
		if err := ms[0].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		var n int
		err := db.SQL().QueryRow("SELECT count(*) FROM ksana_run WHERE instance = 'a' AND status = ''").Scan(&n)
		if err == nil && n > 0 {
			return true
		}
		if err := ms[0].cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		return false
	})
	down("a")
	if err := ms[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ms[0].cmd.Wait()
	ms[0].dead = true
	t.Log("killed a")
	time.Sleep(takeover + time.Second)

	// 4. Each pause job paused right after one of its calls was answered,
	// through the live instances in turn (so through the one that fires
	// it, or another).
	pausedAt := map[string]time.Time{}
	for i := range pauses {
		id := fmt.Sprintf("pause-%d", i)
		called := make(chan struct{}, 1)
		f := func(job string) {
			if job == id {
				select {
				case called <- struct{}{}:
				default:
				}
			}
		}
		cb.after.Store(&f)
		select {
		case <-called:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s not called within 10s", id)
		}
		// The run has ended in the runner that fires the job (which
		// answers GET from memory) and its bookkeeping waits for the
		// recorder: pause now.
		cb.mu.Lock()
		slot := cb.times[id][len(cb.times[id])-1]
		cb.mu.Unlock()
		waitFor(t, id+"'s run ended in its runner", func() bool {
			for _, m := range live() {
				var j cron.Job
				if call(t, "GET", m.url+"/jobs/"+id, "", &j) == 200 && !j.LastRunAt.Before(slot) && j.LastStatus == cron.StatusSuccess {
					return true
				}
			}
			return false
		})
		m := live()[i%len(live())]
		if code := call(t, "POST", m.url+"/jobs/"+id+"/pause", "", nil); code != 200 {
			t.Fatalf("pause %s through %s: %d", id, m.name, code)
		}
		pausedAt[id] = time.Now()
	}
	cb.after.Store(nil)
	t.Log("paused")
	time.Sleep(2 * time.Second)
	end := time.Now()

	// No slot twice.
	dups, _, calls := cb.check(start)
	if len(dups) > 0 {
		t.Errorf("slots called more than once: %v", dups)
	}

	// No slot lost while a live instance held the job's partition. A
	// holder held up (on a loaded machine as by SIGSTOP) records the slots
	// it claimed as missed; a slot that came while the job's last call was
	// still in flight (a call slowed past a second by a loaded machine) is
	// recorded as skipped for the overlap, as the job's policy says.
	heldUp := map[string]bool{}
	rows, err := db.SQL().Query("SELECT job_id, scheduled_at FROM ksana_run WHERE status = 'missed' AND error LIKE 'holder %' OR status = 'skipped' AND reason = 'overlap'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var job string
		var at int64
		if err := rows.Scan(&job, &at); err != nil {
			t.Fatal(err)
		}
		heldUp[job+" "+strconv.FormatInt(at, 10)] = true
	}
	rows.Close()
	cb.mu.Lock()
	lost := 0
	for _, id := range ids {
		until := end.Add(-2 * time.Second)
		if p, ok := pausedAt[id]; ok {
			until = p.Add(-time.Second)
		}
		var called []time.Time
		seen := map[int64]bool{}
		for _, at := range cb.times[id] {
			if !at.Before(start) {
				called = append(called, at)
				seen[at.UnixNano()] = true
			}
		}
		sort.Slice(called, func(i, j int) bool { return called[i].Before(called[j]) })
		if len(called) == 0 {
			t.Errorf("%s: no call after the start", id)
			continue
		}
		for s := called[0]; !s.After(until); s = s.Add(time.Second) {
			if seen[s.UnixNano()] {
				continue
			}
			excused := false
			for _, o := range outages[id] {
				excused = excused || (!s.Before(o.from) && !s.After(o.to))
			}
			// A holder held up is not live, and an overlap is not a loss
			// (see heldUp).
			excused = excused || heldUp[id+" "+strconv.FormatInt(s.UnixNano(), 10)]
			if !excused {
				lost++
				t.Errorf("%s: slot %s not called, while a live instance held its partition", id, s.Format("15:04:05.000"))
			}
		}
	}
	cb.mu.Unlock()

	// Every run row claimed before the end finishes within the bound: the
	// TTL and two renewal periods (the killed instance's heartbeat runs
	// out, then the next round of the partition's holder), with slack for
	// a loaded machine (the suite runs packages side by side under -race).
	bound := ttl + 2*ttl/3 + 5*time.Second
	open := openRuns(t, db, end, end.Add(bound))
	if open > 0 {
		t.Errorf("%d run rows claimed before the end still without a status %v after it", open, bound)
	}
	// The killed instance's claims are finished as missed by the next
	// holders, and listed with the instance that claimed them.
	var orphan string
	if err := db.SQL().QueryRow("SELECT job_id FROM ksana_run WHERE status = 'missed' AND instance = 'a' AND error LIKE 'holder died%' ORDER BY seq LIMIT 1").Scan(&orphan); err != nil {
		t.Errorf("no run of the killed instance finished as missed, holder died: %v", err)
	} else {
		var runs []cron.Run
		call(t, "GET", live()[0].url+"/jobs/"+orphan+"/runs?limit=50", "", &runs)
		found := false
		for _, r := range runs {
			found = found || (r.Status == cron.StatusMissed && r.Instance == "a" && strings.HasPrefix(r.Error, "holder died"))
		}
		if !found {
			t.Errorf("/jobs/%s/runs does not list the run of a finished as missed, holder died: %+v", orphan, runs)
		}
	}

	// Each once job that came due around the join was called once, and
	// its bookkeeping says so through every live instance.
	for i := range onces {
		id := fmt.Sprintf("once-%02d", i)
		cb.mu.Lock()
		n := len(cb.times[id])
		cb.mu.Unlock()
		if n != 1 {
			t.Errorf("%s called %d times, want once", id, n)
		}
		for _, m := range live() {
			var j cron.Job
			call(t, "GET", m.url+"/jobs/"+id, "", &j)
			if j.LastStatus != cron.StatusSuccess || j.LastRunAt.IsZero() || !j.NextRunAt.IsZero() {
				t.Errorf("%s on %s: last_status %q, last_run_at %v, next_run_at %v; want success, its run, none",
					id, m.name, j.LastStatus, j.LastRunAt, j.NextRunAt)
			}
		}
	}

	// enabled and last_status are those of the last acknowledged write,
	// through every live instance.
	for _, id := range ids {
		_, paused := pausedAt[id]
		for _, m := range live() {
			var j cron.Job
			if code := call(t, "GET", m.url+"/jobs/"+id, "", &j); code != 200 {
				t.Fatalf("GET %s on %s: %d", id, m.name, code)
			}
			if paused && (!j.Paused || j.LastStatus != cron.StatusPaused) {
				t.Errorf("%s on %s after its pause: enabled %v, last_status %q; want false, paused", id, m.name, !j.Paused, j.LastStatus)
			}
			if !paused && j.Paused {
				t.Errorf("%s on %s: enabled false, never paused", id, m.name)
			}
		}
	}
	t.Logf("%d calls, %d slots lost while held, no slot twice: %v, run rows open after %v: %d", calls, lost, len(dups) == 0, bound, open)
}

// TestClusterDuplicateInstance: a second process started with the
// KSANA_INSTANCE of a live one on the same database is refused at start
// with exit status 2 and an error naming the variable; once the first has
// stopped, the name is free again.
func TestClusterDuplicateInstance(t *testing.T) {
	onDatabases(t, "ksana_dup_test", func(t *testing.T, dbURL string) {
		testClusterDuplicateInstance(t, buildKsana(t), dbURL)
	})
}

func testClusterDuplicateInstance(t *testing.T, bin, dbURL string) {
	env := []string{"DATABASE_URL=" + dbURL, "KSANA_LEASE_TTL=2s"}
	first := startMember(t, bin, "same", env...)
	// A process that is not refused serves until the deadline kills it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), "PORT=0", "LISTEN_ADDR=127.0.0.1", "LOG_FORMAT=json", "KSANA_INSTANCE=same")
	cmd.Env = append(cmd.Env, env...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := runProcess(cmd)
	out := buf.Bytes()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("second process with the same KSANA_INSTANCE: %v, want exit status 2; output:\n%s", err, out)
	}
	if !strings.Contains(string(out), "KSANA_INSTANCE") || !strings.Contains(string(out), "same") {
		t.Errorf("the refusal does not name KSANA_INSTANCE and the name:\n%s", out)
	}
	if h := first.health(t); h["instance"] != "same" {
		t.Errorf("the first instance after the refusal: %v", h)
	}
	// Stopped cleanly, the first frees the name at once.
	first.cmd.Process.Signal(syscall.SIGTERM)
	first.cmd.Wait()
	first.dead = true
	second := startMember(t, bin, "same", env...)
	if h := second.health(t); h["instance"] != "same" {
		t.Errorf("a process with the name after the first stopped: %v", h)
	}
}

// TestSharedStartAndOutage: on a database, the start-up warning about
// jobs outside KSANA_CALLBACK_ALLOW sees every stored job, not only those
// the instance holds (none yet when it starts); and GET /jobs while the
// database cannot answer is a 503 with Retry-After, not a 500.
func TestSharedStartAndOutage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("PostgreSQL and SQLite")
	}
	t.Run("allow-list", func(t *testing.T) {
		t.Parallel()
		env := map[string]string{"DATABASE_URL": "sqlite:" + filepath.Join(t.TempDir(), "ksana.db"), "KSANA_INSTANCE": "one"}
		ts := startService(t, t.TempDir(), env)
		for i := range 3 {
			ts.create(t, fmt.Sprintf(`{"id":"old-%d","http":{"url":"http://127.0.0.1:9/x"},"schedule":{"kind":"every","every":"1h"}}`, i))
		}
		ts.stop()
		env["KSANA_CALLBACK_ALLOW"] = "*.internal"
		ts = startService(t, t.TempDir(), env)
		logs := ts.logs.String()
		for i := range 3 {
			if !strings.Contains(logs, fmt.Sprintf("job_id=old-%d", i)) {
				t.Errorf("no start-up warning about job old-%d; logs:\n%s", i, logs)
			}
		}
	})
	t.Run("outage", func(t *testing.T) {
		t.Parallel()
		dbURL := postgresSchemaURL(t, "ksana_outage_list_test")
		ts := startService(t, t.TempDir(), map[string]string{"DATABASE_URL": dbURL, "KSANA_INSTANCE": "one"})
		ts.create(t, `{"id":"x","http":{"url":"http://127.0.0.1:9/x"},"schedule":{"kind":"every","every":"1h"}}`)
		db, err := sqlstore.Open(context.Background(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		// The table gone stands for a database that cannot answer.
		if _, err := db.SQL().Exec("ALTER TABLE ksana_job RENAME TO ksana_job_away"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(ts.url + "/jobs")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("GET /jobs while the database cannot answer: %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		if _, err := db.SQL().Exec("ALTER TABLE ksana_job_away RENAME TO ksana_job"); err != nil {
			t.Fatal(err)
		}
		var list []cron.Job
		if code := call(t, "GET", ts.url+"/jobs", "", &list); code != 200 || len(list) != 1 {
			t.Errorf("GET /jobs once the database answers again: %d, %d jobs", code, len(list))
		}
	})
}

// openRuns waits until no run row claimed (triggered) before end is
// without a status, or until deadline, and returns how many still are.
func openRuns(t *testing.T, db *sqlstore.DB, end, deadline time.Time) int {
	t.Helper()
	for {
		var open int
		if err := db.SQL().QueryRow(fmt.Sprintf("SELECT count(*) FROM ksana_run WHERE status = '' AND triggered_at < %d", end.UnixNano())).Scan(&open); err != nil {
			t.Fatal(err)
		}
		if open == 0 || time.Now().After(deadline) {
			return open
		}
		time.Sleep(100 * time.Millisecond)
	}
}
