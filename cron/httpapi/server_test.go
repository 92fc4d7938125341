package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/cron"
)

type fixture struct {
	runner *cron.Runner
	api    *Server
	srv    *httptest.Server
	calls  atomic.Int64
}

// newFixture serves the API of a running runner over a MemStore whose
// executor answers success at once.
func newFixture(t testing.TB, cfg Config) *fixture {
	t.Helper()
	return newFixtureWith(t, cfg, cron.Config{})
}

// newFixtureWith is newFixture with the runner's configuration ccfg.
func newFixtureWith(t testing.TB, cfg Config, ccfg cron.Config) *fixture {
	t.Helper()
	f := &fixture{}
	exec := cron.ExecutorFunc(func(ctx context.Context, j *cron.Job, info cron.RunInfo) cron.Result {
		f.calls.Add(1)
		return cron.Result{Status: cron.StatusSuccess, Attempts: 1, HTTPStatus: 200}
	})
	r, err := cron.New(cron.NewMemStore(), exec, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	api, err := New(r, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.runner, f.api = r, api
	f.srv = httptest.NewServer(api)
	t.Cleanup(f.srv.Close)
	return f
}

type response struct {
	status int
	header http.Header
	body   string
}

func (f *fixture) do(t *testing.T, method, path, body string, header map[string]string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if method != "GET" && method != "HEAD" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, string(b)}
}

func decodeJob(t *testing.T, body string) cron.Job {
	t.Helper()
	var j cron.Job
	if err := json.Unmarshal([]byte(body), &j); err != nil {
		t.Fatalf("response is not a job: %v\n%s", err, body)
	}
	return j
}

const validJob = `{"id":"fixed","name":"ping","http":{"method":"POST","url":"http://127.0.0.1:9/hook","headers":{"X-A":"1"},"body":"{}"},
 "schedule":{"kind":"every","every":"1h","jitter":"5s"},"timeout":"3s","retry_backoff":"1s"}`

func errBody(msg, field string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(errorBody{Error: msg, Field: field})
	return b.String()
}

// TestRejected: every refused request answers the documented status and
// error body, and changes nothing.
func TestRejected(t *testing.T) {
	f := newFixture(t, Config{MaxBodyBytes: 4096})
	if r := f.do(t, "POST", "/jobs", validJob, nil); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	huge := `{"name":"` + strings.Repeat("x", 5000) + `"}`
	tests := []struct {
		name         string
		method, path string
		body         string
		header       map[string]string
		wantStatus   int
		wantBody     string
		wantAllow    string
	}{
		{"malformed", "POST", "/jobs", `{"name":`, nil, 400, errBody("malformed JSON: unexpected EOF", ""), ""},
		{"not an object", "POST", "/jobs", `[1]`, nil, 400, errBody("body must be a JSON object", ""), ""},
		{"null", "POST", "/jobs", `null`, nil, 400, errBody("body must be a JSON object", ""), ""},
		{"trailing data", "POST", "/jobs", `{} {}`, nil, 400, errBody("malformed JSON: data after the object", ""), ""},
		{"unknown field", "POST", "/jobs", `{"name":"a","colour":"red"}`, nil, 400, errBody("unknown field", "colour"), ""},
		{"system field", "POST", "/jobs", `{"name":"a","next_run_at":"2026-01-01T00:00:00Z"}`, nil, 400,
			errBody("is a system field, maintained by the service; it cannot be set", "next_run_at"), ""},
		{"system field on patch", "PATCH", "/jobs/fixed", `{"last_status":"success"}`, nil, 400,
			errBody("is a system field, maintained by the service; it cannot be set", "last_status"), ""},
		{"bad duration", "POST", "/jobs", `{"timeout":"soon"}`, nil, 400,
			errBody(`must be a duration such as "5s" or "1m30s", got "soon"`, "timeout"), ""},
		{"duration not a string", "POST", "/jobs", `{"retry_backoff":5}`, nil, 400,
			errBody(`must be a duration string such as "5s", got 5`, "retry_backoff"), ""},
		{"wrong type", "POST", "/jobs", `{"max_retries":"3"}`, nil, 400, errBody(`must be an integer, got "3"`, "max_retries"), ""},
		{"enabled null", "POST", "/jobs", `{"enabled":null}`, nil, 400, errBody(`must be true or false, got null`, "enabled"), ""},
		{"bad every", "POST", "/jobs", `{"http":{"url":"http://h/"},"schedule":{"kind":"every","every":"often"}}`, nil, 400,
			errBody(`must be a duration such as "5m", got "often"`, "schedule.every"), ""},
		{"unknown schedule field", "POST", "/jobs", `{"schedule":{"kind":"every","evry":"1m"}}`, nil, 400, errBody("unknown field", "schedule.evry"), ""},
		{"headers wrong type", "POST", "/jobs", `{"http":{"url":"http://h/","headers":{"a":1}}}`, nil, 400, errBody("must be a string", "http.headers"), ""},
		{"http not an object", "POST", "/jobs", `{"http":"http://h/"}`, nil, 400, errBody(`must be an object, got "http://h/"`, "http"), ""},
		{"bad run_at", "POST", "/jobs", `{"schedule":{"kind":"once","run_at":"tomorrow"}}`, nil, 400,
			errBody(`must be an RFC3339 time such as "2026-01-02T15:04:05Z", got "tomorrow"`, "schedule.run_at"), ""},
		{"validation: no url", "POST", "/jobs", `{"schedule":{"kind":"every","every":"1m"}}`, nil, 400, errBody("is required", "http.url"), ""},
		{"validation: kind", "POST", "/jobs", `{"http":{"url":"http://h/"},"schedule":{"kind":"sometimes"}}`, nil, 400,
			errBody(`must be once, every or cron, got "sometimes"`, "schedule.kind"), ""},
		{"validation: negative retries", "POST", "/jobs", `{"http":{"url":"http://h/"},"schedule":{"kind":"every","every":"1m"},"max_retries":-1}`, nil, 400,
			errBody("must be >= 0, got -1", "max_retries"), ""},
		{"validation: port", "POST", "/jobs", `{"http":{"url":"http://127.0.0.1:99999/"},"schedule":{"kind":"every","every":"1m"}}`, nil, 400,
			errBody(`port must be a number from 1 to 65535, got "99999"`, "http.url"), ""},
		{"validation: header name", "POST", "/jobs", `{"http":{"url":"http://h/","headers":{"Bad Name":"x"}},"schedule":{"kind":"every","every":"1m"}}`, nil, 400,
			errBody(`header name "Bad Name" holds " ", which a header name cannot`, "http.headers"), ""},
		{"validation: header value", "POST", "/jobs", `{"http":{"url":"http://h/","headers":{"X-A":"1\r\nX-B: 2"}},"schedule":{"kind":"every","every":"1m"}}`, nil, 400,
			errBody(`the value of header "X-A" holds the control character "\r"`, "http.headers"), ""},
		{"validation: Content-Length", "PATCH", "/jobs/fixed", `{"http":{"url":"http://h/","headers":{"Content-Length":"5"}}}`, nil, 400,
			errBody(`header "Content-Length" is set by the client from the body; remove it`, "http.headers"), ""},
		{"validation: placeholder", "POST", "/jobs", `{"http":{"url":"http://h/","body":"{{unknown}}"},"schedule":{"kind":"every","every":"1m"}}`, nil, 400,
			errBody(`unknown placeholder {{unknown}}; the placeholders are {{job_id}}, {{run_id}}, {{scheduled_at}} and {{triggered_at}}`, "http.body"), ""},
		{"validation: every too short", "POST", "/jobs", `{"http":{"url":"http://h/"},"schedule":{"kind":"every","every":"1ms"}}`, nil, 400,
			errBody("must be at least 1s, got 1ms", "schedule.every"), ""},
		{"validation: field of another kind", "POST", "/jobs", `{"http":{"url":"http://h/"},"schedule":{"kind":"every","every":"1h","tz":"Asia/Tokyo"}}`, nil, 400,
			errBody("is not used by kind every (every takes every, and optionally start_at and jitter)", "schedule.tz"), ""},
		{"validation on patch", "PATCH", "/jobs/fixed", `{"schedule":{"kind":"every","every":"0s"}}`, nil, 400, errBody("must be > 0, got 0s", "schedule.every"), ""},
		{"patch unknown nested field", "PATCH", "/jobs/fixed", `{"http":{"urll":"http://h/"}}`, nil, 400, errBody("unknown field", "http.urll"), ""},
		{"patch wrong type", "PATCH", "/jobs/fixed", `{"timeout":5}`, nil, 400, errBody(`must be a duration string such as "5s", got 5`, "timeout"), ""},
		{"patch unknown field", "PATCH", "/jobs/fixed", `{"colour":null}`, nil, 400, errBody("unknown field", "colour"), ""},
		{"patch id null", "PATCH", "/jobs/fixed", `{"id":null}`, nil, 400, errBody(`cannot be changed (the path names job "fixed")`, "id"), ""},
		{"patch not an object", "PATCH", "/jobs/fixed", `[1]`, nil, 400, errBody("body must be a JSON object", ""), ""},
		{"patch changes id", "PATCH", "/jobs/fixed", `{"id":"other"}`, nil, 400, errBody(`cannot be changed (the path names job "fixed")`, "id"), ""},
		{"duplicate id", "POST", "/jobs", validJob, nil, 409, errBody(`a job with id "fixed" already exists`, "id"), ""},
		{"too large", "POST", "/jobs", huge, nil, 413, errBody("body larger than 4096 bytes", ""), ""},
		{"not JSON", "POST", "/jobs", `name=a`, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415,
			errBody(`Content-Type "application/x-www-form-urlencoded" is not JSON: send application/json`, ""), ""},
		{"empty body", "POST", "/jobs", "", nil, 400, errBody("empty body: a JSON object is required", ""), ""},
		{"unknown id", "GET", "/jobs/nope", "", nil, 404, errBody(`job "nope" not found`, ""), ""},
		{"unknown id patch", "PATCH", "/jobs/nope", `{"name":"x"}`, nil, 404, errBody(`job "nope" not found`, ""), ""},
		{"unknown id delete", "DELETE", "/jobs/nope", "", nil, 404, errBody(`job "nope" not found`, ""), ""},
		{"unknown id run-now", "POST", "/jobs/nope/run-now", "", nil, 404, errBody(`job "nope" not found`, ""), ""},
		{"unknown id pause", "POST", "/jobs/nope/pause", "", nil, 404, errBody(`job "nope" not found`, ""), ""},
		{"unknown id runs", "GET", "/jobs/nope/runs", "", nil, 404, errBody(`job "nope" not found`, ""), ""},
		{"unknown path", "GET", "/jobz", "", nil, 404, errBody("no such endpoint: /jobz", ""), ""},
		{"unknown action", "POST", "/jobs/fixed/explode", "", nil, 404, errBody("no such endpoint: /jobs/fixed/explode", ""), ""},
		{"empty segment", "POST", "/jobs//run-now", "", nil, 404, errBody("no such endpoint: /jobs//run-now", ""), ""},
		{"dot segments", "POST", "/jobs/x/../fixed/pause", "", nil, 404, errBody("no such endpoint: /jobs/x/../fixed/pause", ""), ""},
		{"trailing slash", "GET", "/jobs/fixed/", "", nil, 404, errBody("no such endpoint: /jobs/fixed/", ""), ""},
		{"no id", "GET", "/jobs/", "", nil, 404, errBody("no such endpoint: /jobs/", ""), ""},
		{"bad runs limit", "GET", "/jobs/fixed/runs?limit=-2", "", nil, 400, errBody(`must be a positive integer, got "-2"`, "limit"), ""},
		{"action with a body", "POST", "/jobs/fixed/resume", `{"enabled":false}`, nil, 400, errBody("this action takes no body", ""), ""},
		{"pause with a field of no pause", "POST", "/jobs/fixed/pause", `{"enabled":false}`, nil, 400, errBody("unknown field; the body takes until", "enabled"), ""},
		{"pause until not a time", "POST", "/jobs/fixed/pause", `{"until":"tomorrow"}`, nil, 400, errBody(`must be an RFC3339 time such as 2026-12-01T00:00:00Z, got "tomorrow"`, "until"), ""},
		{"pause until twice", "POST", "/jobs/fixed/pause?until=2100-01-01T00:00:00Z", `{"until":"2100-01-02T00:00:00Z"}`, nil, 400, errBody(`is given in the query ("2100-01-01T00:00:00Z") and in the body ("2100-01-02T00:00:00Z"); give it once`, "until"), ""},
		{"paused_until on a patch", "PATCH", "/jobs/fixed", `{"paused_until":"2100-01-01T00:00:00Z"}`, nil, 400, errBody("is a system field, maintained by the service; it cannot be set", "paused_until"), ""},
		{"paused_at on a patch", "PATCH", "/jobs/fixed", `{"paused_at":"2000-01-01T00:00:00Z"}`, nil, 400, errBody("is a system field, maintained by the service; it cannot be set", "paused_at"), ""},
		{"paused_at on a create", "POST", "/jobs", `{"id":"pa","http":{"url":"http://127.0.0.1:9/"},"schedule":{"kind":"every","every":"1h"},"enabled":false,"paused_at":"2000-01-01T00:00:00Z"}`, nil, 400, errBody("is a system field, maintained by the service; it cannot be set", "paused_at"), ""},
		{"405 jobs", "PUT", "/jobs", "", nil, 405, errBody("method PUT not allowed on /jobs; allowed: GET, POST", ""), "GET, POST"},
		{"405 job", "POST", "/jobs/fixed", "", nil, 405, errBody("method POST not allowed on /jobs/{id}; allowed: GET, PATCH, DELETE", ""), "GET, PATCH, DELETE"},
		{"405 action", "GET", "/jobs/fixed/run-now", "", nil, 405, errBody("method GET not allowed on /jobs/{id}/run-now; allowed: POST", ""), "POST"},
		{"405 health", "POST", "/health", "", nil, 405, errBody("method POST not allowed on /health; allowed: GET, HEAD", ""), "GET, HEAD"},
		{"no metrics", "GET", "/metrics", "", nil, 404, errBody("metrics are not enabled", ""), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := listJobs(t, f.runner)
			r := f.do(t, tt.method, tt.path, tt.body, tt.header)
			if r.status != tt.wantStatus {
				t.Errorf("%s %s: status %d, want %d (%s)", tt.method, tt.path, r.status, tt.wantStatus, r.body)
			}
			if diff := cmp.Diff(tt.wantBody, r.body); diff != "" {
				t.Errorf("%s %s: body (-want +got):\n%s", tt.method, tt.path, diff)
			}
			if got := r.header.Get("Allow"); got != tt.wantAllow {
				t.Errorf("Allow = %q, want %q", got, tt.wantAllow)
			}
			if got := r.header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", got)
			}
			if diff := cmp.Diff(before, listJobs(t, f.runner)); diff != "" {
				t.Errorf("a rejected request changed the jobs (-before +after):\n%s", diff)
			}
		})
	}
}

