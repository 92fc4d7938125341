package cron

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// reply is one scripted answer of a test server.
type reply struct {
	code       int
	body       string
	retryAfter string
	hang       bool // wait until the client gives up
}

// scripted is a test server that answers with replies in turn (the last
// one repeats) and records the requests.
type scripted struct {
	mu      sync.Mutex
	replies []reply
	reqs    []*http.Request
	bodies  []string
	starts  []time.Time // when each request came
	ends    []time.Time // when each answer was sent
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.reqs)
	s.reqs = append(s.reqs, r)
	s.bodies = append(s.bodies, string(b))
	s.starts = append(s.starts, time.Now())
	s.ends = append(s.ends, time.Time{})
	defer func() {
		s.mu.Lock()
		s.ends[n] = time.Now()
		s.mu.Unlock()
	}()
	rp := s.replies[min(n, len(s.replies)-1)]
	s.mu.Unlock()
	if rp.hang {
		<-r.Context().Done()
		return
	}
	if rp.retryAfter != "" {
		w.Header().Set("Retry-After", rp.retryAfter)
	}
	w.WriteHeader(rp.code)
	_, _ = io.WriteString(w, rp.body)
}

// waits returns the time between the end of each answer and the next
// request: under testing/synctest, the executor's wait between attempts.
func (s *scripted) waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var w []time.Duration
	for i := 1; i < len(s.starts); i++ {
		w = append(w, s.starts[i].Sub(s.ends[i-1]))
	}
	return w
}

func execJob(url string) *Job {
	return &Job{ID: "job-1", Type: JobTypeHTTP, HTTP: HTTPConfig{Method: "POST", URL: url},
		Timeout: Duration(10 * time.Second), MaxRetries: 3, RetryBackoff: Duration(5 * time.Second)}
}

var clockStart = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// bubbleStart is where the clock of a testing/synctest bubble starts.
var bubbleStart = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func TestHTTPExecutorRetryClasses(t *testing.T) {
	backoff := 5 * time.Second
	tests := []struct {
		name      string
		replies   []reply
		retries   int
		timeout   time.Duration
		want      Result
		wantWaits []time.Duration
	}{
		{"2xx", []reply{{code: 204}}, 3, 0, Result{Status: StatusSuccess, Attempts: 1, HTTPStatus: 204}, nil},
		{"500 then 200", []reply{{code: 500, body: "boom"}, {code: 500}, {code: 200}}, 3, 0,
			Result{Status: StatusSuccess, Attempts: 3, HTTPStatus: 200}, []time.Duration{backoff, backoff}},
		{"500 exhausted", []reply{{code: 500, body: "  boom\n again "}}, 2, 0,
			Result{Status: StatusFailed, Attempts: 3, HTTPStatus: 500, Error: "http 500; reply: boom again"}, []time.Duration{backoff, backoff}},
		{"408 retried", []reply{{code: 408}, {code: 201}}, 3, 0,
			Result{Status: StatusSuccess, Attempts: 2, HTTPStatus: 201}, []time.Duration{backoff}},
		{"429 Retry-After longer", []reply{{code: 429, retryAfter: "30"}, {code: 200}}, 3, 0,
			Result{Status: StatusSuccess, Attempts: 2, HTTPStatus: 200}, []time.Duration{30 * time.Second}},
		{"429 Retry-After shorter", []reply{{code: 429, retryAfter: "1"}, {code: 200}}, 3, 0,
			Result{Status: StatusSuccess, Attempts: 2, HTTPStatus: 200}, []time.Duration{backoff}},
		{"429 Retry-After capped", []reply{{code: 429, retryAfter: "86400"}, {code: 200}}, 3, 0,
			Result{Status: StatusSuccess, Attempts: 2, HTTPStatus: 200}, []time.Duration{5 * time.Minute}},
		{"503 Retry-After date", []reply{{code: 503, retryAfter: bubbleStart.Add(time.Minute).Format(http.TimeFormat)}, {code: 200}}, 3, 0,
			Result{Status: StatusSuccess, Attempts: 2, HTTPStatus: 200}, []time.Duration{time.Minute}},
		{"500 Retry-After ignored", []reply{{code: 500, retryAfter: "30"}, {code: 200}}, 3, 0,
			Result{Status: StatusSuccess, Attempts: 2, HTTPStatus: 200}, []time.Duration{backoff}},
		{"404 no retry", []reply{{code: 404, body: "no such hook"}}, 3, 0,
			Result{Status: StatusFailed, Attempts: 1, HTTPStatus: 404, Error: "http 404; reply: no such hook"}, nil},
		{"400 no retry", []reply{{code: 400}}, 3, 0,
			Result{Status: StatusFailed, Attempts: 1, HTTPStatus: 400, Error: "http 400"}, nil},
		{"timeout", []reply{{hang: true}}, 1, 50 * time.Millisecond,
			Result{Status: StatusTimeout, Attempts: 2, Error: "timeout after 50ms"}, []time.Duration{backoff}},
		{"timeout then success", []reply{{hang: true}, {code: 200}}, 1, 1500 * time.Millisecond,
			Result{Status: StatusSuccess, Attempts: 2, HTTPStatus: 200}, []time.Duration{backoff}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				if !time.Now().Equal(bubbleStart) {
					t.Fatalf("the bubble starts at %v, the test expects %v", time.Now(), bubbleStart)
				}
				srv := &scripted{replies: tt.replies}
				n := newPipeNet(t, srv)
				x := NewHTTPExecutor(HTTPExecutorConfig{Client: n.Client})
				j := execJob("http://hooks.test/hook")
				j.MaxRetries = tt.retries
				if tt.timeout > 0 {
					j.Timeout = Duration(tt.timeout)
				}
				got := x.Execute(context.Background(), j, RunInfo{RunID: "r1", JobID: j.ID})
				if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(Result{}, "AttemptLog")); diff != "" {
					t.Errorf("result (-want +got):\n%s", diff)
				}
				checkAttemptLog(t, got, srv)
				if diff := cmp.Diff(tt.wantWaits, srv.waits()); diff != "" {
					t.Errorf("waits (-want +got):\n%s", diff)
				}
				if srv.count() != got.Attempts {
					t.Errorf("server saw %d requests, result says %d attempts", srv.count(), got.Attempts)
				}
			})
		})
	}
}

