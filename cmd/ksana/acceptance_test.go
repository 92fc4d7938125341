package main

// Acceptance tests: each item of the specification's sections 2.2 and 12,
// through the HTTP API of a running service with callback servers.
// Intervals are short so that the package stays fast; deadlines are long
// because the machines running them are loaded.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/cron"
)

func TestOnceFiresOnTime(t *testing.T) {
	t.Parallel()
	cb := newCallback(t, 200, 0)
	ts := startService(t, t.TempDir(), nil)
	runAt := time.Now().Add(700 * time.Millisecond).UTC()
	j := ts.create(t, fmt.Sprintf(`{"name":"once","http":{"url":%q},"schedule":{"kind":"once","run_at":%q}}`, cb.URL, rfc(runAt)))
	if !j.NextRunAt.Equal(runAt) {
		t.Errorf("next_run_at = %v, want run_at %v", j.NextRunAt, runAt)
	}
	runs := ts.waitRuns(t, j.ID, 1)
	r := runs[0]
	if r.Status != cron.StatusSuccess || r.Attempts != 1 || r.HTTPStatus != 200 {
		t.Errorf("run = %+v, want success after 1 attempt with 200", r)
	}
	if !r.ScheduledAt.Equal(runAt) {
		t.Errorf("scheduled_at = %v, want %v", r.ScheduledAt, runAt)
	}
	if r.TriggeredAt.Before(runAt) {
		t.Errorf("fired early: triggered_at %v before run_at %v", r.TriggeredAt, runAt)
	}
	if lag := r.TriggeredAt.Sub(runAt); lag > 2*time.Second {
		t.Errorf("fired %v late", lag)
	}
	waitFor(t, "the job's bookkeeping", func() bool { return ts.job(t, j.ID).LastStatus == cron.StatusSuccess })
	got := ts.job(t, j.ID)
	if !got.NextRunAt.IsZero() || got.LastRunAt.IsZero() {
		t.Errorf("after its run a once job has next_run_at %v last_run_at %v, want none and set", got.NextRunAt, got.LastRunAt)
	}
	if n := cb.count(); n != 1 {
		t.Errorf("callback called %d times, want 1", n)
	}
}

