package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/cron"
)

// gate is an executor whose runs record the callback they make and wait
// until released.
type gate struct {
	mu      sync.Mutex
	seen    []cron.HTTPConfig
	release chan struct{}
}

func (g *gate) Execute(ctx context.Context, j *cron.Job, info cron.RunInfo) cron.Result {
	g.mu.Lock()
	g.seen = append(g.seen, j.HTTP)
	g.mu.Unlock()
	select {
	case <-g.release:
	case <-ctx.Done():
	}
	return cron.Result{Status: cron.StatusSuccess, Attempts: 1, HTTPStatus: 200}
}

func (g *gate) calls() []cron.HTTPConfig {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]cron.HTTPConfig(nil), g.seen...)
}

func gateServer(t *testing.T) (*gate, *httptest.Server, *cron.Runner) {
	t.Helper()
	g := &gate{release: make(chan struct{})}
	r, err := cron.New(cron.NewMemStore(), g, cron.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		select {
		case <-g.release:
		default:
			close(g.release)
		}
		cancel()
		<-done
	})
	api, err := New(r, Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	if _, err := r.Add(context.Background(), cron.Job{ID: "h", HTTP: cron.HTTPConfig{URL: "http://cb.test/x", Body: "stored",
		Headers: map[string]string{"X-A": "1"}}, Schedule: cron.Every(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	return g, srv, r
}

type answer struct {
	status int
	header http.Header
	body   map[string]string
}

func post(t *testing.T, srv *httptest.Server, path, body string, header map[string]string) answer {
	t.Helper()
	req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err) // may run on another goroutine than the test's
		return answer{}
	}
	defer res.Body.Close()
	var m map[string]string
	_ = json.NewDecoder(res.Body).Decode(&m)
	return answer{res.StatusCode, res.Header, m}
}

// waitCalls waits until the executor was called n times.
func waitCalls(t *testing.T, g *gate, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); len(g.calls()) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("executor called %d times, want %d", len(g.calls()), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRunNowOverrides: the body and headers of a run-now reach that run's
// callback; a second run-now while it runs is 409 run_in_flight, and runs
// with force.
func TestRunNowOverrides(t *testing.T) {
	g, srv, _ := gateServer(t)
	a := post(t, srv, "/jobs/h/run-now", `{"body": "once {{job_id}}", "headers": {"X-B": "2"}}`, nil)
	if a.status != 202 || a.body["run_id"] == "" {
		t.Fatalf("run-now with overrides: %d %v", a.status, a.body)
	}
	waitCalls(t, g, 1)
	a = post(t, srv, "/jobs/h/run-now", "", nil)
	if a.status != 409 || a.body["code"] != CodeRunInFlight {
		t.Errorf("run-now during a run: %d %v, want 409 code %s", a.status, a.body, CodeRunInFlight)
	}
	if a = post(t, srv, "/jobs/h/run-now", `{"force": true}`, nil); a.status != 202 {
		t.Errorf("forced run-now during a run: %d %v, want 202", a.status, a.body)
	}
	waitCalls(t, g, 2)
	want := []cron.HTTPConfig{
		{Method: "GET", URL: "http://cb.test/x", Headers: map[string]string{"X-A": "1", "X-B": "2"}, Body: "once {{job_id}}"},
		{Method: "GET", URL: "http://cb.test/x", Headers: map[string]string{"X-A": "1"}, Body: "stored"},
	}
	if diff := cmp.Diff(want, g.calls()); diff != "" {
		t.Errorf("callbacks (-want +got):\n%s", diff)
	}
	for _, tt := range []struct{ body, field string }{
		{`{"args": {"a": 1}}`, "args"},
		{`{"bodyy": "x"}`, "bodyy"},
		{`{"body": "{{nope}}"}`, "body"},
		{`{"headers": {"Content-Length": "3"}}`, "headers"},
		{`{"force": "yes"}`, "force"},
	} {
		if a := post(t, srv, "/jobs/h/run-now", tt.body, nil); a.status != 400 || a.body["field"] != tt.field {
			t.Errorf("run-now %s: %d %v, want 400 on %s", tt.body, a.status, a.body, tt.field)
		}
	}
}

// TestRunNowIdempotent: the same Idempotency-Key twice (even at once)
// makes one run and answers its run_id both times; the same key with
// another body is 422; the key is per job.
func TestRunNowIdempotent(t *testing.T) {
	g, srv, r := gateServer(t)
	close(g.release)
	hdr := map[string]string{"Idempotency-Key": "k1"}
	var wg sync.WaitGroup
	answers := make([]answer, 4)
	for i := range answers {
		wg.Go(func() { answers[i] = post(t, srv, "/jobs/h/run-now", `{"force": true}`, hdr) })
	}
	wg.Wait()
	for i, a := range answers {
		if a.status != 202 || a.body["run_id"] != answers[0].body["run_id"] {
			t.Errorf("request %d: %d %v, want 202 and run %s", i, a.status, a.body, answers[0].body["run_id"])
		}
	}
	a := post(t, srv, "/jobs/h/run-now", `{"force": true}`, hdr)
	if a.status != 202 || a.body["run_id"] != answers[0].body["run_id"] || a.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("repeat: %d %v replayed %q, want the first run and Idempotent-Replayed: true", a.status, a.body, a.header.Get("Idempotent-Replayed"))
	}
	if a := post(t, srv, "/jobs/h/run-now", `{"body": "other"}`, hdr); a.status != 422 || a.body["code"] != CodeIdempotencyKeyReused {
		t.Errorf("same key, other body: %d %v, want 422 %s", a.status, a.body, CodeIdempotencyKeyReused)
	}
	if a := post(t, srv, "/jobs/h/run-now", ``, map[string]string{"Idempotency-Key": "clé"}); a.status != 400 {
		t.Errorf("a key that is not printable ASCII: %d, want 400", a.status)
	}
	if _, err := r.Add(context.Background(), cron.Job{ID: "h2", HTTP: cron.HTTPConfig{URL: "http://cb.test/x"}, Schedule: cron.Every(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if a := post(t, srv, "/jobs/h2/run-now", `{"force": true}`, hdr); a.status != 202 || a.body["run_id"] == answers[0].body["run_id"] {
		t.Errorf("same key on another job: %d %v, want a run of its own", a.status, a.body)
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(g.calls()); n != 2 {
		t.Errorf("callbacks: %d, want 2 (one per job)", n)
	}
}

// TestAlertField: the alert object is stored and returned; bad values
// name their field; failures and last_alert are refused as system fields.
func TestAlertField(t *testing.T) {
	_, srv, _ := gateServer(t)
	a := post(t, srv, "/jobs", `{"id": "al", "http": {"url": "http://cb.test/x"}, "schedule": {"kind": "every", "every": "1h"},
		"alert": {"url": "https://hooks.test/a", "secret": "s", "after": 2, "pause_after": 5, "missed_every": "15m", "notify": "failure"}}`, nil)
	if a.status != 201 {
		t.Fatalf("create with an alert: %d %v", a.status, a.body)
	}
	res, err := http.Get(srv.URL + "/jobs/al")
	if err != nil {
		t.Fatal(err)
	}
	var j cron.Job
	_ = json.NewDecoder(res.Body).Decode(&j)
	res.Body.Close()
	if diff := cmp.Diff(&cron.AlertConfig{URL: "https://hooks.test/a", Secret: "s", After: 2, PauseAfter: 5, MissedEvery: cron.Duration(15 * time.Minute), Notify: "failure"}, j.Alert); diff != "" {
		t.Errorf("alert read back (-want +got):\n%s", diff)
	}
	for _, tt := range []struct{ alert, field string }{
		{`{"url": "ftp://x"}`, "alert.url"},
		{`{"url": "http://x", "after": -1}`, "alert.after"},
		{`{"url": "http://x", "pause_after": -1}`, "alert.pause_after"},
		{`{"url": "http://x", "secret": "` + strings.Repeat("s", 257) + `"}`, "alert.secret"},
		{`{"url": "http://x", "every": 1}`, "alert.every"},
		{`{"url": "http://x", "notify": "sometimes"}`, "alert.notify"},
		{`{"url": "http://x", "missed_every": "often"}`, "alert.missed_every"},
		{`"x"`, "alert"},
	} {
		body := `{"http": {"url": "http://cb.test/x"}, "schedule": {"kind": "every", "every": "1h"}, "alert": ` + tt.alert + `}`
		if a := post(t, srv, "/jobs", body, nil); a.status != 400 || a.body["field"] != tt.field {
			t.Errorf("alert %s: %d %v, want 400 on %s", tt.alert, a.status, a.body, tt.field)
		}
	}
	for _, f := range []string{"failures", "last_alert"} {
		body := `{"http": {"url": "http://cb.test/x"}, "schedule": {"kind": "every", "every": "1h"}, "` + f + `": 1}`
		if a := post(t, srv, "/jobs", body, nil); a.status != 400 || a.body["field"] != f {
			t.Errorf("create with %s: %d %v, want 400 on it", f, a.status, a.body)
		}
	}
	req, _ := http.NewRequest("PATCH", srv.URL+"/jobs/al", strings.NewReader(`{"alert": null}`))
	req.Header.Set("Content-Type", "application/json")
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	j = cron.Job{}
	_ = json.NewDecoder(res.Body).Decode(&j)
	res.Body.Close()
	if res.StatusCode != 200 || j.Alert != nil {
		t.Errorf("PATCH alert null: %d, alert %+v; want 200 and none", res.StatusCode, j.Alert)
	}
}