// checkAttemptLog checks that res lists each attempt the server saw when
// there were several (none for one), each starting when its request
// came, the last one with the run's outcome.
func checkAttemptLog(t *testing.T, res Result, srv *scripted) {
	t.Helper()
	if res.Attempts < 2 {
		if res.AttemptLog != nil {
			t.Errorf("one attempt, attempt log %+v; want none", res.AttemptLog)
		}
		return
	}
	if len(res.AttemptLog) != res.Attempts {
		t.Fatalf("%d attempts, %d in the log: %+v", res.Attempts, len(res.AttemptLog), res.AttemptLog)
	}
	srv.mu.Lock()
	starts := slices.Clone(srv.starts)
	srv.mu.Unlock()
	for i, a := range res.AttemptLog {
		if i < len(starts) && !a.StartedAt.Equal(starts[i].UTC()) {
			t.Errorf("attempt %d started at %v, the server saw it at %v", i+1, a.StartedAt, starts[i])
		}
		if i < len(res.AttemptLog)-1 && a.Status == StatusSuccess {
			t.Errorf("attempt %d succeeded but was retried: %+v", i+1, res.AttemptLog)
		}
	}
	last := res.AttemptLog[len(res.AttemptLog)-1]
	if last.Status != res.Status || last.HTTPStatus != res.HTTPStatus || last.Error != res.Error {
		t.Errorf("last attempt %+v, run outcome %s %d %q", last, res.Status, res.HTTPStatus, res.Error)
	}
}