func TestOncePastDueIsMissed(t *testing.T) {
	t.Parallel()
	cb := newCallback(t, 200, 0)
	dir := t.TempDir()
	past := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	// A once job that came due while the service was down.
	file := fmt.Sprintf(`{"version":1,"updated_at":"","jobs":[{"id":"down","name":"n","enabled":true,"type":"http",
	"http":{"method":"GET","url":%q,"body":""},"schedule":{"kind":"once","run_at":%q},
	"timeout":"1s","max_retries":0,"retry_backoff":"1s","last_run_at":"","next_run_at":%q,"last_status":"","last_error":""}]}`,
		cb.URL, rfc(past), rfc(past))
	if err := os.WriteFile(filepath.Join(dir, "jobs.json"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	// One worker runs the slots in time order, so once a later probe job
	// has run, any run wrongly given to a missed job has called back.
	oneWorker := map[string]string{"WORKERS": "1"}
	probeCB := newCallback(t, 200, 0)
	probe := func(ts *testService, id string) {
		t.Helper()
		at := time.Now().Add(300 * time.Millisecond).UTC()
		ts.create(t, fmt.Sprintf(`{"id":%q,"http":{"url":%q},"schedule":{"kind":"once","run_at":%q}}`, id, probeCB.URL, rfc(at)))
		ts.waitRuns(t, id, 1)
	}
	ts := startService(t, dir, oneWorker)
	// One created already past due is refused: it would never run.
	late := fmt.Sprintf(`{"id":"late","http":{"url":%q},"schedule":{"kind":"once","run_at":%q}}`, cb.URL, rfc(past))
	resp, err := http.Post(ts.url+"/jobs", "application/json", strings.NewReader(late))
	if err != nil {
		t.Fatal(err)
	}
	var refused struct{ Error, Field string }
	_ = json.NewDecoder(resp.Body).Decode(&refused)
	resp.Body.Close()
	if resp.StatusCode != 400 || refused.Field != "schedule.run_at" || !strings.Contains(refused.Error, "in the past") {
		t.Errorf("created past due: %d %+v, want 400 naming schedule.run_at", resp.StatusCode, refused)
	}
	if code := call(t, "GET", ts.url+"/jobs/late", "", nil); code != 404 {
		t.Errorf("GET the refused job: %d, want 404", code)
	}
	for _, id := range []string{"down"} {
		j := ts.job(t, id)
		if j.LastStatus != cron.StatusMissed || !j.NextRunAt.IsZero() || !j.LastRunAt.IsZero() {
			t.Errorf("job %s: last_status %q next_run_at %v last_run_at %v, want missed, none, none", id, j.LastStatus, j.NextRunAt, j.LastRunAt)
		}
		runs := ts.waitRuns(t, id, 1)
		if runs[0].Status != cron.StatusMissed || runs[0].Attempts != 0 {
			t.Errorf("job %s: run record %+v, want missed with 0 attempts", id, runs[0])
		}
	}
	// Never run: a probe due later has run, so a wrongly scheduled run
	// would have called back by now.
	probe(ts, "probe-1")
	if n := cb.count(); n != 0 {
		t.Errorf("a missed once job called back %d times", n)
	}
	// Missed survives a restart and still never runs.
	ts.stop()
	ts = startService(t, dir, oneWorker)
	if j := ts.job(t, "down"); j.LastStatus != cron.StatusMissed {
		t.Errorf("after restart: last_status %q, want missed", j.LastStatus)
	}
	probe(ts, "probe-2")
	if n := cb.count(); n != 0 {
		t.Errorf("after restart a missed once job called back %d times", n)
	}
}

// Not beside the other tests (no t.Parallel): a run of its every-200ms
// job slowed past 200ms by their load records the next slot as skipped,
// an overlap, beside the one record of the downtime the test counts.
func TestEveryRollsAndRestartSkipsToNextSlot(t *testing.T) {
	cb := newCallback(t, 200, 0)
	dir := t.TempDir()
	ts := startService(t, dir, nil)
	const every = 200 * time.Millisecond
	j := ts.create(t, fmt.Sprintf(`{"name":"tick","http":{"url":%q},"schedule":{"kind":"every","every":"200ms"}}`, cb.URL))
	start := j.Schedule.StartAt
	if start.IsZero() {
		t.Fatal("every job without start_at got none")
	}
	onGrid := func(at time.Time) bool { return at.Sub(start)%every == 0 && !at.Before(start) }
	runs := ts.waitRuns(t, j.ID, 3)
	for _, r := range runs {
		if !onGrid(r.ScheduledAt) {
			t.Errorf("run scheduled at %v is off the grid start_at %v + k*%v", r.ScheduledAt, start, every)
		}
	}
	if runs[0].ScheduledAt.Equal(runs[1].ScheduledAt) {
		t.Errorf("two runs of the same slot: %v", runs[0].ScheduledAt)
	}
	ts.stop()

	// Down for many slots, far longer than the misfire tolerance (1s): no
	// slot of the downtime runs after the restart, not even the one that
	// was stored as next_run_at, and the first run is the grid's next slot
	// after the restart.
	const downFor = 15 * every
	down := time.Now()
	time.Sleep(downFor) // the downtime itself
	upStart := time.Now()
	ts = startService(t, dir, nil)
	upEnd := time.Now()
	// nextSlot is the first slot of the grid after at.
	nextSlot := func(at time.Time) time.Time {
		return start.Add((at.Sub(start)/every + 1) * every)
	}
	got := ts.job(t, j.ID)
	if !onGrid(got.NextRunAt) {
		t.Errorf("next_run_at %v after restart is off the grid", got.NextRunAt)
	}
	if got.NextRunAt.Before(upStart) {
		t.Errorf("next_run_at %v after a restart begun at %v is in the past", got.NextRunAt, upStart)
	}
	var since []cron.Run  // the runs after the restart, oldest first
	var bursts []cron.Run // the records of slots not called
	waitFor(t, "two runs after the restart", func() bool {
		since, bursts = since[:0], bursts[:0]
		for _, r := range ts.runs(t, j.ID) {
			switch {
			case r.Reason != "":
				bursts = append(bursts, r)
			case r.TriggeredAt.After(down):
				since = append(since, r)
			}
		}
		return len(since) >= 2
	})
	// The slots of the downtime are one record: missed, reason downtime,
	// from the first slot after the stop, counting them all.
	if len(bursts) != 1 || bursts[0].Status != cron.StatusMissed || bursts[0].Reason != cron.ReasonDowntime ||
		bursts[0].ScheduledAt.Before(down.Add(-every)) || bursts[0].Slots < int(downFor/every)-2 {
		t.Errorf("records of slots not called %+v, want one missed record of about %d slots, reason downtime", bursts, downFor/every)
	}
	slices.SortFunc(since, func(a, b cron.Run) int { return a.ScheduledAt.Compare(b.ScheduledAt) })
	for _, r := range since {
		if r.ScheduledAt.Before(upStart) {
			t.Errorf("a slot of the downtime (%v, down from %v to %v) ran after the restart", r.ScheduledAt, down, upStart)
		}
		if !onGrid(r.ScheduledAt) {
			t.Errorf("run scheduled at %v after restart is off the grid", r.ScheduledAt)
		}
	}
	if first, last := since[0].ScheduledAt, nextSlot(upEnd); first.After(last) {
		t.Errorf("first run after the restart scheduled at %v, want the next slot after the restart (%v at the latest)", first, last)
	}
}

func TestEveryStartAtAndJitter(t *testing.T) {
	t.Parallel()
	cb := newCallback(t, 200, 0)
	ts := startService(t, t.TempDir(), nil)
	const every, jitter = 200 * time.Millisecond, 150 * time.Millisecond
	startAt := time.Now().Add(600 * time.Millisecond).UTC()
	j := ts.create(t, fmt.Sprintf(`{"http":{"url":%q},"schedule":{"kind":"every","every":"200ms","jitter":"150ms","start_at":%q}}`, cb.URL, rfc(startAt)))
	if !j.Schedule.StartAt.Equal(startAt) {
		t.Errorf("start_at = %v, want %v", j.Schedule.StartAt, startAt)
	}
	runs := ts.waitRuns(t, j.ID, 6)
	offsets := map[time.Duration]bool{}
	for _, r := range runs {
		if r.ScheduledAt.Before(startAt) {
			t.Errorf("run scheduled at %v, before start_at %v", r.ScheduledAt, startAt)
		}
		off := r.ScheduledAt.Sub(startAt) % every
		if off < 0 || off >= jitter {
			t.Errorf("run scheduled at %v: offset %v from the grid, want in [0, %v)", r.ScheduledAt, off, jitter)
		}
		offsets[off] = true
		if r.TriggeredAt.Before(r.ScheduledAt) {
			t.Errorf("run triggered at %v before its jittered time %v", r.TriggeredAt, r.ScheduledAt)
		}
	}
	if len(offsets) < 2 {
		t.Errorf("6 runs share %d jitter offset(s): jitter has no effect", len(offsets))
	}
}

func TestRunNowLeavesNextRunAt(t *testing.T) {
	t.Parallel()
	cb := newCallback(t, 200, 0)
	ts := startService(t, t.TempDir(), nil)
	j := ts.create(t, fmt.Sprintf(`{"http":{"url":%q},"schedule":{"kind":"every","every":"1h"}}`, cb.URL))
	var rn struct {
		RunID string `json:"run_id"`
	}
	if code := call(t, "POST", ts.url+"/jobs/"+j.ID+"/run-now", "", &rn); code != 202 {
		t.Fatalf("run-now: %d", code)
	}
	runs := ts.waitRuns(t, j.ID, 1)
	if runs[0].ID != rn.RunID || runs[0].Status != cron.StatusSuccess {
		t.Errorf("run %+v, want %s success", runs[0], rn.RunID)
	}
	cb.mu.Lock()
	gotHeader := cb.runIDs[0]
	cb.mu.Unlock()
	if gotHeader != rn.RunID {
		t.Errorf("callback got X-Ksana-Run-Id %q, want %q", gotHeader, rn.RunID)
	}
	waitFor(t, "bookkeeping of the run", func() bool { return !ts.job(t, j.ID).LastRunAt.IsZero() })
	if got := ts.job(t, j.ID).NextRunAt; !got.Equal(j.NextRunAt) {
		t.Errorf("run-now moved next_run_at from %v to %v", j.NextRunAt, got)
	}

	// Run-now several times at once, forced past the overlap rule: every
	// run is recorded, once.
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() { call(t, "POST", ts.url+"/jobs/"+j.ID+"/run-now", `{"force": true}`, nil) })
	}
	wg.Wait()
	runs = ts.waitRuns(t, j.ID, 6)
	ids := map[string]bool{}
	for _, r := range runs {
		if ids[r.ID] || r.Status != cron.StatusSuccess {
			t.Errorf("run %+v repeated or not a success", r)
		}
		ids[r.ID] = true
	}
	waitFor(t, "6 callbacks", func() bool { return cb.count() == 6 })
	got := ts.job(t, j.ID)
	if got.LastStatus != cron.StatusSuccess || !got.NextRunAt.Equal(j.NextRunAt) {
		t.Errorf("after concurrent runs: last_status %q next_run_at %v (was %v)", got.LastStatus, got.NextRunAt, j.NextRunAt)
	}
}