var hexID = regexp.MustCompile(`^[0-9a-f]{32}$`)

func TestLifecycle(t *testing.T) {
	f := newFixture(t, Config{})
	// Create: defaults, generated id.
	r := f.do(t, "POST", "/jobs", `{"name":"a","http":{"url":"http://127.0.0.1:9/"},"schedule":{"kind":"every","every":"1h"}}`, nil)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	j := decodeJob(t, r.body)
	if !hexID.MatchString(j.ID) {
		t.Errorf("generated id %q is not 128 bits of hex", j.ID)
	}
	if got, want := r.header.Get("Location"), "/jobs/"+j.ID; got != want {
		t.Errorf("Location = %q, want %q", got, want)
	}
	wantDefaults := struct {
		Enabled    bool
		MaxRetries int
		Method     string
		Timeout    time.Duration
		Backoff    time.Duration
	}{true, 3, "GET", 10 * time.Second, 5 * time.Second}
	gotDefaults := wantDefaults
	gotDefaults.Enabled, gotDefaults.MaxRetries, gotDefaults.Method = !j.Paused, j.MaxRetries, j.HTTP.Method
	gotDefaults.Timeout, gotDefaults.Backoff = j.Timeout.D(), j.RetryBackoff.D()
	if diff := cmp.Diff(wantDefaults, gotDefaults); diff != "" {
		t.Errorf("defaults of a created job (-want +got):\n%s", diff)
	}
	if j.NextRunAt.IsZero() {
		t.Errorf("next_run_at not set on create")
	}
	// An explicit 0 means no retries.
	r = f.do(t, "POST", "/jobs", `{"id":"zero","http":{"url":"http://127.0.0.1:9/"},"schedule":{"kind":"every","every":"1h"},"max_retries":0}`, nil)
	if got := decodeJob(t, r.body).MaxRetries; r.status != 201 || got != 0 {
		t.Errorf("explicit max_retries 0: status %d, max_retries %d, want 201 and 0", r.status, got)
	}
	// Fixed id.
	r = f.do(t, "POST", "/jobs", validJob, nil)
	if r.status != 201 {
		t.Fatalf("create fixed: %d %s", r.status, r.body)
	}
	fixed := decodeJob(t, r.body)

	// GET one and list in creation order.
	if r = f.do(t, "GET", "/jobs/fixed", "", nil); r.status != 200 {
		t.Fatalf("get: %d %s", r.status, r.body)
	}
	if diff := cmp.Diff(fixed, decodeJob(t, r.body)); diff != "" {
		t.Errorf("GET /jobs/fixed (-created +got):\n%s", diff)
	}
	r = f.do(t, "GET", "/jobs", "", nil)
	var list []cron.Job
	if err := json.Unmarshal([]byte(r.body), &list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, x := range list {
		ids = append(ids, x.ID)
	}
	if diff := cmp.Diff([]string{j.ID, "zero", "fixed"}, ids); diff != "" {
		t.Errorf("GET /jobs order (-want +got):\n%s", diff)
	}

	// PATCH: only the fields present change.
	r = f.do(t, "PATCH", "/jobs/fixed", `{"name":"renamed","max_retries":7}`, nil)
	if r.status != 200 {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	want := fixed
	want.Name, want.MaxRetries = "renamed", 7
	if diff := cmp.Diff(want, decodeJob(t, r.body)); diff != "" {
		t.Errorf("after PATCH name, max_retries (-want +got):\n%s", diff)
	}
	// PATCH is a JSON merge patch at every depth: the schedule's jitter and
	// the headers stay, a null removes a field (the header X-A, the body),
	// and a removed field takes its default (the method).
	r = f.do(t, "PATCH", "/jobs/fixed", `{"schedule":{"every":"2h"},"http":{"url":"http://127.0.0.1:9/other","headers":{"X-B":"2"},"body":null}}`, nil)
	if r.status != 200 {
		t.Fatalf("patch schedule: %d %s", r.status, r.body)
	}
	got := decodeJob(t, r.body)
	wantHTTP := cron.HTTPConfig{Method: "POST", URL: "http://127.0.0.1:9/other", Headers: map[string]string{"X-A": "1", "X-B": "2"}}
	if diff := cmp.Diff(wantHTTP, got.HTTP); diff != "" {
		t.Errorf("http after a merge patch (-want +got):\n%s", diff)
	}
	if got.Schedule.Jitter.D() != 5*time.Second || got.Schedule.Every.D() != 2*time.Hour || !got.Schedule.StartAt.Equal(fixed.Schedule.StartAt) {
		t.Errorf("schedule after a merge patch = %+v, want every 2h, the jitter and start_at kept", got.Schedule)
	}
	r = f.do(t, "PATCH", "/jobs/fixed", `{"http":{"method":null,"headers":{"X-A":null}},"timeout":null}`, nil)
	got = decodeJob(t, r.body)
	if r.status != 200 || got.HTTP.Method != "GET" || !cmp.Equal(got.HTTP.Headers, map[string]string{"X-B": "2"}) || got.Timeout.D() != 10*time.Second {
		t.Errorf("after nulls: %d method %q headers %v timeout %s; want GET, only X-B, the default 10s", r.status, got.HTTP.Method, got.HTTP.Headers, got.Timeout)
	}
	if got.Name != "renamed" || got.MaxRetries != 7 {
		t.Errorf("fields absent from the PATCH changed: name %q max_retries %d", got.Name, got.MaxRetries)
	}
	// Switching the kind replaces the schedule (TestPatchSchedule); nulls
	// of the old kind's fields are accepted too.
	r = f.do(t, "PATCH", "/jobs/fixed", `{"schedule":{"kind":"cron","cron":"0 9 * * *","every":null,"jitter":null,"start_at":null}}`, nil)
	if got = decodeJob(t, r.body); r.status != 200 || got.Schedule != (cron.ScheduleSpec{Kind: cron.KindCron, Cron: "0 9 * * *"}) {
		t.Errorf("kind switch: %d %s", r.status, r.body)
	}

	// run-now: 202, a run id, next_run_at unchanged, the run recorded.
	before := decodeJob(t, f.do(t, "GET", "/jobs/fixed", "", nil).body)
	r = f.do(t, "POST", "/jobs/fixed/run-now", "", nil)
	var rn struct {
		RunID string `json:"run_id"`
		JobID string `json:"job_id"`
	}
	if err := json.Unmarshal([]byte(r.body), &rn); err != nil || r.status != 202 || !hexID.MatchString(rn.RunID) || rn.JobID != "fixed" {
		t.Fatalf("run-now: %d %s", r.status, r.body)
	}
	var runs []cron.Run
	deadline := time.Now().Add(10 * time.Second)
	for len(runs) == 0 && time.Now().Before(deadline) {
		r = f.do(t, "GET", "/jobs/fixed/runs", "", nil)
		if err := json.Unmarshal([]byte(r.body), &runs); err != nil {
			t.Fatalf("runs: %v %s", err, r.body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(runs) != 1 || runs[0].ID != rn.RunID || runs[0].Status != cron.StatusSuccess {
		t.Fatalf("runs after run-now = %+v, want the run %s, success", runs, rn.RunID)
	}
	after := decodeJob(t, f.do(t, "GET", "/jobs/fixed", "", nil).body)
	if !after.NextRunAt.Equal(before.NextRunAt) {
		t.Errorf("run-now moved next_run_at from %v to %v", before.NextRunAt, after.NextRunAt)
	}

	// pause and resume.
	r = f.do(t, "POST", "/jobs/fixed/pause", "", nil)
	if p := decodeJob(t, r.body); r.status != 200 || !p.Paused || p.LastStatus != cron.StatusPaused || !p.NextRunAt.IsZero() {
		t.Errorf("pause: %d enabled=%v status=%q next=%v", r.status, !p.Paused, p.LastStatus, p.NextRunAt)
	}
	r = f.do(t, "POST", "/jobs/fixed/resume", "", nil)
	if p := decodeJob(t, r.body); r.status != 200 || p.Paused || p.NextRunAt.IsZero() {
		t.Errorf("resume: %d enabled=%v next=%v", r.status, !p.Paused, p.NextRunAt)
	}

	// delete.
	if r = f.do(t, "DELETE", "/jobs/fixed", "", nil); r.status != 204 || r.body != "" {
		t.Errorf("delete: %d %q, want 204 and no body", r.status, r.body)
	}
	if r = f.do(t, "GET", "/jobs/fixed", "", nil); r.status != 404 {
		t.Errorf("get after delete: %d, want 404", r.status)
	}
	if r = f.do(t, "GET", "/health", "", nil); r.status != 200 {
		t.Errorf("health: %d", r.status)
	}
}

func TestDefaultMaxRetries(t *testing.T) {
	tests := []struct {
		cfg  int
		want int
	}{{0, 3}, {5, 5}, {-1, 0}}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.cfg), func(t *testing.T) {
			f := newFixture(t, Config{DefaultMaxRetries: tt.cfg})
			r := f.do(t, "POST", "/jobs", `{"http":{"url":"http://h/"},"schedule":{"kind":"every","every":"1h"}}`, nil)
			if got := decodeJob(t, r.body).MaxRetries; got != tt.want {
				t.Errorf("DefaultMaxRetries %d: created job has max_retries %d, want %d", tt.cfg, got, tt.want)
			}
		})
	}
}

func TestToken(t *testing.T) {
	f := newFixture(t, Config{Token: "s3cret-token-0001"})
	tests := []struct {
		path, auth string
		want       int
	}{
		{"/jobs", "", 401},
		{"/jobs", "Bearer wrong", 401},
		{"/jobs", "Basic czNjcmV0", 401},
		{"/jobs", "Bearer s3cret-token-0001", 200},
		{"/jobs/nope", "", 401},
		{"/jobs/nope", "Bearer s3cret-token-0001", 404},
		{"/health", "", 200},
		{"/openapi.json", "", 401},
		{"/openapi.json", "Bearer s3cret-token-0001", 200},
	}
	for _, tt := range tests {
		r := f.do(t, "GET", tt.path, "", map[string]string{"Authorization": tt.auth})
		if r.status != tt.want {
			t.Errorf("GET %s with %q: %d, want %d", tt.path, tt.auth, r.status, tt.want)
		}
		if want := `{"error":"missing or wrong bearer token (Authorization: Bearer <token>)"}` + "\n"; tt.want == 401 && r.body != want {
			t.Errorf("GET %s with %q: body %s, want %s", tt.path, tt.auth, r.body, want)
		}
		if tt.want == 401 && r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("401 without WWW-Authenticate")
		}
	}
}

// TestBlankToken: a token no client could send, or shorter than
// MinTokenLen, is refused.
func TestBlankToken(t *testing.T) {
	r, err := cron.New(nil, cron.ExecutorFunc(func(context.Context, *cron.Job, cron.RunInfo) cron.Result { return cron.Result{} }), cron.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{" ", "\t", " s3cret", "s3cret\n", "s3cret-token-001"[:MinTokenLen-1]} {
		if _, err := New(r, Config{Token: tok}); err == nil || !strings.Contains(err.Error(), "Config.Token") {
			t.Errorf("New(Token %q) error = %v, want one naming Config.Token", tok, err)
		}
	}
	if _, err := New(r, Config{Token: "s3cret"}); err == nil || !strings.Contains(err.Error(), "at least 16 bytes") {
		t.Errorf("New(Token of 6 bytes) error = %v, want one naming the minimum", err)
	}
	if _, err := New(r, Config{Token: "s3cret-token-001"}); err != nil {
		t.Errorf("New(Token of %d bytes): %v", MinTokenLen, err)
	}
}

func TestCallbackAllow(t *testing.T) {
	f := newFixture(t, Config{CallbackAllow: []string{"*.internal", "API.example.com"}})
	tests := []struct {
		url  string
		want int
	}{
		{"http://svc.internal/x", 201},
		{"http://a.b.internal:8080/x", 201},
		{"https://api.example.com/hook", 201},
		{"http://internal/x", 400},
		{"http://evil.com/x", 400},
		{"http://api.example.com.evil.com/", 400},
		{"http://xinternal/", 400},
	}
	for _, tt := range tests {
		r := f.do(t, "POST", "/jobs", fmt.Sprintf(`{"http":{"url":%q},"schedule":{"kind":"every","every":"1h"}}`, tt.url), nil)
		if r.status != tt.want {
			t.Errorf("create with url %s: %d %s, want %d", tt.url, r.status, r.body, tt.want)
		}
		if tt.want == 400 && !strings.Contains(r.body, `"field":"http.url"`) {
			t.Errorf("refusal of %s does not name http.url: %s", tt.url, r.body)
		}
	}
	// A PATCH to a host outside the list is refused too.
	r := f.do(t, "POST", "/jobs", `{"id":"p","http":{"url":"http://svc.internal/"},"schedule":{"kind":"every","every":"1h"}}`, nil)
	if r.status != 201 {
		t.Fatal(r.body)
	}
	if r = f.do(t, "PATCH", "/jobs/p", `{"http":{"url":"http://evil.com/"}}`, nil); r.status != 400 {
		t.Errorf("PATCH to a refused host: %d, want 400", r.status)
	}
	// The alert webhook is held to the list as the callback is, on a
	// create and on a PATCH.
	r = f.do(t, "POST", "/jobs", `{"http":{"url":"http://svc.internal/"},"schedule":{"kind":"every","every":"1h"},"alert":{"url":"http://169.254.169.254/"}}`, nil)
	if r.status != 400 || !strings.Contains(r.body, `"field":"alert.url"`) {
		t.Errorf("create with an alert outside the list: %d %s, want 400 naming alert.url", r.status, r.body)
	}
	if r = f.do(t, "PATCH", "/jobs/p", `{"alert":{"url":"http://evil.com/hook"}}`, nil); r.status != 400 || !strings.Contains(r.body, `"field":"alert.url"`) {
		t.Errorf("PATCH to an alert outside the list: %d %s, want 400 naming alert.url", r.status, r.body)
	}
	if r = f.do(t, "PATCH", "/jobs/p", `{"alert":{"url":"http://hooks.internal/x"}}`, nil); r.status != 200 {
		t.Errorf("PATCH to an alert inside the list: %d %s, want 200", r.status, r.body)
	}
}

// TestConcurrentPatches sends PATCHes of different fields of one job at
// the same time: each must keep the others' changes.
func TestConcurrentPatches(t *testing.T) {
	f := newFixture(t, Config{})
	if r := f.do(t, "POST", "/jobs", `{"id":"c","http":{"url":"http://svc.internal/"},"schedule":{"kind":"every","every":"1h"}}`, nil); r.status != 201 {
		t.Fatal(r.body)
	}
	patches := []string{`{"name":"renamed"}`, `{"timeout":"7s"}`, `{"max_retries":9}`, `{"retry_backoff":"2s"}`,
		`{"http":{"method":"POST","url":"http://svc.internal/x"}}`, `{"misfire_grace":"1m"}`}
	var wg sync.WaitGroup
	for _, body := range patches {
		wg.Go(func() {
			if r := f.do(t, "PATCH", "/jobs/c", body, nil); r.status != 200 {
				t.Errorf("PATCH %s: %d %s", body, r.status, r.body)
			}
		})
	}
	wg.Wait()
	got := decodeJob(t, f.do(t, "GET", "/jobs/c", "", nil).body)
	type fields struct {
		Name, Method, URL    string
		Timeout, Backoff, Gr cron.Duration
		Retries              int
	}
	want := fields{"renamed", "POST", "http://svc.internal/x", cron.Duration(7 * time.Second), cron.Duration(2 * time.Second), cron.Duration(time.Minute), 9}
	if diff := cmp.Diff(want, fields{got.Name, got.HTTP.Method, got.HTTP.URL, got.Timeout, got.RetryBackoff, got.MisfireGrace, got.MaxRetries}); diff != "" {
		t.Errorf("after concurrent PATCHes (-want +got):\n%s", diff)
	}
}

func TestParseAllowList(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"", nil, false},
		{" *.internal , API.example.com,", []string{"*.internal", "api.example.com"}, false},
		{"*", []string{"*"}, false},
		{"http://x.com", nil, true},
		{"x.com:80", nil, true},
		{"a.*.com", nil, true},
		{"*.", nil, true},
		{"api.example.com.,*.Internal.", []string{"api.example.com", "*.internal"}, false}, // the trailing dot a host may carry
		{".", nil, true},
		{"*..", nil, true},
		{"a..b", nil, true},
		{".a", nil, true},
	}
	for _, tt := range tests {
		got, err := ParseAllowList(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseAllowList(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" && !tt.wantErr {
			t.Errorf("ParseAllowList(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
	for _, host := range []string{"api.example.com", "api.example.com.", "x.internal."} {
		if !HostAllowed([]string{"api.example.com.", "*.internal."}, host) {
			t.Errorf("patterns with a trailing dot do not allow %q", host)
		}
	}
	if HostAllowed([]string{"*."}, "x.com") {
		t.Error("the pattern *. allows x.com")
	}
	if _, err := New(&cron.Runner{}, Config{CallbackAllow: []string{"a/b"}}); err == nil {
		t.Errorf("New accepted the pattern a/b")
	}
}

func TestMetricsEndpoint(t *testing.T) {
	var seen []RequestInfo
	f := newFixture(t, Config{
		Metrics:   http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "m 1\n") }),
		OnRequest: func(ri RequestInfo) { seen = append(seen, ri) },
	})
	r := f.do(t, "GET", "/metrics", "", nil)
	if r.status != 200 || r.body != "m 1\n" {
		t.Errorf("/metrics: %d %q", r.status, r.body)
	}
	f.do(t, "GET", "/jobs/x", "", nil)
	var got []string
	for _, ri := range seen {
		got = append(got, fmt.Sprintf("%s %s %d", ri.Method, ri.Route, ri.Status))
	}
	if diff := cmp.Diff([]string{"GET /metrics 200", "GET /jobs/{id} 404"}, got); diff != "" {
		t.Errorf("OnRequest (-want +got):\n%s", diff)
	}
}

// FuzzDecodeJobBody: the body decoder never panics, and what it accepts
// applies to a job that marshals.
func FuzzDecodeJobBody(f *testing.F) {
	f.Add(validJob)
	f.Add(`{"schedule":{"kind":"once","run_at":"2026-01-01T00:00:00Z"},"max_retries":0}`)
	f.Add(`{"http":{"headers":{"a":"b"}},"enabled":true,"timeout":""}`)
	f.Add(`{"last_error":"x"}`)
	f.Add(`[`)
	f.Fuzz(func(t *testing.T, body string) {
		p, rerr := decodeJobBody([]byte(body))
		if rerr != nil {
			if rerr.Status != 400 || rerr.Msg == "" {
				t.Fatalf("bad refusal %+v", rerr)
			}
			return
		}
		var j cron.Job
		p.apply(&j)
		if _, err := json.Marshal(j); err != nil {
			t.Fatalf("accepted body gives a job that does not marshal: %v", err)
		}
	})
}

// TestIDs: a create with an id outside the safe set is refused, naming id;
// a job stored before the rule applied is still reached (and removed) at
// its escaped path; an escaped '/' never reaches an action.
func TestIDs(t *testing.T) {
	st := cron.NewMemStore()
	ctx := context.Background()
	for _, id := range []string{"a/b", "x"} {
		if err := st.Save(ctx, cron.Job{ID: id, Type: "http", HTTP: cron.HTTPConfig{Method: "GET", URL: "http://svc.internal/"},
			Schedule: cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(time.Hour), StartAt: time.Now()},
			Timeout:  cron.Duration(time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	var runs atomic.Int64
	f := loadedFixture(t, st, cron.ExecutorFunc(func(context.Context, *cron.Job, cron.RunInfo) cron.Result {
		runs.Add(1)
		return cron.Result{Status: cron.StatusSuccess, Attempts: 1}
	}))

	tests := []struct {
		id   string
		want int
	}{
		{"a/b", 400}, {"../../etc", 400}, {"a b/c?d", 400}, {".", 400}, {"..", 400}, {"é", 400}, {"a\x00", 400},
		{strings.Repeat("x", 129), 400},
		{strings.Repeat("x", 128), 201}, {"Job_1.a:b-c", 201}, {"..a", 201},
	}
	for _, tt := range tests {
		body, _ := json.Marshal(map[string]any{"id": tt.id, "http": map[string]string{"url": "http://svc.internal/"}, "schedule": map[string]string{"kind": "every", "every": "1h"}})
		res := f.do(t, "POST", "/jobs", string(body), nil)
		if res.status != tt.want {
			t.Errorf("POST id %q: %d %s, want %d", tt.id, res.status, res.body, tt.want)
		}
		if tt.want == 400 && !strings.Contains(res.body, `"field":"id"`) {
			t.Errorf("POST id %q: refusal does not name id: %s", tt.id, res.body)
		}
	}
	if got := len(listJobs(t, f.runner)); got != 5 {
		t.Errorf("jobs after the creates = %d, want 5 (2 stored, 3 created)", got)
	}
	// The stored job a/b is reached at its escaped path.
	if res := f.do(t, "GET", "/jobs/a%2Fb", "", nil); res.status != 200 || decodeJob(t, res.body).ID != "a/b" {
		t.Errorf("GET /jobs/a%%2Fb: %d %s, want 200 and the job a/b", res.status, res.body)
	}
	// An escaped '/' is part of the id, not a path separator: this is
	// /jobs/{id} with the id "x/run-now", which takes no POST.
	if res := f.do(t, "POST", "/jobs/x%2Frun-now", "", nil); res.status != 405 {
		t.Errorf("POST /jobs/x%%2Frun-now: %d %s, want 405", res.status, res.body)
	}
	if res := f.do(t, "GET", "/jobs/x%2Frun-now", "", nil); res.status != 404 {
		t.Errorf("GET /jobs/x%%2Frun-now: %d %s, want 404", res.status, res.body)
	}
	if n := runs.Load(); n != 0 {
		t.Errorf("%d runs started, want none", n)
	}
	if res := f.do(t, "DELETE", "/jobs/a%2Fb", "", nil); res.status != 204 {
		t.Errorf("DELETE /jobs/a%%2Fb: %d %s, want 204", res.status, res.body)
	}
	if _, err := f.runner.Get(ctx, "a/b"); !errors.Is(err, cron.ErrNotFound) {
		t.Errorf("after DELETE, Get(a/b) error = %v, want ErrNotFound", err)
	}
}

// TestPatchEnabled: PATCH {"enabled": false} and {"enabled": true} do what
// /pause and /resume do; a resumed job that never ran says so again
// (last_status empty), not paused.
func TestPatchEnabled(t *testing.T) {
	f := newFixture(t, Config{})
	if r := f.do(t, "POST", "/jobs", validJob, nil); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	type state struct {
		Enabled    bool
		LastStatus cron.Status
		Scheduled  bool
	}
	get := func(body string) state {
		j := decodeJob(t, body)
		return state{!j.Paused, j.LastStatus, !j.NextRunAt.IsZero()}
	}
	steps := []struct {
		method, path, body string
		want               state
	}{
		{"PATCH", "/jobs/fixed", `{"enabled":false}`, state{false, cron.StatusPaused, false}},
		{"PATCH", "/jobs/fixed", `{"enabled":true}`, state{true, "", true}},
		{"POST", "/jobs/fixed/pause", "", state{false, cron.StatusPaused, false}},
		{"POST", "/jobs/fixed/resume", "", state{true, "", true}},
	}
	for _, s := range steps {
		r := f.do(t, s.method, s.path, s.body, nil)
		if r.status != 200 {
			t.Fatalf("%s %s %s: %d %s", s.method, s.path, s.body, r.status, r.body)
		}
		if diff := cmp.Diff(s.want, get(r.body)); diff != "" {
			t.Errorf("%s %s %s: answer (-want +got):\n%s", s.method, s.path, s.body, diff)
		}
		if diff := cmp.Diff(s.want, get(f.do(t, "GET", "/jobs/fixed", "", nil).body)); diff != "" {
			t.Errorf("%s %s %s: then GET (-want +got):\n%s", s.method, s.path, s.body, diff)
		}
	}
}

// TestDurationsAsWritten: a duration comes back as the user wrote it, in
// its short form, from POST, PATCH and GET.
func TestDurationsAsWritten(t *testing.T) {
	f := newFixture(t, Config{})
	r := f.do(t, "POST", "/jobs", `{"id":"d","http":{"url":"http://h/"},"schedule":{"kind":"every","every":"1h","jitter":"10m"},"timeout":"1m","retry_backoff":"90s"}`, nil)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	want := `"schedule":{"kind":"every","every":"1h","start_at":`
	if !strings.Contains(r.body, want) || !strings.Contains(r.body, `"jitter":"10m"`) || !strings.Contains(r.body, `"timeout":"1m","max_retries":3,"retry_backoff":"1m30s"`) {
		t.Errorf("created job %s: want every 1h, jitter 10m, timeout 1m, retry_backoff 1m30s", r.body)
	}
	r = f.do(t, "PATCH", "/jobs/d", `{"timeout":"2m"}`, nil)
	if !strings.Contains(r.body, `"timeout":"2m"`) {
		t.Errorf("patched job %s: want timeout 2m", r.body)
	}
	if r = f.do(t, "GET", "/jobs/d", "", nil); !strings.Contains(r.body, `"every":"1h"`) || !strings.Contains(r.body, `"timeout":"2m"`) {
		t.Errorf("GET %s: want every 1h and timeout 2m", r.body)
	}
}

// TestListPagesAndFilters: GET /jobs pages with limit and after (the Link
// header names the next page) and filters by enabled, kind, last_status
// and name; an unknown or bad query parameter is a 400 naming it.
func TestListPagesAndFilters(t *testing.T) {
	f := newFixture(t, Config{})
	for _, body := range []string{
		`{"id":"j1","name":"a","http":{"url":"http://h/"},"schedule":{"kind":"every","every":"1h"}}`,
		`{"id":"j2","name":"b","http":{"url":"http://h/"},"schedule":{"kind":"every","every":"1h"},"enabled":false}`,
		`{"id":"j3","name":"a","http":{"url":"http://h/"},"schedule":{"kind":"cron","cron":"0 9 * * *"}}`,
		`{"id":"j4","name":"c","http":{"url":"http://h/"},"schedule":{"kind":"once","run_at":"2099-01-01T00:00:00Z"}}`,
		`{"id":"j5","name":"a","http":{"url":"http://h/"},"schedule":{"kind":"every","every":"1h"},"enabled":false}`,
	} {
		if r := f.do(t, "POST", "/jobs", body, nil); r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
	}
	ids := func(body string) []string {
		var jobs []cron.Job
		if err := json.Unmarshal([]byte(body), &jobs); err != nil {
			t.Fatalf("decode %s: %v", body, err)
		}
		out := []string{}
		for _, j := range jobs {
			out = append(out, j.ID)
		}
		return out
	}
	tests := []struct {
		query    string
		want     []string
		wantNext string // the Link header's target, "" for none
	}{
		{"", []string{"j1", "j2", "j3", "j4", "j5"}, ""},
		{"?limit=2", []string{"j1", "j2"}, "?after=j2&limit=2"},
		{"?after=j2&limit=2", []string{"j3", "j4"}, "?after=j4&limit=2"},
		{"?after=j4&limit=2", []string{"j5"}, ""},
		{"?name=a", []string{"j1", "j3", "j5"}, ""},
		{"?name=a&limit=1", []string{"j1"}, "?after=j1&limit=1&name=a"},
		{"?enabled=false", []string{"j2", "j5"}, ""},
		{"?enabled=true&kind=every", []string{"j1"}, ""},
		{"?kind=cron", []string{"j3"}, ""},
		{"?last_status=", []string{"j1", "j2", "j3", "j4", "j5"}, ""},
		{"?last_status=success", []string{}, ""},
	}
	for _, tt := range tests {
		r := f.do(t, "GET", "/jobs"+tt.query, "", nil)
		if r.status != 200 {
			t.Errorf("GET /jobs%s: %d %s", tt.query, r.status, r.body)
			continue
		}
		if diff := cmp.Diff(tt.want, ids(r.body)); diff != "" {
			t.Errorf("GET /jobs%s ids (-want +got):\n%s", tt.query, diff)
		}
		var next string
		if l := r.header.Get("Link"); l != "" {
			next = strings.TrimSuffix(strings.TrimPrefix(l, "<"), `>; rel="next"`)
		}
		if next != tt.wantNext {
			t.Errorf("GET /jobs%s Link = %q, want the next page at %q", tt.query, next, tt.wantNext)
		}
	}
	bad := []struct{ query, field string }{
		{"?limit=0", "limit"}, {"?limit=1001", "limit"}, {"?limit=x", "limit"}, {"?enabled=yes", "enabled"},
		{"?kind=hourly", "kind"}, {"?last_status=great", "last_status"}, {"?after=nope", "after"},
		{"?colour=red", "colour"}, {"?name=a&name=b", "name"},
	}
	for _, tt := range bad {
		r := f.do(t, "GET", "/jobs"+tt.query, "", nil)
		if r.status != 400 || !strings.Contains(r.body, `"field":"`+tt.field+`"`) {
			t.Errorf("GET /jobs%s: %d %s, want 400 naming %s", tt.query, r.status, r.body, tt.field)
		}
	}
}

// listJobs returns every job r lists.
func listJobs(t testing.TB, r *cron.Runner) []cron.Job {
	t.Helper()
	jobs, _, err := r.List(context.Background(), cron.JobQuery{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return jobs
}

// TestKeepRuns: keep_runs is set by POST and PATCH, shown by GET, removed
// by a PATCH of null, and bounds the job's history (GET /jobs/{id}/runs);
// a value out of range or of another type is a 400 naming the field, and
// leaves the job as it was.
func TestKeepRuns(t *testing.T) {
	f := newFixture(t, Config{})
	if r := f.do(t, "POST", "/jobs", `{"id":"k","http":{"url":"http://svc.internal/"},"schedule":{"kind":"every","every":"1h"},"keep_runs":2}`, nil); r.status != 201 {
		t.Fatal(r.body)
	}
	if got := decodeJob(t, f.do(t, "GET", "/jobs/k", "", nil).body); got.KeepRuns != 2 {
		t.Errorf("GET after POST: keep_runs %d, want 2", got.KeepRuns)
	}
	var runs []cron.Run
	for i := range 4 {
		if r := f.do(t, "POST", "/jobs/k/run-now", "", nil); r.status != 202 {
			t.Fatalf("run-now: %d %s", r.status, r.body)
		}
		// Its record is in the history before the next run-now (which
		// the overlap rule would refuse while it runs).
		deadline := time.Now().Add(5 * time.Second)
		for {
			runs = nil
			if err := json.Unmarshal([]byte(f.do(t, "GET", "/jobs/k/runs", "", nil).body), &runs); err != nil {
				t.Fatal(err)
			}
			if len(runs) == min(i+1, 2) && f.calls.Load() == int64(i+1) || time.Now().After(deadline) {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	if len(runs) != 2 || f.calls.Load() != 4 {
		t.Errorf("GET /jobs/k/runs after %d runs: %d runs, want the 2 kept", f.calls.Load(), len(runs))
	}
	for _, body := range []string{`{"keep_runs":100001}`, `{"keep_runs":-1}`, `{"keep_runs":"5"}`, `{"keep_runs":2.5}`} {
		if r := f.do(t, "PATCH", "/jobs/k", body, nil); r.status != 400 || !strings.Contains(r.body, `"field":"keep_runs"`) {
			t.Errorf("PATCH %s: %d %s, want 400 naming keep_runs", body, r.status, r.body)
		}
	}
	if got := decodeJob(t, f.do(t, "GET", "/jobs/k", "", nil).body); got.KeepRuns != 2 {
		t.Errorf("after refused PATCHes: keep_runs %d, want 2 still", got.KeepRuns)
	}
	if r := f.do(t, "PATCH", "/jobs/k", `{"keep_runs":500}`, nil); r.status != 200 {
		t.Fatalf("PATCH keep_runs 500: %d %s", r.status, r.body)
	}
	if got := decodeJob(t, f.do(t, "GET", "/jobs/k", "", nil).body); got.KeepRuns != 500 {
		t.Errorf("after PATCH: keep_runs %d, want 500", got.KeepRuns)
	}
	if r := f.do(t, "PATCH", "/jobs/k", `{"keep_runs":null}`, nil); r.status != 200 || strings.Contains(r.body, "keep_runs") {
		t.Errorf("PATCH keep_runs null: %d %s, want 200 and no keep_runs", r.status, r.body)
	}
}