// TestAttemptLogRecorded: a run retried keeps each attempt's start,
// status, HTTP status and error in its record, secrets of the job
// scrubbed from each error as from the run's.
func TestAttemptLogRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &scripted{replies: []reply{{code: 500, body: "token s3cr3t-token-value"}, {code: 502}, {code: 200}}}
		n := newPipeNet(t, srv)
		ex := NewHTTPExecutor(HTTPExecutorConfig{Client: n.Client})
		r := newTestRunner(t, nil, ex, Config{})
		j := httpJob("retried", ScheduleSpec{Kind: KindOnce, RunAt: time.Now().Add(time.Second)})
		j.HTTP.URL = "http://hooks.test/hook"
		j.HTTP.Headers = map[string]string{"Authorization": "Bearer s3cr3t-token-value"}
		j.MaxRetries, j.RetryBackoff = 3, Duration(5*time.Second)
		mustAdd(t, r, j)
		stop := start(t, r)
		time.Sleep(time.Minute)
		synctest.Wait()
		_ = stop()
		runs, err := r.Runs(context.Background(), "retried", 10)
		if err != nil || len(runs) != 1 {
			t.Fatalf("runs %+v, %v; want one", runs, err)
		}
		t0 := time.Now().Add(-time.Minute).Add(time.Second).UTC()
		want := []Attempt{
			{StartedAt: t0, Status: StatusFailed, HTTPStatus: 500, Error: "http 500; reply: token " + Hidden},
			{StartedAt: t0.Add(5 * time.Second), Status: StatusFailed, HTTPStatus: 502, Error: "http 502"},
			{StartedAt: t0.Add(10 * time.Second), Status: StatusSuccess, HTTPStatus: 200},
		}
		if diff := cmp.Diff(want, runs[0].AttemptLog); diff != "" {
			t.Errorf("attempt log (-want +got):\n%s", diff)
		}
		if v := runs[0].RedactedFor(RoleViewer).AttemptLog[0].Error; strings.Contains(v, "token") {
			t.Errorf("a viewer reads the reply excerpt of an attempt: %q", v)
		}
	})
}

func (s *scripted) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

func TestHTTPExecutorConnectionRefused(t *testing.T) {
	// A real refused connection first: its error names it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	x := NewHTTPExecutor(HTTPExecutorConfig{})
	j := execJob("http://" + addr + "/hook")
	j.MaxRetries = 0
	got := x.Execute(context.Background(), j, RunInfo{RunID: "r1", JobID: j.ID})
	if got.Status != StatusFailed || got.Attempts != 1 || !strings.Contains(got.Error, "refused") {
		t.Errorf("result = %+v, want failed after 1 attempt with a connection refused error", got)
	}
	// Then the retries, on the bubble's clock.
	synctest.Test(t, func(t *testing.T) {
		n := newPipeNet(t, http.NotFoundHandler())
		n.Stop()
		x := NewHTTPExecutor(HTTPExecutorConfig{Client: n.Client})
		j := execJob("http://hooks.test/hook")
		j.MaxRetries = 2
		start := time.Now()
		got := x.Execute(context.Background(), j, RunInfo{RunID: "r1", JobID: j.ID})
		if got.Status != StatusFailed || got.Attempts != 3 || !strings.Contains(got.Error, "refused") {
			t.Errorf("result = %+v, want failed after 3 attempts with a connection refused error", got)
		}
		if took := time.Since(start); took != 10*time.Second {
			t.Errorf("3 attempts took %v, want 10s (two waits of 5s)", took)
		}
	})
}

func TestHTTPExecutorHeadersAndBody(t *testing.T) {
	synctest.Test(t, testHTTPExecutorHeadersAndBody)
}

func testHTTPExecutorHeadersAndBody(t *testing.T) {
	srv := &scripted{replies: []reply{{code: 500}, {code: 200}}}
	n := newPipeNet(t, srv)
	x := NewHTTPExecutor(HTTPExecutorConfig{Client: n.Client})
	j := execJob("http://hooks.test/hook?x=1")
	j.HTTP.Headers = map[string]string{"X-Token": "abc", "X-Ksana-Run-Id": "forged"}
	j.HTTP.Body = `{"job":"{{job_id}}","run":"{{run_id}}","at":"{{scheduled_at}}","t":"{{triggered_at}}"}`
	info := RunInfo{RunID: "0123456789abcdef0123456789abcdef", JobID: j.ID,
		ScheduledAt: time.Date(2030, 1, 2, 3, 4, 5, 600, time.FixedZone("X", 3600)), TriggeredAt: time.Date(2030, 1, 2, 2, 4, 5, 700_000_000, time.UTC)}
	if got := x.Execute(context.Background(), j, info); got.Status != StatusSuccess {
		t.Fatalf("result %+v, want success", got)
	}
	wantBody := `{"job":"job-1","run":"0123456789abcdef0123456789abcdef","at":"2030-01-02T02:04:05.0000006Z","t":"2030-01-02T02:04:05.7Z"}`
	if len(srv.reqs) != 2 {
		t.Fatalf("requests: %d, want 2", len(srv.reqs))
	}
	for i, r := range srv.reqs {
		got := map[string]string{
			"method": r.Method, "path": r.URL.RequestURI(), "body": srv.bodies[i],
			HeaderJobID: r.Header.Get(HeaderJobID), HeaderRunID: r.Header.Get(HeaderRunID),
			HeaderScheduledAt: r.Header.Get(HeaderScheduledAt), HeaderTriggeredAt: r.Header.Get(HeaderTriggeredAt),
			"X-Token": r.Header.Get("X-Token"), "Content-Type": r.Header.Get("Content-Type"), "User-Agent": r.Header.Get("User-Agent"),
		}
		want := map[string]string{
			"method": "POST", "path": "/hook?x=1", "body": wantBody,
			HeaderJobID: "job-1", HeaderRunID: info.RunID,
			HeaderScheduledAt: "2030-01-02T02:04:05.0000006Z", HeaderTriggeredAt: "2030-01-02T02:04:05.7Z",
			"X-Token": "abc", "Content-Type": "application/json", "User-Agent": "ksana-cron",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("attempt %d (-want +got):\n%s", i+1, diff)
		}
	}
}