func TestRetriesAndTimeouts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		status       int
		delay        time.Duration
		job          string // extra fields
		wantStatus   cron.Status
		wantAttempts int
		wantHTTP     int
	}{
		{"5xx retried then failed", 503, 0, `"max_retries":2,"retry_backoff":"20ms"`, cron.StatusFailed, 3, 503},
		{"408 retried", 408, 0, `"max_retries":1,"retry_backoff":"20ms"`, cron.StatusFailed, 2, 408},
		{"4xx not retried", 404, 0, `"max_retries":3,"retry_backoff":"20ms"`, cron.StatusFailed, 1, 404},
		{"timeout retried then timeout", 200, 2 * time.Second, `"max_retries":1,"retry_backoff":"20ms","timeout":"100ms"`, cron.StatusTimeout, 2, 0},
		{"no retries by explicit 0", 500, 0, `"max_retries":0`, cron.StatusFailed, 1, 500},
		{"success", 204, 0, `"max_retries":3`, cron.StatusSuccess, 1, 204},
	}
	ts := startService(t, t.TempDir(), nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cb := newCallback(t, tt.status, tt.delay)
			j := ts.create(t, fmt.Sprintf(`{"http":{"url":%q},"schedule":{"kind":"every","every":"1h"},%s}`, cb.URL, tt.job))
			if code := call(t, "POST", ts.url+"/jobs/"+j.ID+"/run-now", "", nil); code != 202 {
				t.Fatalf("run-now: %d", code)
			}
			r := ts.waitRuns(t, j.ID, 1)[0]
			got := fmt.Sprintf("%s attempts=%d http=%d", r.Status, r.Attempts, r.HTTPStatus)
			want := fmt.Sprintf("%s attempts=%d http=%d", tt.wantStatus, tt.wantAttempts, tt.wantHTTP)
			if got != want {
				t.Errorf("run = %s (error %q), want %s", got, r.Error, want)
			}
			if n := cb.count(); n != tt.wantAttempts {
				t.Errorf("callback called %d times, want %d", n, tt.wantAttempts)
			}
			waitFor(t, "last_status", func() bool { return ts.job(t, j.ID).LastStatus == tt.wantStatus })
			if tt.wantStatus != cron.StatusSuccess && ts.job(t, j.ID).LastError == "" {
				t.Errorf("last_error empty after a %s run", tt.wantStatus)
			}
		})
	}
}

