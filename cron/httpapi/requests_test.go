package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/cron"
)

// TestPatchSchedule: a schedule in a PATCH whose kind differs from the
// job's replaces the schedule whole; one of the same kind merges field by
// field, and a field the kind does not use is still refused.
func TestPatchSchedule(t *testing.T) {
	runAt := time.Date(2099, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name  string
		patch string
		want  cron.ScheduleSpec
	}{
		{"every to cron", `{"schedule":{"kind":"cron","cron":"*/5 * * * *"}}`,
			cron.ScheduleSpec{Kind: cron.KindCron, Cron: "*/5 * * * *"}},
		{"every to cron with tz", `{"schedule":{"kind":"cron","cron":"0 9 * * *","tz":"Europe/Berlin"}}`,
			cron.ScheduleSpec{Kind: cron.KindCron, Cron: "0 9 * * *", TZ: "Europe/Berlin"}},
		{"every to once", `{"schedule":{"kind":"once","run_at":"2099-01-02T03:04:05Z"}}`,
			cron.ScheduleSpec{Kind: cron.KindOnce, RunAt: runAt}},
		{"same kind merges", `{"schedule":{"kind":"every","every":"2h"}}`,
			cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(2 * time.Hour), Jitter: cron.Duration(5 * time.Second)}},
		{"no kind merges", `{"schedule":{"every":"3h"}}`,
			cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(3 * time.Hour), Jitter: cron.Duration(5 * time.Second)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Config{})
			if r := f.do(t, "POST", "/jobs", validJob, nil); r.status != 201 {
				t.Fatalf("create: %d %s", r.status, r.body)
			}
			r := f.do(t, "PATCH", "/jobs/fixed", tt.patch, nil)
			if r.status != 200 {
				t.Fatalf("PATCH %s: %d %s", tt.patch, r.status, r.body)
			}
			got := decodeJob(t, r.body).Schedule
			got.StartAt = time.Time{} // set by the runner for every-jobs
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PATCH %s: schedule (-want +got):\n%s", tt.patch, diff)
			}
			stored, err := f.runner.Get(context.Background(), "fixed")
			if err != nil {
				t.Fatal(err)
			}
			if stored.Schedule.Kind != tt.want.Kind {
				t.Errorf("stored kind %q, want %q", stored.Schedule.Kind, tt.want.Kind)
			}
		})
	}

	f := newFixture(t, Config{})
	if r := f.do(t, "POST", "/jobs", validJob, nil); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	r := f.do(t, "PATCH", "/jobs/fixed", `{"schedule":{"kind":"every","tz":"UTC"}}`, nil)
	if want := errBody("is not used by kind every (every takes every, and optionally start_at and jitter)", "schedule.tz"); r.status != 400 || r.body != want {
		t.Errorf("PATCH with a field the same kind does not use: %d %s, want 400 %s", r.status, r.body, want)
	}
	if got, _ := f.runner.Get(context.Background(), "fixed"); got.Schedule.Every.D() != time.Hour {
		t.Errorf("refused PATCH changed the job: every = %s", got.Schedule.Every)
	}
}