func TestHTTPExecutorContentType(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		headers map[string]string
		want    string
	}{
		{"json object", ` {"a":1}`, nil, "application/json"},
		{"json array", "[1]", nil, "application/json"},
		{"text", "hello", nil, ""},
		{"empty", "", nil, ""},
		{"job sets it", `{"a":1}`, map[string]string{"content-type": "text/plain"}, "text/plain"},
	}
	for _, tt := range tests {
		srv := &scripted{replies: []reply{{code: 200}}}
		ts := httptest.NewServer(srv)
		x := NewHTTPExecutor(HTTPExecutorConfig{})
		j := execJob(ts.URL)
		j.HTTP.Body, j.HTTP.Headers = tt.body, tt.headers
		x.Execute(context.Background(), j, RunInfo{RunID: "r", JobID: j.ID})
		ts.Close()
		if got := srv.reqs[0].Header.Get("Content-Type"); got != tt.want && !(tt.want == "" && strings.HasPrefix(got, "text/plain")) {
			t.Errorf("%s: Content-Type %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestHTTPExecutorBodyCap(t *testing.T) {
	// An endless body: the executor must stop reading at the cap.
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		chunk := []byte(strings.Repeat("é", 512))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer ts.Close()
	x := NewHTTPExecutor(HTTPExecutorConfig{MaxBodyBytes: 4096})
	j := execJob(ts.URL)
	j.MaxRetries = 0
	got := x.Execute(context.Background(), j, RunInfo{RunID: "r", JobID: j.ID})
	want := "http 500; reply: " + strings.Repeat("é", errorSnippet/2)
	if got.Status != StatusFailed || got.Error != want {
		t.Errorf("result = %+v, want failed with error %q", got, want)
	}
}

func TestHTTPExecutorReusesConnections(t *testing.T) {
	var mu sync.Mutex
	conns := 0
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		_, _ = io.WriteString(w, strings.Repeat("x", 10_000))
	}))
	ts.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	ts.Start()
	defer ts.Close()
	x := NewHTTPExecutor(HTTPExecutorConfig{Client: ts.Client()})
	j := execJob(ts.URL)
	j.RetryBackoff = Duration(time.Millisecond)
	j.MaxRetries = 9
	got := x.Execute(context.Background(), j, RunInfo{RunID: "r", JobID: j.ID})
	if got.Attempts != 10 {
		t.Fatalf("attempts = %d, want 10", got.Attempts)
	}
	mu.Lock()
	defer mu.Unlock()
	// Undrained bodies would need a connection per attempt. A drained one
	// returns to the pool a moment after the body is read, so a back-to-back
	// attempt may still race it and dial: allow a few.
	if conns > 3 {
		t.Errorf("connections opened for 10 attempts: %d, want at most 3 (bodies drained, connections reused)", conns)
	}
}

func TestHTTPExecutorCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &scripted{replies: []reply{{code: 503}}}
		n := newPipeNet(t, srv)
		ctx, cancel := context.WithCancel(context.Background())
		x := NewHTTPExecutor(HTTPExecutorConfig{Client: n.Client})
		start := time.Now()
		// Cancel the run while it waits to retry (the backoff is 5s).
		time.AfterFunc(time.Second, cancel)
		got := x.Execute(ctx, execJob("http://hooks.test/"), RunInfo{RunID: "r", JobID: "job-1"})
		if got.Attempts != 1 || got.Status != StatusFailed {
			t.Errorf("result = %+v, want 1 failed attempt: a cancelled wait stops the retries", got)
		}
		if took := time.Since(start); took != time.Second {
			t.Errorf("Execute returned after %v, want 1s (when the run was cancelled)", took)
		}
	})
}