func TestRestartKeepsJobsAndBookkeeping(t *testing.T) {
	t.Parallel()
	cb := newCallback(t, 200, 0)
	bad := newCallback(t, 500, 0)
	dir := t.TempDir()
	ts := startService(t, dir, nil)
	// start_at half an hour ago: the first slot (start_at plus a jitter
	// below 1s) has passed and the next one is half an hour away, so no
	// slot of a falls due during the test, whatever its speed.
	ts.create(t, fmt.Sprintf(`{"id":"a","name":"A","http":{"method":"POST","url":%q,"headers":{"X-T":"1"},"body":"{\"k\":1}"},"schedule":{"kind":"every","every":"1h","jitter":"1s","start_at":%q},"timeout":"2s","max_retries":1,"retry_backoff":"10ms"}`, cb.URL, rfc(time.Now().Add(-30*time.Minute))))
	ts.create(t, fmt.Sprintf(`{"id":"b","http":{"url":%q},"schedule":{"kind":"once","run_at":%q}}`, cb.URL, rfc(time.Now().Add(time.Hour))))
	ts.create(t, fmt.Sprintf(`{"id":"c","http":{"url":%q},"schedule":{"kind":"every","every":"1h"},"max_retries":0}`, bad.URL))
	if code := call(t, "POST", ts.url+"/jobs/b/pause", "", nil); code != 200 {
		t.Fatalf("pause: %d", code)
	}
	for _, id := range []string{"a", "c"} {
		call(t, "POST", ts.url+"/jobs/"+id+"/run-now", "", nil)
		ts.waitRuns(t, id, 1)
	}
	waitFor(t, "bookkeeping", func() bool {
		return ts.job(t, "a").LastStatus == cron.StatusSuccess && ts.job(t, "c").LastStatus == cron.StatusFailed
	})
	wantJobs := ts.jobs(t)
	wantRuns := map[string][]cron.Run{"a": ts.runs(t, "a"), "c": ts.runs(t, "c")}
	ts.stop()
	if diff := cmp.Diff(wantJobs, readJobsFile(t, dir)); diff != "" {
		t.Errorf("jobs.json after shutdown (-API +file):\n%s", diff)
	}

	ts = startService(t, dir, nil)
	if diff := cmp.Diff(wantJobs, ts.jobs(t)); diff != "" {
		t.Errorf("jobs after restart (-before +after):\n%s", diff)
	}
	for id, want := range wantRuns {
		if diff := cmp.Diff(want, ts.runs(t, id)); diff != "" {
			t.Errorf("runs of %s after restart (-before +after):\n%s", id, diff)
		}
	}
}