// TestOncePastRunAt: a once job whose run_at has passed would be recorded
// as missed and never run, so POST, and a PATCH that sends a schedule,
// refuse it naming schedule.run_at; a misfire_grace covering the delay
// lets it run, and a PATCH of other fields of such a job still works.
func TestOncePastRunAt(t *testing.T) {
	f := newFixture(t, Config{})
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	once := func(id, runAt, extra string) string {
		return `{"id":"` + id + `","http":{"url":"http://127.0.0.1:9/"},"schedule":{"kind":"once","run_at":"` + runAt + `"}` + extra + `}`
	}
	r := f.do(t, "POST", "/jobs", once("late", past, ""), nil)
	if r.status != 400 || !strings.Contains(r.body, `"field":"schedule.run_at"`) || !strings.Contains(r.body, "in the past") {
		t.Errorf("POST past once: %d %s, want 400 naming schedule.run_at", r.status, r.body)
	}
	if _, err := f.runner.Get(context.Background(), "late"); !errors.Is(err, cron.ErrNotFound) {
		t.Errorf("a refused job was stored: Get error %v", err)
	}
	if r := f.do(t, "POST", "/jobs", once("graced", past, `,"misfire_grace":"2h"`), nil); r.status != 201 {
		t.Errorf("POST past once within misfire_grace: %d %s, want 201", r.status, r.body)
	}
	if r := f.do(t, "POST", "/jobs", once("soon", future, ""), nil); r.status != 201 {
		t.Fatalf("POST future once: %d %s", r.status, r.body)
	}
	r = f.do(t, "PATCH", "/jobs/soon", `{"schedule":{"run_at":"`+past+`"}}`, nil)
	if r.status != 400 || !strings.Contains(r.body, `"field":"schedule.run_at"`) {
		t.Errorf("PATCH run_at into the past: %d %s, want 400 naming schedule.run_at", r.status, r.body)
	}
	// A once job whose time has come and gone can still be renamed.
	if _, err := f.runner.Update(context.Background(), "soon", func(j *cron.Job) error {
		j.Schedule.RunAt = time.Now().Add(-time.Hour)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if r := f.do(t, "PATCH", "/jobs/soon", `{"name":"renamed"}`, nil); r.status != 200 {
		t.Errorf("PATCH name of a past once job: %d %s, want 200", r.status, r.body)
	}
}

// TestRunsQuery: GET /jobs/{id}/runs filters by status among the runs
// kept, applies limit after the filter, and refuses an unknown, repeated
// or bad parameter with 400 naming it, as GET /jobs does.
func TestRunsQuery(t *testing.T) {
	var n atomic.Int64
	exec := cron.ExecutorFunc(func(ctx context.Context, j *cron.Job, info cron.RunInfo) cron.Result {
		if n.Add(1)%2 == 0 {
			return cron.Result{Status: cron.StatusFailed, Attempts: 1, HTTPStatus: 500, Error: "boom"}
		}
		return cron.Result{Status: cron.StatusSuccess, Attempts: 1, HTTPStatus: 200}
	})
	r, err := cron.New(cron.NewMemStore(), exec, cron.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	api, err := New(r, Config{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{runner: r, srv: httptest.NewServer(api)}
	defer f.srv.Close()
	if res := f.do(t, "POST", "/jobs", validJob, nil); res.status != 201 {
		t.Fatalf("create: %d %s", res.status, res.body)
	}
	const total = 6
	for i := 0; i < total; i++ {
		if res := f.do(t, "POST", "/jobs/fixed/run-now", "", nil); res.status != 202 {
			t.Fatalf("run-now: %d %s", res.status, res.body)
		}
		// One at a time, so that each run is recorded, not skipped.
		deadline := time.Now().Add(10 * time.Second)
		for {
			runs, _ := r.Runs(ctx, "fixed", 0)
			if len(runs) == i+1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %d not recorded: %d runs", i+1, len(runs))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	count := func(path string) (map[cron.Status]int, int) {
		t.Helper()
		res := f.do(t, "GET", path, "", nil)
		if res.status != 200 {
			t.Fatalf("GET %s: %d %s", path, res.status, res.body)
		}
		var runs []cron.Run
		if err := json.Unmarshal([]byte(res.body), &runs); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		got := map[cron.Status]int{}
		for _, r := range runs {
			got[r.Status]++
		}
		return got, len(runs)
	}
	for _, tt := range []struct {
		path string
		want map[cron.Status]int
	}{
		{"/jobs/fixed/runs", map[cron.Status]int{cron.StatusSuccess: 3, cron.StatusFailed: 3}},
		{"/jobs/fixed/runs?status=failed", map[cron.Status]int{cron.StatusFailed: 3}},
		{"/jobs/fixed/runs?status=success&limit=2", map[cron.Status]int{cron.StatusSuccess: 2}},
		{"/jobs/fixed/runs?status=timeout", map[cron.Status]int{}},
		{"/jobs/fixed/runs?limit=1", nil},
	} {
		got, total := count(tt.path)
		if tt.want == nil {
			if total != 1 {
				t.Errorf("GET %s: %d runs, want 1", tt.path, total)
			}
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("GET %s: statuses (-want +got):\n%s", tt.path, diff)
		}
	}
	for _, tt := range []struct{ path, field, msg string }{
		{"/jobs/fixed/runs?foo=bar", "foo", "unknown query parameter; GET /jobs/{id}/runs takes limit, status"},
		{"/jobs/fixed/runs?status=paused", "status", `must be success, failed, timeout, skipped or missed, got "paused"`},
		{"/jobs/fixed/runs?limit=0", "limit", `must be a positive integer, got "0"`},
		{"/jobs/fixed/runs?limit=1&limit=2", "limit", "is given 2 times; give it once"},
	} {
		res := f.do(t, "GET", tt.path, "", nil)
		if want := errBody(tt.msg, tt.field); res.status != 400 || res.body != want {
			t.Errorf("GET %s: %d %s, want 400 %s", tt.path, res.status, res.body, want)
		}
	}
}

// TestLargeBodyGets413: a body far above MaxBodyBytes, sent whole by a
// client that reads the answer only once it has sent the body, gets the
// 413, not a connection reset: the server reads on (up to a bound) before
// it answers and closes.
func TestLargeBodyGets413(t *testing.T) {
	f := newFixture(t, Config{})
	const size = 5 << 20
	body := strings.Repeat("x", size)
	for i := range 2 {
		conn, err := net.Dial("tcp", f.srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		head := fmt.Sprintf("POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size)
		if _, err := io.WriteString(conn, head+body); err != nil {
			conn.Close()
			t.Fatalf("request %d: writing the body: %v, want the server to read it", i, err)
		}
		// A slow reader: the server closing with the rest of the body
		// unread would have reset the connection by now, and the 413
		// waiting in the socket would be lost with it.
		time.Sleep(time.Second)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			conn.Close()
			t.Fatalf("request %d: %v, want a 413", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		conn.Close()
		if want := errBody("body larger than 1048576 bytes", ""); resp.StatusCode != 413 || string(b) != want {
			t.Fatalf("request %d: %d %s, want 413 %s", i, resp.StatusCode, b, want)
		}
	}
}

// TestHealthNotes: the notes join {"status":"ok"} with their JSON types:
// a count is a number, not a string; they cannot override status.
func TestHealthNotes(t *testing.T) {
	f := newFixture(t, Config{Token: "s3cret-token-0001", HealthNotes: func() map[string]any {
		return map[string]any{"jobs_held": 3, "store": "postgres", "status": "bad"}
	}})
	r := f.do(t, "GET", "/health", "", nil)
	if want := `{"jobs_held":3,"status":"ok","store":"postgres"}` + "\n"; r.status != 200 || r.body != want {
		t.Errorf("GET /health: %d %s, want 200 %s", r.status, r.body, want)
	}
}
