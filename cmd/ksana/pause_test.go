package main

import (
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/client"
)

// stopMember stops m gracefully (SIGTERM) and waits for it.
func stopMember(m *member) {
	m.cmd.Process.Signal(syscall.SIGTERM)
	m.cmd.Wait()
	m.dead = true
}

// settled reports the calls of hook once they stop growing for quiet.
func settled(hook *callback, quiet time.Duration) int {
	n := hook.count()
	for {
		time.Sleep(quiet)
		m := hook.count()
		if m == n {
			return n
		}
		n = m
	}
}

// On the JSON file: a job paused with -for resumes by itself; the service
// pause (ksana pause) stops every call, shows in ksana health, survives a
// restart and ends with ksana resume; the audit log survives the restart.
func TestPauseJSONFile(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildKsana(t)
	dir := t.TempDir()
	m := startMember(t, bin, "p", "KSANA_DATA="+dir, "KSANA_API_TOKEN=tok-secret-000001")
	env := []string{"KSANA_ADDR=" + m.url, "KSANA_API_TOKEN=tok-secret-000001"}
	hook := newCallback(t, 200, 0)
	body := `{"id":"tick","http":{"url":"` + hook.URL + `"},"schedule":{"kind":"every","every":"200ms"}}`
	if code, _, errOut := cli(t, bin, env, body, "jobs", "add", "-f", "-"); code != 0 {
		t.Fatalf("jobs add: exit %d: %s", code, errOut)
	}
	waitFor(t, "a first call", func() bool { return hook.count() > 0 })

	// A timed pause.
	var j cron.Job
	jsonOut(t, bin, env, &j, "jobs", "pause", "tick", "-for", "2s", "-o", "json")
	if !j.Paused || j.PausedUntil.IsZero() || time.Until(j.PausedUntil) > 2*time.Second || j.PausedAt.IsZero() {
		t.Fatalf("jobs pause -for 2s: %+v", j)
	}
	if code, out, _ := cli(t, bin, env, "", "jobs", "get", "tick"); code != 0 || !strings.Contains(out, "paused_at") || !strings.Contains(out, "paused_until") {
		t.Errorf("jobs get of a paused job: exit %d\n%s\nwant paused_until and paused_at", code, out)
	}
	n := settled(hook, 300*time.Millisecond)
	if time.Now().Before(j.PausedUntil) {
		time.Sleep(time.Until(j.PausedUntil))
	}
	waitFor(t, "the job resumed by itself", func() bool {
		var got cron.Job
		jsonOut(t, bin, env, &got, "jobs", "get", "tick", "-o", "json")
		return !got.Paused && got.PausedUntil.IsZero() && got.PausedAt.IsZero()
	})
	waitFor(t, "calls after the timed pause", func() bool { return hook.count() > n })
	if code, _, errOut := cli(t, bin, env, "", "jobs", "pause", "tick", "-until", "2000-01-01T00:00:00Z"); code != 1 || !strings.Contains(errOut, "ksana jobs pause: -until: must be in the future") {
		t.Errorf("jobs pause -until in the past: exit %d %q; want 1 naming -until", code, errOut)
	}
	if code, _, errOut := cli(t, bin, env, "", "jobs", "pause", "tick", "-for", "soon"); code != 2 || !strings.Contains(errOut, "-for") {
		t.Errorf("jobs pause -for soon: exit %d %q; want 2 naming -for", code, errOut)
	}

	// The service pause.
	code, out, errOut := cli(t, bin, env, "", "pause", "-reason", "disk swap")
	if code != 0 || !strings.Contains(out, "paused until resumed") {
		t.Fatalf("ksana pause: exit %d %q %q", code, out, errOut)
	}
	n = settled(hook, 400*time.Millisecond)
	time.Sleep(time.Second)
	if got := hook.count(); got != n {
		t.Errorf("calls while the service is paused: %d more", got-n)
	}
	if code, out, _ := cli(t, bin, env, "", "health"); code != 0 || !strings.Contains(out, "paused        true") && !strings.Contains(out, "true") || !strings.Contains(out, "disk swap") {
		t.Errorf("ksana health while paused:\n%s", out)
	}
	var tick cron.Job
	jsonOut(t, bin, env, &tick, "jobs", "get", "tick", "-o", "json")
	if tick.Paused {
		t.Errorf("the service pause disabled the job")
	}
	stopMember(m)
	m = startMember(t, bin, "p", "KSANA_DATA="+dir, "KSANA_API_TOKEN=tok-secret-000001")
	env = []string{"KSANA_ADDR=" + m.url, "KSANA_API_TOKEN=tok-secret-000001"}
	if h := m.health(t); h["paused"] != true || h["pause_reason"] != "disk swap" {
		t.Errorf("/health after a restart: %v; want still paused", h)
	}
	time.Sleep(time.Second)
	if got := hook.count(); got != n {
		t.Errorf("calls after a restart while paused: %d more", got-n)
	}
	if code, out, _ := cli(t, bin, env, "", "resume"); code != 0 || !strings.Contains(out, "not paused") {
		t.Errorf("ksana resume: exit %d %q", code, out)
	}
	waitFor(t, "calls after ksana resume", func() bool { return hook.count() > n })

	// The audit log kept the writes from before the restart.
	var entries []client.AuditEntry
	jsonOut(t, bin, env, &entries, "audit", "-o", "json", "-limit", "1000")
	var paths []string
	for _, e := range entries {
		paths = append(paths, string(e.Action)+" "+e.JobID)
	}
	for _, want := range []string{"create tick", "pause tick", "pause-all ", "resume-all "} {
		if !strings.Contains(strings.Join(paths, ","), want) {
			t.Errorf("audit after a restart: %v, want %s", paths, want)
		}
	}
	if code, out, _ := cli(t, bin, env, "", "audit", "-who", "admin"); code != 0 || !strings.Contains(out, "the service is paused until resumed (ksana resume): disk swap") {
		t.Errorf("ksana audit -who admin:\n%s", out)
	}
}