// TestShutdownDrainsRuns: a run in flight at SIGTERM finishes and its
// outcome is on disk.
func TestShutdownDrainsRuns(t *testing.T) {
	t.Parallel()
	cb := newCallback(t, 200, 400*time.Millisecond)
	dir := t.TempDir()
	ts := startService(t, dir, nil)
	j := ts.create(t, fmt.Sprintf(`{"http":{"url":%q},"schedule":{"kind":"every","every":"1h"}}`, cb.URL))
	call(t, "POST", ts.url+"/jobs/"+j.ID+"/run-now", "", nil)
	waitFor(t, "the callback to be called", func() bool { return cb.count() == 1 })
	ts.stop()
	jobs := readJobsFile(t, dir)
	if len(jobs) != 1 || jobs[0].LastStatus != cron.StatusSuccess {
		t.Errorf("after shutdown jobs.json holds %+v, want the drained run's success", jobs)
	}
}

func TestDrainTimeoutCancels(t *testing.T) {
	t.Parallel()
	cb := newCallback(t, 200, 30*time.Second)
	dir := t.TempDir()
	ts := startService(t, dir, map[string]string{"DRAIN_TIMEOUT": "200ms"})
	j := ts.create(t, fmt.Sprintf(`{"http":{"url":%q},"schedule":{"kind":"every","every":"1h"},"timeout":"1m","max_retries":0}`, cb.URL))
	call(t, "POST", ts.url+"/jobs/"+j.ID+"/run-now", "", nil)
	waitFor(t, "the callback to be called", func() bool { return cb.count() == 1 })
	start := time.Now()
	ts.stop()
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("shutdown took %v with DRAIN_TIMEOUT 200ms", d)
	}
	if jobs := readJobsFile(t, dir); len(jobs) != 1 || jobs[0].LastStatus == cron.StatusSuccess {
		t.Errorf("cancelled run recorded as %+v", jobs)
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	cb := newCallback(t, 200, 0)
	ts := startService(t, t.TempDir(), nil)
	j := ts.create(t, fmt.Sprintf(`{"http":{"url":%q},"schedule":{"kind":"every","every":"1h"}}`, cb.URL))
	ts.create(t, fmt.Sprintf(`{"http":{"url":%q},"schedule":{"kind":"every","every":"1h"},"enabled":false}`, cb.URL))
	call(t, "POST", ts.url+"/jobs/"+j.ID+"/run-now", "", nil)
	ts.waitRuns(t, j.ID, 1)
	resp, err := httpGet(ts.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`ksana_jobs{state="enabled"} 1`,
		`ksana_jobs{state="paused"} 1`,
		`ksana_runs_total{status="success"} 1`,
		`ksana_run_lag_seconds_count 1`,
		`ksana_callback_latency_seconds_count 1`,
		`ksana_store_flush_seconds_count `,
		`ksana_http_requests_total{code="201",route="/jobs"} 2`,
	} {
		if !strings.Contains(resp, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, resp)
		}
	}
}