func TestParseRetryAfter(t *testing.T) {
	now := clockStart
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0}, {"12", 12 * time.Second}, {"0", 0}, {"-3", 0}, {"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"999999999", 24 * time.Hour},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestExpandBody(t *testing.T) {
	info := RunInfo{RunID: "r", JobID: "j", ScheduledAt: clockStart, TriggeredAt: clockStart.Add(time.Second)}
	got := expandBody("{{job_id}}/{{run_id}}/{{scheduled_at}}/{{triggered_at}}/{{other}}", info)
	want := fmt.Sprintf("j/r/%s/%s/{{other}}", "2030-01-02T03:04:05Z", "2030-01-02T03:04:06Z")
	if got != want {
		t.Errorf("expandBody = %q, want %q", got, want)
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"", "0", "12", "-1", "86400", "99999999999999999999", "Wed, 21 Oct 2015 07:28:00 GMT", "Mon, 02 Jan 2030 03:04:05 GMT", "soon", " 7 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d := parseRetryAfter(v, clockStart)
		if d < 0 {
			t.Errorf("parseRetryAfter(%q) = %v, want >= 0", v, d)
		}
	})
}

func FuzzExpandBody(f *testing.F) {
	for _, s := range []string{"", "{{job_id}}", `{"a":"{{run_id}}","b":"{{scheduled_at}}{{triggered_at}}"}`, "{{", "{{{job_id}}}", "}}{{"} {
		f.Add(s)
	}
	info := RunInfo{RunID: "R", JobID: "J", ScheduledAt: clockStart, TriggeredAt: clockStart}
	f.Fuzz(func(t *testing.T, body string) {
		got := expandBody(body, info)
		has := false
		for _, p := range []string{"{{job_id}}", "{{run_id}}", "{{scheduled_at}}", "{{triggered_at}}"} {
			has = has || strings.Contains(body, p)
		}
		if !has && got != body {
			t.Errorf("expandBody(%q) = %q, want it unchanged (no placeholder)", body, got)
		}
		if has && got == body {
			t.Errorf("expandBody(%q) replaced nothing", body)
		}
	})
}

// TestHTTPExecutorAllowHosts: with AllowHosts, a job calling a host outside
// the list fails at once without a request, and a redirect to such a host
// is not followed.
func TestHTTPExecutorAllowHosts(t *testing.T) {
	var hits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer target.Close()
	// The same server under another name: localhost instead of 127.0.0.1.
	other := strings.Replace(target.URL, "127.0.0.1", "localhost", 1)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other+"/landed", http.StatusFound)
	}))
	defer redirector.Close()
	tests := []struct {
		name     string
		allow    HostAllowList
		url      string
		want     Result
		wantHits int64
	}{
		{"host refused", HostAllowList{"*.internal"}, target.URL, Result{Status: StatusFailed, Attempts: 1, Error: `host "127.0.0.1" refused: not in the callback allow-list`}, 0},
		{"redirect refused", HostAllowList{"127.0.0.1"}, redirector.URL, Result{Status: StatusFailed, Attempts: 1, Error: `redirect to host "localhost" refused: not in the callback allow-list`}, 0},
		{"redirect allowed", HostAllowList{"127.0.0.1", "localhost"}, redirector.URL, Result{Status: StatusSuccess, Attempts: 1, HTTPStatus: 200}, 1},
		{"no list", nil, redirector.URL, Result{Status: StatusSuccess, Attempts: 1, HTTPStatus: 200}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hits.Store(0)
			x := NewHTTPExecutor(HTTPExecutorConfig{AllowHosts: tt.allow})
			j := execJob(tt.url)
			j.MaxRetries = 3
			got := x.Execute(context.Background(), j, RunInfo{RunID: "r1", JobID: j.ID})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if n := hits.Load(); n != tt.wantHits {
				t.Errorf("the target got %d requests, want %d", n, tt.wantHits)
			}
		})
	}
	// The default client is left as it was: no redirect check added to it.
	if defaultHTTPClient().CheckRedirect != nil {
		t.Errorf("defaultHTTPClient has a CheckRedirect after an executor with AllowHosts was made")
	}
}