// On PostgreSQL with two instances: a timed pause set through a ends on
// the instance that holds the job (b for some of them); a service pause
// set through a stops the calls of both and shows in the /health of both,
// also after b restarts; the audit entries written through a are read
// through b.
func TestPauseShared(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("processes on PostgreSQL")
	}
	bin := buildKsana(t)
	env := []string{"DATABASE_URL=" + postgresSchemaURL(t, "ksana_pause_test"), "KSANA_LEASE_TTL=2s"}
	a, b := startMember(t, bin, "a", env...), startMember(t, bin, "b", env...)
	onA, onB := []string{"KSANA_ADDR=" + a.url}, []string{"KSANA_ADDR=" + b.url}
	hook := newCallback(t, 200, 0)
	const jobs = 12
	for i := range jobs {
		body := fmt.Sprintf(`{"id":"j%d","http":{"url":"%s"},"schedule":{"kind":"every","every":"300ms"}}`, i, hook.URL)
		if code, _, errOut := cli(t, bin, onA, body, "jobs", "add", "-f", "-"); code != 0 {
			t.Fatalf("jobs add: exit %d: %s", code, errOut)
		}
	}
	// Both instances hold some jobs.
	waitFor(t, "both instances to hold jobs", func() bool {
		ha, hb := a.health(t), b.health(t)
		na, _ := ha["jobs_held"].(float64)
		nb, _ := hb["jobs_held"].(float64)
		return na > 0 && nb > 0 && na+nb == jobs
	})

	// Timed pauses, all set through a, ending once the twelve runs of the
	// CLI that set them are done, on a loaded machine too (they run beside
	// the other process tests).
	until := time.Now().Add(10 * time.Second)
	for i := range jobs {
		if code, _, errOut := cli(t, bin, onA, "", "jobs", "pause", fmt.Sprintf("j%d", i), "-until", until.UTC().Format(time.RFC3339Nano)); code != 0 {
			t.Fatalf("jobs pause on a: exit %d: %s", code, errOut)
		}
	}
	var held []cron.Job
	jsonOut(t, bin, onB, &held, "jobs", "ls", "-enabled", "false", "-o", "json")
	if len(held) != jobs {
		t.Errorf("paused jobs seen through b: %d, want %d", len(held), jobs)
	}
	time.Sleep(time.Until(until))
	waitFor(t, "every job resumed", func() bool {
		var ls []cron.Job
		jsonOut(t, bin, onB, &ls, "jobs", "ls", "-enabled", "true", "-o", "json")
		return len(ls) == jobs
	})
	// A member logs a resume after it wrote it, so the last lines may reach
	// the logs a moment after the store shows every job resumed.
	resumedBy := func(m *member) int { return strings.Count(m.logs.String(), "job resumed: its pause ended") }
	for deadline := time.Now().Add(5 * time.Second); resumedBy(a)+resumedBy(b) < jobs && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if ra, rb := resumedBy(a), resumedBy(b); rb == 0 || ra+rb != jobs {
		t.Errorf("timed resumes: %d by a, %d by b; want all %d, some by b (the holder)", ra, rb, jobs)
	}

	// The service pause, set through a.
	if code, _, errOut := cli(t, bin, onA, "", "pause", "-reason", "upgrade"); code != 0 {
		t.Fatalf("ksana pause on a: exit %d: %s", code, errOut)
	}
	for _, m := range []*member{a, b} {
		waitFor(t, "/health of "+m.name+" to show the pause", func() bool {
			h := m.health(t)
			return h["paused"] == true && h["pause_reason"] == "upgrade"
		})
	}
	n := settled(hook, 700*time.Millisecond)
	time.Sleep(1500 * time.Millisecond)
	if got := hook.count(); got != n {
		t.Errorf("calls while the service is paused: %d more", got-n)
	}
	stopMember(b)
	b = startMember(t, bin, "b", env...)
	onB = []string{"KSANA_ADDR=" + b.url}
	if h := b.health(t); h["paused"] != true {
		t.Errorf("/health of b after its restart: %v, want paused", h)
	}
	time.Sleep(time.Second)
	if got := hook.count(); got != n {
		t.Errorf("calls while paused, after b restarted: %d more", got-n)
	}
	if code, _, errOut := cli(t, bin, onB, "", "resume"); code != 0 {
		t.Fatalf("ksana resume on b: exit %d: %s", code, errOut)
	}
	waitFor(t, "/health of a to show the end of the pause", func() bool { return a.health(t)["paused"] == nil })
	waitFor(t, "calls after the resume", func() bool { return hook.count() > n+jobs })

	// The audit log is one for both.
	var entries []client.AuditEntry
	jsonOut(t, bin, onB, &entries, "audit", "-o", "json", "-limit", "1000")
	var pauses, creates int
	for _, e := range entries {
		switch {
		case e.Action == cron.ActionCreate:
			creates++
		case e.Action == cron.ActionPauseAll && e.PauseAfter == nil:
			t.Errorf("audit entry of pause-all without the pause after: %+v", e)
		case e.Action == cron.ActionPauseAll:
			pauses++
		}
	}
	if creates != jobs || pauses != 1 {
		t.Errorf("audit read through b: %d creates and %d service pauses, want %d and 1", creates, pauses, jobs)
	}

	// Every job paused through a, then resumed through a and b at the same
	// instant: one outcome, and one record of the pause for each job (the
	// job writes compare and set their version).
	pausedAt := time.Now()
	for i := range jobs {
		if code := call(t, "POST", fmt.Sprintf("%s/jobs/j%d/pause", a.url, i), "", nil); code != 200 {
			t.Fatalf("pause j%d through a: %d", i, code)
		}
	}
	time.Sleep(time.Second)
	var wg sync.WaitGroup
	for i := range jobs {
		for _, m := range []*member{a, b} {
			wg.Go(func() {
				if code := call(t, "POST", fmt.Sprintf("%s/jobs/j%d/resume", m.url, i), "", nil); code != 200 {
					t.Errorf("resume j%d through %s: %d", i, m.name, code)
				}
			})
		}
	}
	wg.Wait()
	time.Sleep(time.Second)
	for i := range jobs {
		var runs []cron.Run
		if code := call(t, "GET", fmt.Sprintf("%s/jobs/j%d/runs?limit=1000", b.url, i), "", &runs); code != 200 {
			t.Fatalf("runs of j%d: %d", i, code)
		}
		var job cron.Job
		call(t, "GET", fmt.Sprintf("%s/jobs/j%d", a.url, i), "", &job)
		records := 0
		for _, run := range runs {
			if run.Reason == cron.ReasonPaused && !run.ScheduledAt.Before(pausedAt) {
				records++
			}
		}
		if records != 1 || job.Paused {
			t.Errorf("j%d resumed through both at once: %d records of its pause, paused %v; want 1, resumed; paused at %s, runs:\n%s",
				i, records, job.Paused, pausedAt.Format("15:04:05.000"), describeRuns(runs, time.Now()))
		}
	}
}

