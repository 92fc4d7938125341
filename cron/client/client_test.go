package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/client"
	"github.com/ksana-dev/ksana/cron/httpapi"
	"github.com/ksana-dev/ksana/store/jsonstore"
)

// service is the real thing: the API of a running runner over a JSON file
// store, behind an httptest.Server, whose jobs call back hook.
type service struct {
	srv   *httptest.Server
	hook  *httptest.Server
	calls atomic.Int64
}

func newService(t *testing.T, token string) *service {
	t.Helper()
	return newServiceConfig(t, httpapi.Config{Token: token})
}

// newServiceConfig is newService with the API's configuration.
func newServiceConfig(t *testing.T, cfg httpapi.Config) *service {
	t.Helper()
	s := &service{}
	s.hook = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.calls.Add(1)
		if strings.HasSuffix(r.URL.Path, "/fail") {
			w.WriteHeader(http.StatusInternalServerError)
		}
		if strings.HasSuffix(r.URL.Path, "/slow") {
			time.Sleep(500 * time.Millisecond)
		}
	}))
	t.Cleanup(s.hook.Close)
	st, err := jsonstore.New(t.TempDir(), jsonstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := cron.New(st, nil, cron.Config{})
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
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	api, err := httpapi.New(r, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.srv = httptest.NewServer(api)
	t.Cleanup(s.srv.Close)
	return s
}

func (s *service) client(t *testing.T, token string) *client.Client {
	t.Helper()
	c, err := client.New(s.srv.URL, s.srv.Client(), token)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (s *service) job(id string, sched cron.ScheduleSpec) cron.Job {
	return cron.Job{ID: id, Name: "job " + id, HTTP: cron.HTTPConfig{URL: s.hook.URL + "/" + id}, Schedule: sched, MaxRetries: 1}
}

// wantAPIError checks that err is an *APIError of status and field that
// matches sentinel (nil: no check).
func wantAPIError(t *testing.T, what string, err error, status int, field string, sentinel error) {
	t.Helper()
	var ae *client.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("%s: error %v, want an *APIError", what, err)
	}
	if ae.Status != status || ae.Field != field || ae.Message == "" {
		t.Errorf("%s: got status %d field %q message %q, want status %d field %q and a message", what, ae.Status, ae.Field, ae.Message, status, field)
	}
	if sentinel != nil && !errors.Is(err, sentinel) {
		t.Errorf("%s: %v does not match %v", what, err, sentinel)
	}
}

func TestClientJobs(t *testing.T) {
	ctx := context.Background()
	s := newService(t, "s3cret-token-0001")
	c := s.client(t, "s3cret-token-0001")

	// Create, typed and raw.
	daily := cron.ScheduleSpec{Kind: cron.KindCron, Cron: "0 9 * * *", TZ: "Europe/Paris"}
	created, err := c.Create(ctx, s.job("daily", daily))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if created.ID != "daily" || created.Schedule != daily || created.MaxRetries != 1 || created.NextRunAt.IsZero() {
		t.Errorf("Create = %+v, want daily, its schedule, max_retries 1 and a next_run_at", created)
	}
	raw, err := c.CreateJSON(ctx, []byte(`{"name":"raw","http":{"url":"`+s.hook.URL+`/raw"},"schedule":{"kind":"every","every":"1h"}}`))
	if err != nil {
		t.Fatalf("CreateJSON: %v", err)
	}
	if raw.ID == "" || raw.MaxRetries != cron.DefaultMaxRetries {
		t.Errorf("CreateJSON = %+v, want a generated id and the default max_retries", raw)
	}
	for _, id := range []string{"a:1", "b.2", "c_3"} {
		if _, err := c.Create(ctx, s.job(id, cron.Every(time.Hour))); err != nil {
			t.Fatalf("Create %s: %v", id, err)
		}
	}
	got, err := c.Get(ctx, "daily")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if diff := cmp.Diff(created, got); diff != "" {
		t.Errorf("Get (-created +got):\n%s", diff)
	}

	// Refusals carry the API's status, field and sentinel.
	_, err = c.Create(ctx, s.job("daily", daily))
	wantAPIError(t, "Create of an id in use", err, 409, "id", cron.ErrExists)
	_, err = c.Create(ctx, s.job("bad", cron.Cron("0 25 * * *")))
	wantAPIError(t, "Create of a bad cron", err, 400, "schedule.cron", cron.ErrInvalidJob)
	_, err = c.CreateJSON(ctx, []byte(`{"http":{"url":"`+s.hook.URL+`"},"schedule":{"kind":"every","every":"1h"},"last_status":"success"}`))
	wantAPIError(t, "CreateJSON with a system field", err, 400, "last_status", cron.ErrInvalidJob)
	_, err = c.Get(ctx, "nope")
	wantAPIError(t, "Get of an unknown id", err, 404, "", cron.ErrNotFound)

	// Patch.
	patched, err := c.Patch(ctx, "daily", client.JobPatch{Name: ptr("renamed"), Schedule: &cron.ScheduleSpec{Kind: cron.KindCron, TZ: "Asia/Tokyo"}})
	if err != nil {
		t.Fatalf("Patch: %v", err)
	}
	if patched.Name != "renamed" || patched.Schedule.TZ != "Asia/Tokyo" || patched.Schedule.Cron != "0 9 * * *" {
		t.Errorf("Patch = %+v, want the name and tz changed, the cron kept", patched)
	}
	_, err = c.PatchJSON(ctx, "daily", []byte(`{"schedule":{"tz":"Nowhere/Land"}}`))
	wantAPIError(t, "Patch to a bad tz", err, 400, "schedule.tz", cron.ErrInvalidJob)
	_, err = c.PatchJSON(ctx, "nope", []byte(`{"name":"x"}`))
	wantAPIError(t, "Patch of an unknown id", err, 404, "", cron.ErrNotFound)

	// Pause and resume; Next says paused.
	p, err := c.Pause(ctx, "daily")
	if err != nil || !p.Paused {
		t.Fatalf("Pause = %+v, %v; want paused", p, err)
	}
	next, err := c.Next(ctx, "daily", 3)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	if !next.Paused || next.JobID != "daily" || next.Kind != cron.KindCron || next.TZ != "Asia/Tokyo" || len(next.Times) != 3 {
		t.Fatalf("Next = %+v, want daily paused, cron in Asia/Tokyo, 3 times", next)
	}
	for _, tm := range next.Times {
		if l := tm.In(tokyo); l.Hour() != 9 || tm.Location() != time.UTC {
			t.Errorf("Next time %v is %v in Tokyo, want 09:00, given in UTC", tm, l)
		}
	}
	if next, err := c.Next(ctx, "daily", 0); err != nil || len(next.Times) != httpapi.DefaultPreview {
		t.Errorf("Next with n 0: %d times, %v; want the default %d", len(next.Times), err, httpapi.DefaultPreview)
	}
	_, err = c.Next(ctx, "daily", 5000)
	wantAPIError(t, "Next with n 5000", err, 400, "n", nil)
	if errors.Is(err, cron.ErrInvalidJob) {
		t.Errorf("a bad query parameter matches ErrInvalidJob")
	}
	_, err = c.Next(ctx, "nope", 1)
	wantAPIError(t, "Next of an unknown id", err, 404, "", cron.ErrNotFound)
	if r, err := c.Resume(ctx, "daily"); err != nil || r.Paused {
		t.Errorf("Resume = %+v, %v; want enabled", r, err)
	}

	// List: filters and paging.
	if _, err := c.Pause(ctx, "b.2"); err != nil {
		t.Fatal(err)
	}
	off := false
	tests := []struct {
		name string
		opts client.ListOptions
		want []string
	}{
		{"all", client.ListOptions{}, []string{"daily", raw.ID, "a:1", "b.2", "c_3"}},
		{"paused", client.ListOptions{Enabled: &off}, []string{"b.2"}},
		{"kind", client.ListOptions{Kind: cron.KindCron}, []string{"daily"}},
		{"name", client.ListOptions{Name: "job c_3"}, []string{"c_3"}},
		// A pause is a last_status; daily, resumed, says again that it never ran.
		{"never run", client.ListOptions{NeverRun: true}, []string{"daily", raw.ID, "a:1", "c_3"}},
		{"last status", client.ListOptions{LastStatus: cron.StatusPaused}, []string{"b.2"}},
		{"type", client.ListOptions{Type: "report"}, []string{}},
	}
	for _, tt := range tests {
		p, err := c.List(ctx, tt.opts)
		if err != nil {
			t.Fatalf("List %s: %v", tt.name, err)
		}
		if diff := cmp.Diff(tt.want, ids(p.Jobs)); diff != "" || p.Next != "" {
			t.Errorf("List %s: next %q, ids (-want +got):\n%s", tt.name, p.Next, diff)
		}
	}
	var paged []string
	opts := client.ListOptions{Limit: 2}
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("List: paging does not end")
		}
		p, err := c.List(ctx, opts)
		if err != nil {
			t.Fatalf("List page: %v", err)
		}
		paged = append(paged, ids(p.Jobs)...)
		if p.Next == "" {
			break
		}
		opts.After = p.Next
	}
	if diff := cmp.Diff([]string{"daily", raw.ID, "a:1", "b.2", "c_3"}, paged); diff != "" {
		t.Errorf("List in pages of 2 (-want +got):\n%s", diff)
	}
	_, err = c.List(ctx, client.ListOptions{Limit: 5000})
	wantAPIError(t, "List with limit 5000", err, 400, "limit", nil)
	_, err = c.List(ctx, client.ListOptions{Kind: "weekly"})
	wantAPIError(t, "List with a bad kind", err, 400, "kind", nil)

	// Delete.
	if err := c.Delete(ctx, "a:1"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err = c.Get(ctx, "a:1")
	wantAPIError(t, "Get of a deleted job", err, 404, "", cron.ErrNotFound)
	err = c.Delete(ctx, "a:1")
	wantAPIError(t, "Delete again", err, 404, "", cron.ErrNotFound)
}