func TestTokenAndAllowList(t *testing.T) {
	t.Parallel()
	ts := startService(t, t.TempDir(), map[string]string{"KSANA_API_TOKEN": "tok-secret-000001", "KSANA_CALLBACK_ALLOW": "*.internal"})
	if code := call(t, "GET", ts.url+"/jobs", "", nil); code != 401 {
		t.Errorf("GET /jobs without token: %d, want 401", code)
	}
	if code := call(t, "GET", ts.url+"/health", "", nil); code != 200 {
		t.Errorf("GET /health without token: %d, want 200", code)
	}
}

// TestAllowListOnStoredJobs: a job stored before KSANA_CALLBACK_ALLOW was
// set is reported at start-up, run-now on it is refused, and its scheduled
// runs fail without calling its host.
func TestAllowListOnStoredJobs(t *testing.T) {
	t.Parallel()
	cb := newCallback(t, 200, 0)
	dir := t.TempDir()
	ts := startService(t, dir, nil)
	// First slot 2s after the start below, then every hour.
	j := ts.create(t, fmt.Sprintf(`{"id":"old","http":{"url":%q},"schedule":{"kind":"every","every":"1h","start_at":%q},"max_retries":0}`,
		cb.URL, rfc(time.Now().Add(2*time.Second))))
	ts.stop()

	ts = startService(t, dir, map[string]string{"KSANA_CALLBACK_ALLOW": "*.internal"})
	if !strings.Contains(ts.logs.String(), "job calls a host outside KSANA_CALLBACK_ALLOW") || !strings.Contains(ts.logs.String(), "job_id=old") {
		t.Errorf("no start-up warning about job old; logs:\n%s", ts.logs.String())
	}
	var body map[string]string
	if code := callBody(t, "POST", ts.url+"/jobs/old/run-now", &body); code != 400 || body["field"] != "http.url" {
		t.Errorf("run-now of a job outside the allow-list: %d %v, want 400 naming http.url", code, body)
	}
	runs := ts.waitRuns(t, j.ID, 1)
	if runs[0].Status != "failed" || !strings.Contains(runs[0].Error, "not in the callback allow-list") {
		t.Errorf("scheduled run = %s %q, want failed: not in the callback allow-list", runs[0].Status, runs[0].Error)
	}
	if n := cb.count(); n != 0 {
		t.Errorf("the callback outside the allow-list was called %d times", n)
	}
}