// TestPauseStopsAtOnce: two instances on one database, jobs every
// 200ms; each job is paused through the instance that does not hold it.
// Once the pause is acknowledged the holder calls no slot later than the
// ones it claimed ahead of their time (250ms) and the delay of its
// watcher (LISTEN/NOTIFY on PostgreSQL; a poll every 250ms on SQLite),
// and both instances show the job paused (enabled false, last_status
// paused) within a second.
func TestPauseStopsAtOnce(t *testing.T) {
	onDatabases(t, "ksana_pause_once_test", func(t *testing.T, dbURL string) {
		watch := 100 * time.Millisecond
		if strings.HasPrefix(dbURL, "sqlite:") {
			watch = 350 * time.Millisecond
		}
		testPauseStopsAtOnce(t, buildKsana(t), dbURL, watch)
	})
}

// testPauseStopsAtOnce is TestPauseStopsAtOnce on the database of dbURL,
// whose watcher brings a write to the other instance within watch.
func testPauseStopsAtOnce(t *testing.T, bin, dbURL string, watch time.Duration) {
	runAs(t, timingTest) // here, in the subtest: see runAs
	env := []string{"DATABASE_URL=" + dbURL, "KSANA_LEASE_TTL=2s"}
	a, b := startMember(t, bin, "a", env...), startMember(t, bin, "b", env...)
	cb := newSlotCounter(t)
	const jobs = 16
	for i := range jobs {
		body := fmt.Sprintf(`{"id":"p%02d","http":{"method":"POST","url":%q},"schedule":{"kind":"every","every":"200ms"}}`, i, cb.URL)
		if code := call(t, "POST", a.url+"/jobs", body, nil); code != 201 {
			t.Fatalf("create p%02d: %d", i, code)
		}
	}
	waitFor(t, "both instances holding jobs", func() bool {
		na, _ := a.health(t)["jobs_held"].(float64)
		nb, _ := b.health(t)["jobs_held"].(float64)
		return na > 0 && nb > 0 && na+nb == jobs
	})
	time.Sleep(time.Second)
	bound := cron.DefaultClaimAhead + watch
	acked := map[string]time.Time{}
	for i := range jobs {
		id := fmt.Sprintf("p%02d", i)
		var runs []cron.Run
		call(t, "GET", a.url+"/jobs/"+id+"/runs?limit=1", "", &runs)
		if len(runs) == 0 {
			t.Fatalf("%s has no run yet", id)
		}
		other := a // pause through the instance that does not hold the job
		if runs[0].Instance == "a" {
			other = b
		}
		if code := call(t, "POST", other.url+"/jobs/"+id+"/pause", "", nil); code != 200 {
			t.Fatalf("pause %s through %s: %d", id, other.name, code)
		}
		acked[id] = time.Now()
	}
	time.Sleep(time.Second)
	cb.mu.Lock()
	for id, at := range acked {
		var late []string
		for _, s := range cb.times[id] {
			if s.After(at.Add(bound)) {
				late = append(late, s.Sub(at).Round(time.Millisecond).String())
			}
		}
		if len(late) > 0 {
			t.Errorf("%s: %d calls of slots more than %v after its pause was acknowledged: %v after the ack", id, len(late), bound, late)
		}
	}
	cb.mu.Unlock()
	for id := range acked {
		for _, m := range []*member{a, b} {
			var j cron.Job
			call(t, "GET", m.url+"/jobs/"+id, "", &j)
			if !j.Paused || j.LastStatus != cron.StatusPaused {
				t.Errorf("%s through %s a second after its pause: paused %v, last_status %q; want paused", id, m.name, j.Paused, j.LastStatus)
			}
		}
	}
}