func ids(jobs []cron.Job) []string {
	out := make([]string, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

func TestClientRuns(t *testing.T) {
	ctx := context.Background()
	s, c := newOKFail(t)
	for _, id := range []string{"ok", "fail", "ok"} {
		runID, err := c.RunNow(ctx, id)
		if err != nil || runID == "" {
			t.Fatalf("RunNow %s = %q, %v", id, runID, err)
		}
		waitRuns(t, c, id, runID)
	}
	_, err := c.RunNow(ctx, "nope")
	wantAPIError(t, "RunNow of an unknown id", err, 404, "", cron.ErrNotFound)

	tests := []struct {
		id   string
		opts client.RunsOptions
		want []cron.Status
	}{
		{"ok", client.RunsOptions{}, []cron.Status{cron.StatusSuccess, cron.StatusSuccess}},
		{"ok", client.RunsOptions{Limit: 1}, []cron.Status{cron.StatusSuccess}},
		{"fail", client.RunsOptions{}, []cron.Status{cron.StatusFailed}},
		{"fail", client.RunsOptions{Status: cron.StatusSuccess}, []cron.Status{}},
		{"ok", client.RunsOptions{Status: cron.StatusSuccess, Limit: 5}, []cron.Status{cron.StatusSuccess, cron.StatusSuccess}},
	}
	for _, tt := range tests {
		runs, err := c.Runs(ctx, tt.id, tt.opts)
		if err != nil {
			t.Fatalf("Runs %s %+v: %v", tt.id, tt.opts, err)
		}
		got := []cron.Status{}
		for _, r := range runs {
			got = append(got, r.Status)
			if r.JobID != tt.id || r.ID == "" || r.TriggeredAt.IsZero() {
				t.Errorf("Runs %s: run %+v lacks its job, id or time", tt.id, r)
			}
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Runs %s %+v (-want +got):\n%s", tt.id, tt.opts, diff)
		}
	}
	if got := s.calls.Load(); got != 3 {
		t.Errorf("the callback was called %d times, want 3", got)
	}
	_, err = c.Runs(ctx, "ok", client.RunsOptions{Status: "great"})
	wantAPIError(t, "Runs with a bad status", err, 400, "status", nil)
	_, err = c.Runs(ctx, "ok", client.RunsOptions{Limit: -1})
	wantAPIError(t, "Runs with a bad limit", err, 400, "limit", nil)
}

// newOKFail starts a service with two hourly jobs, "ok" whose callback
// answers 200 and "fail" whose callback answers 500, without retries.
func newOKFail(t *testing.T) (*service, *client.Client) {
	t.Helper()
	s := newService(t, "")
	c := s.client(t, "")
	for _, id := range []string{"ok", "fail"} {
		j := s.job(id, cron.Every(time.Hour))
		j.MaxRetries = 0
		if _, err := c.Create(context.Background(), j); err != nil {
			t.Fatal(err)
		}
	}
	return s, c
}

// TestClientRunNowWith: overrides, the overlap rule and force, and an
// idempotency key, through the client.
func TestClientRunNowWith(t *testing.T) {
	ctx := context.Background()
	s := newService(t, "")
	c := s.client(t, "")
	j := s.job("slow", cron.Every(time.Hour))
	j.MaxRetries = 0
	if _, err := c.Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	body := []byte("override")
	first, err := c.RunNowWith(ctx, "slow", client.RunNowOptions{Body: body, Headers: map[string]string{"X-A": "1"}, IdempotencyKey: "k"})
	if err != nil || first == "" {
		t.Fatalf("RunNowWith = %q, %v", first, err)
	}
	_, err = c.RunNow(ctx, "slow")
	wantAPIError(t, "RunNow during a run", err, 409, "", cron.ErrInFlight)
	if errors.Is(err, cron.ErrExists) {
		t.Errorf("a run in flight matches cron.ErrExists")
	}
	again, err := c.RunNowWith(ctx, "slow", client.RunNowOptions{Body: body, Headers: map[string]string{"X-A": "1"}, IdempotencyKey: "k"})
	if err != nil || again != first {
		t.Errorf("the same idempotency key again = %q, %v; want %q", again, err, first)
	}
	_, err = c.RunNowWith(ctx, "slow", client.RunNowOptions{IdempotencyKey: "k"})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 422 || ae.Code != "idempotency_key_reused" {
		t.Errorf("the same key with other options: %v, want a 422 idempotency_key_reused", err)
	}
	forced, err := c.RunNowWith(ctx, "slow", client.RunNowOptions{Force: true})
	if err != nil || forced == first {
		t.Errorf("forced RunNowWith = %q, %v; want a run of its own", forced, err)
	}
	_, err = c.RunNowWith(ctx, "slow", client.RunNowOptions{Args: []byte(`1`)})
	wantAPIError(t, "args on an HTTP job", err, 400, "args", cron.ErrInvalidJob)
	waitRuns(t, c, "slow", forced)
	waitRuns(t, c, "slow", first)
}

// waitRuns waits, up to a bound, for run runID of job id in its history.
func waitRuns(t *testing.T, c *client.Client, id, runID string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		runs, err := c.Runs(context.Background(), id, client.RunsOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			if r.ID == runID {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("run %s of %s not in its history after 20s", runID, id)
}

func TestClientPreviewAndHealth(t *testing.T) {
	ctx := context.Background()
	s := newService(t, "tok-secret-000001")
	c := s.client(t, "tok-secret-000001")
	start := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	every := cron.Every(time.Hour)
	every.StartAt = start
	tests := []struct {
		name  string
		spec  cron.ScheduleSpec
		n     int
		want  []time.Time
		field string
	}{
		{"every", every, 2, []time.Time{start, start.Add(time.Hour)}, ""},
		{"once", cron.At(start), 5, []time.Time{start}, ""},
		{"bad tz", cron.ScheduleSpec{Kind: cron.KindCron, Cron: "0 9 * * *", TZ: "Mars/Olympus"}, 1, nil, "schedule.tz"},
		{"below the minimum", cron.Every(time.Millisecond), 1, nil, "schedule.every"},
		{"once passed", cron.At(time.Now().Add(-time.Hour)), 1, nil, "schedule.run_at"},
		{"n too big", every, 1001, nil, "n"},
	}
	for _, tt := range tests {
		got, err := c.Preview(ctx, tt.spec, tt.n, "")
		if tt.field != "" {
			wantAPIError(t, "Preview "+tt.name, err, 400, tt.field, cron.ErrInvalidJob)
			continue
		}
		if err != nil {
			t.Fatalf("Preview %s: %v", tt.name, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Preview %s (-want +got):\n%s", tt.name, diff)
		}
	}
	if got, err := c.Preview(ctx, cron.Every(time.Minute), 0, ""); err != nil || len(got) != httpapi.DefaultPreview {
		t.Errorf("Preview with n 0: %d times, %v; want %d", len(got), err, httpapi.DefaultPreview)
	}

	h, err := c.Health(ctx)
	if err != nil || h["status"] != "ok" {
		t.Errorf("Health = %v, %v; want status ok", h, err)
	}

	// The token: a client without it may only read /health.
	anon := s.client(t, "")
	if _, err := anon.Health(ctx); err != nil {
		t.Errorf("Health without the token: %v", err)
	}
	_, err = anon.List(ctx, client.ListOptions{})
	wantAPIError(t, "List without the token", err, 401, "", client.ErrUnauthorized)
	_, err = s.client(t, "wrong").Get(ctx, "x")
	wantAPIError(t, "Get with a wrong token", err, 401, "", client.ErrUnauthorized)
}

func TestNew(t *testing.T) {
	tests := []struct {
		base, token string
		ok          bool
	}{
		{"http://127.0.0.1:7100", "", true},
		{"https://ksana.example.com/api/", "tok", true},
		{"127.0.0.1:7100", "", false},
		{"ftp://host", "", false},
		{"http://", "", false},
		{"http://host?x=1", "", false},
		{"http://host", " tok", false},
	}
	for _, tt := range tests {
		_, err := client.New(tt.base, nil, tt.token)
		if got := err == nil; got != tt.ok {
			t.Errorf("New(%q, %q) error %v, want ok %v", tt.base, tt.token, err, tt.ok)
		}
	}
}

// TestMountedAndUnreachable: a base URL with a path reaches an API mounted
// there; a service that does not answer is no *APIError.
func TestMountedAndUnreachable(t *testing.T) {
	ctx := context.Background()
	s := newService(t, "")
	mux := http.NewServeMux()
	api, err := forward(s.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("/api/", http.StripPrefix("/api", api))
	front := httptest.NewServer(mux)
	defer front.Close()
	c, err := client.New(front.URL+"/api", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, s.job("a b", cron.Every(time.Hour))); err == nil {
		t.Error("Create of an id with a space: no error")
	}
	if _, err := c.Create(ctx, s.job("m", cron.Every(time.Hour))); err != nil {
		t.Fatalf("Create through a mount: %v", err)
	}
	if j, err := c.Get(ctx, "m"); err != nil || j.ID != "m" {
		t.Errorf("Get through a mount = %+v, %v", j, err)
	}

	front.Close()
	_, err = c.Health(ctx)
	var ae *client.APIError
	if err == nil || errors.As(err, &ae) {
		t.Errorf("Health of a closed server: %v, want a transport error", err)
	}
}

// forward returns a handler that forwards to the server at base.
func forward(base string) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), r.Method, base+r.URL.RequestURI(), r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}), nil
}

// TestClientAudit: the writes of tokens of each role are in the audit
// log, paged and filtered; a token whose role is too small gets an
// ErrForbidden naming the role needed.
func TestClientAudit(t *testing.T) {
	set, err := httpapi.NewTokenSet([]httpapi.Token{
		{Secret: "v-secret-00000001", Role: httpapi.RoleViewer, Name: "vera"},
		{Secret: "o-secret-00000001", Role: httpapi.RoleOperator, Name: "otto"},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := newServiceConfig(t, httpapi.Config{Token: "root-secret-00001", Authenticator: set})
	ctx := context.Background()
	admin, op, viewer := s.client(t, "root-secret-00001"), s.client(t, "o-secret-00000001"), s.client(t, "v-secret-00000001")
	every := cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(time.Hour)}
	for _, id := range []string{"a", "b"} {
		if _, err := admin.Create(ctx, s.job(id, every)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := op.Pause(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	_, err = op.Patch(ctx, "a", client.JobPatch{Name: ptr("x")})
	var ae *client.APIError
	if !errors.Is(err, client.ErrForbidden) || !errors.As(err, &ae) || ae.Role != "admin" {
		t.Fatalf("operator patch: %v, want ErrForbidden naming admin", err)
	}
	if err := admin.Delete(ctx, "b"); err != nil {
		t.Fatal(err)
	}

	p, err := viewer.Audit(ctx, client.AuditOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		for _, e := range p.Entries {
			got = append(got, fmt.Sprintf("%d %s %s %s %s before=%v after=%v", e.ID, e.Who, e.Role, e.Action, e.JobID, e.Before != nil, e.After != nil))
		}
		if p.Next == 0 {
			break
		}
		if p, err = viewer.Audit(ctx, client.AuditOptions{Limit: 2, After: p.Next}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		"1 admin admin create a before=false after=true",
		"2 admin admin create b before=false after=true",
		"3 otto operator pause a before=true after=true",
		"4 admin admin delete b before=true after=false",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit pages (-want +got):\n%s", diff)
	}
	p, err = viewer.Audit(ctx, client.AuditOptions{JobID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Entries) != 2 || p.Entries[1].Before.Paused || !p.Entries[1].After.Paused || p.Next != 0 {
		t.Errorf("audit of a: %+v, want the create and the pause (before running, after paused)", p)
	}
	if _, err := s.client(t, "nope").Audit(ctx, client.AuditOptions{}); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("unknown token: %v, want ErrUnauthorized", err)
	}
}
