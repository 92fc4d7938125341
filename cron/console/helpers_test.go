package console

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/httpapi"
)

// The tokens of the fixtures, one per role.
const (
	viewerToken   = "viewer-secret-0001"
	operatorToken = "operator-secret-01"
	adminToken    = "admin-secret-00001"
)

type fixture struct {
	runner *cron.Runner
	api    *httpapi.Server
	srv    *httptest.Server
	base   string // the console's URL, without the trailing slash
	runs   chan cron.Run
}

type fixtureOpts struct {
	auth    bool // tokens of each role
	console Config
	mount   func(mux *http.ServeMux, c *Console) string // returns the mount path; default "/jobs-ui/" by pattern
	tls     bool
	store   cron.Store    // the runner's; default a new MemStore
	exec    cron.Executor // the runner's; default success at once
	runner  cron.Config   // the runner's settings; Observer is the fixture's
}

// newFixture serves a console over a running runner whose executor
// answers success at once (or o.exec).
func newFixture(t testing.TB, o fixtureOpts) *fixture {
	t.Helper()
	f := &fixture{runs: make(chan cron.Run, 100)}
	var exec cron.Executor = cron.ExecutorFunc(func(ctx context.Context, j *cron.Job, info cron.RunInfo) cron.Result {
		return cron.Result{Status: cron.StatusSuccess, Attempts: 1, HTTPStatus: 200}
	})
	var st cron.Store = cron.NewMemStore()
	if o.store != nil {
		st = o.store
	}
	if o.exec != nil {
		exec = o.exec
	}
	rcfg := o.runner
	rcfg.Observer = cron.ObserverFunc(func(run cron.Run) {
		select {
		case f.runs <- run:
		default:
		}
	})
	r, err := cron.New(st, exec, rcfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	acfg := httpapi.Config{}
	if o.auth {
		ts, err := httpapi.NewTokenSet([]httpapi.Token{
			{Secret: viewerToken, Role: httpapi.RoleViewer, Name: "vera"},
			{Secret: operatorToken, Role: httpapi.RoleOperator, Name: "otto"},
			{Secret: adminToken, Role: httpapi.RoleAdmin, Name: "ada"},
		})
		if err != nil {
			t.Fatal(err)
		}
		acfg.Authenticator = ts
	}
	api, err := httpapi.New(r, acfg)
	if err != nil {
		t.Fatal(err)
	}
	o.console.API = api
	c, err := newConsole(r, o.console)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mount := "/jobs-ui/"
	if o.mount != nil {
		mount = o.mount(mux, c)
	} else {
		mux.Handle(mount, c)
	}
	mux.Handle("/api/", http.StripPrefix("/api", api))
	if o.tls {
		f.srv = httptest.NewTLSServer(mux)
	} else {
		f.srv = httptest.NewServer(mux)
	}
	t.Cleanup(f.srv.Close)
	f.runner, f.api, f.base = r, api, f.srv.URL+strings.TrimSuffix(mount, "/")
	return f
}

// add adds a job to the runner.
func (f *fixture) add(t testing.TB, j cron.Job) cron.Job {
	t.Helper()
	if j.HTTP.URL == "" && j.IsHTTP() {
		j.HTTP.URL = "https://example.com/hook"
	}
	if j.Schedule.Kind == "" {
		j.Schedule = cron.Every(time.Hour)
	}
	got, err := f.runner.Add(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// browser is a client with its own cookies, as one browser.
type browser struct {
	t    testing.TB
	f    *fixture
	c    *http.Client
	csrf string // the CSRF token of the last page read
}

func (f *fixture) browser(t testing.TB) *browser {
	jar, _ := cookiejar.New(nil)
	c := f.srv.Client()
	c2 := *c
	c2.Jar = jar
	c2.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if tr, ok := c2.Transport.(*http.Transport); ok && tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{}
	}
	return &browser{t: t, f: f, c: &c2}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// get reads a page of the console (path relative to its mount).
func (b *browser) get(path string) (int, string, *http.Response) {
	b.t.Helper()
	resp, err := b.c.Get(b.f.base + path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if m := csrfRE.FindSubmatch(body); m != nil {
		b.csrf = string(m[1])
	}
	return resp.StatusCode, string(body), resp
}

// post sends a form; csrf is added unless vals has one.
func (b *browser) post(path string, vals url.Values, hdr ...string) (int, string, *http.Response) {
	b.t.Helper()
	if vals == nil {
		vals = url.Values{}
	}
	if _, ok := vals["csrf"]; !ok {
		if b.csrf == "" {
			b.get("/")
		}
		vals.Set("csrf", b.csrf)
	}
	req, _ := http.NewRequest(http.MethodPost, b.f.base+path, strings.NewReader(vals.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp
}

// login signs in with token and fails the test unless it works.
func (b *browser) login(token string) {
	b.t.Helper()
	b.get("/login")
	code, body, _ := b.post("/login", url.Values{"token": {token}})
	if code != http.StatusSeeOther {
		b.t.Fatalf("login: status %d, want 303; page:\n%s", code, body)
	}
	b.get("/")
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