// TestBadJobsFileIsLoud: a jobs.json that cannot be read is set aside and
// the service starts empty; /health, /metrics and the log say so, and
// name the backup, until the next restart.
func TestBadJobsFileIsLoud(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "jobs.json"), []byte("nonsense"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := startService(t, dir, nil)
	var health map[string]string
	if code := call(t, "GET", ts.url+"/health", "", &health); code != 200 {
		t.Fatalf("/health: %d", code)
	}
	backup := filepath.Join(dir, "jobs.bad.json")
	want := map[string]string{"status": "ok", "store": "recovered: unreadable", "store_backup": backup,
		"store_note": "jobs.json could not be read and was moved aside: the service started with no jobs"}
	if diff := cmp.Diff(want, health); diff != "" {
		t.Errorf("/health after a bad jobs.json (-want +got):\n%s", diff)
	}
	metrics, err := httpGet(ts.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if w := fmt.Sprintf(`ksana_store_recovered{backup=%q,kind="unreadable"} 1`, backup); !strings.Contains(metrics, w) {
		t.Errorf("/metrics lacks %s:\n%s", w, metrics)
	}
	if !strings.Contains(ts.logs.String(), "started with NO jobs") {
		t.Errorf("no loud log line; logs:\n%s", ts.logs.String())
	}
	ts.stop()

	// The next start reads the rewritten jobs.json: nothing to report.
	ts = startService(t, dir, nil)
	health = nil
	call(t, "GET", ts.url+"/health", "", &health)
	if diff := cmp.Diff(map[string]string{"status": "ok"}, health); diff != "" {
		t.Errorf("/health after a clean start (-want +got):\n%s", diff)
	}
}

// TestUnhandledTypeKept: a stored job of a type this binary has no handler
// for (a Go function job of a program sharing the store) is kept across a
// start, named by /health and the log, refused on create, and its run-now
// fails with the reason.
func TestUnhandledTypeKept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := `{"version":1,"updated_at":"","jobs":[
{"id":"rep","name":"report","enabled":true,"type":"report","args":{"team":"core"},"schedule":{"kind":"every","every":"1h","start_at":"2030-01-01T00:00:00Z"},"timeout":"1s","max_retries":0,"retry_backoff":"1s","last_run_at":"","next_run_at":"","last_status":"","last_error":""}]}`
	if err := os.WriteFile(filepath.Join(dir, "jobs.json"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := startService(t, dir, nil)
	var health map[string]string
	call(t, "GET", ts.url+"/health", "", &health)
	if diff := cmp.Diff(map[string]string{"status": "ok", "unhandled_types": "report: 1 job"}, health); diff != "" {
		t.Errorf("/health (-want +got):\n%s", diff)
	}
	if !strings.Contains(ts.logs.String(), "no handler for") || !strings.Contains(ts.logs.String(), "report: 1 job") {
		t.Errorf("the log does not name the unhandled type:\n%s", ts.logs.String())
	}
	if code := call(t, "POST", ts.url+"/jobs", `{"type":"report","schedule":{"kind":"every","every":"1h"}}`, nil); code != 400 {
		t.Errorf("create of an unhandled type: %d, want 400", code)
	}
	if code := call(t, "POST", ts.url+"/jobs/rep/run-now", "", nil); code != 202 {
		t.Fatalf("run-now: %d", code)
	}
	var j cron.Job
	waitFor(t, "the end of the run of rep", func() bool {
		j = cron.Job{}
		call(t, "GET", ts.url+"/jobs/rep", "", &j)
		return j.LastStatus != ""
	})
	if j.LastStatus != cron.StatusFailed || !strings.Contains(j.LastError, `no handler for type "report"`) {
		t.Errorf("after run-now: %q %q, want failed naming the missing handler", j.LastStatus, j.LastError)
	}
	ts.stop()
	data, err := os.ReadFile(filepath.Join(dir, "jobs.json"))
	if err != nil || !strings.Contains(string(data), `"type":"report","args":{"team":"core"}`) {
		t.Errorf("jobs.json after the stop lost the job: %v\n%s", err, data)
	}
}
