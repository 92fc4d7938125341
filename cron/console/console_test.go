package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

func TestMount(t *testing.T) {
	tests := []struct {
		name  string
		mount func(mux *http.ServeMux, c *Console) string
		cfg   Config
	}{
		{"pattern", func(mux *http.ServeMux, c *Console) string { mux.Handle("/jobs-ui/", c); return "/jobs-ui/" }, Config{}},
		{"StripPrefix", func(mux *http.ServeMux, c *Console) string {
			mux.Handle("/ops/jobs/", http.StripPrefix("/ops/jobs", c))
			return "/ops/jobs/"
		}, Config{}},
		{"Config.Prefix", func(mux *http.ServeMux, c *Console) string {
			mux.Handle("/x/", c)
			return "/x/"
		}, Config{Prefix: "/x/"}},
		{"root", func(mux *http.ServeMux, c *Console) string { mux.Handle("/", c); return "/" }, Config{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{console: tt.cfg, mount: tt.mount})
			f.add(t, cron.Job{ID: "j1", Name: "one"})
			prefix := strings.TrimPrefix(f.base, f.srv.URL)
			b := f.browser(t)
			code, body, _ := b.get("/jobs")
			if code != http.StatusOK {
				t.Fatalf("GET jobs: %d\n%s", code, body)
			}
			for _, want := range []string{
				`href="` + prefix + `/jobs/j1"`, `href="` + prefix + `/assets/console.css"`, `action="` + prefix + `/bulk"`,
			} {
				if !strings.Contains(body, want) {
					t.Errorf("jobs page lacks %s", want)
				}
			}
			code, _, resp := b.get("/assets/console.css")
			if code != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/css") {
				t.Errorf("asset: %d %s", code, resp.Header.Get("Content-Type"))
			}
			code, _, _ = b.post("/jobs/j1/pause", nil)
			if code != http.StatusSeeOther {
				t.Fatalf("pause: %d", code)
			}
			if j, _ := f.runner.Get(context.Background(), "j1"); !j.Paused {
				t.Error("j1 not paused")
			}
			if prefix != "" {
				resp, err := b.c.Get(f.srv.URL + prefix)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if loc := resp.Header.Get("Location"); loc != prefix+"/" {
					t.Errorf("GET %s: Location %q, want %q", prefix, loc, prefix+"/")
				}
			}
		})
	}
}

func TestNewChecksConfig(t *testing.T) {
	r, _ := cron.New(nil, cron.ExecutorFunc(nil), cron.Config{})
	for _, cfg := range []Config{{Secret: []byte("short")}, {PageSize: -1}, {PageSize: 5000}, {Prefix: "ui"}, {Prefix: "//evil"}} {
		if _, err := newConsole(r, cfg); err == nil {
			t.Errorf("newConsole(%+v) = nil error", cfg)
		}
	}
	if _, err := newConsole(nil, Config{}); err == nil {
		t.Error("newConsole(nil runner) = nil error")
	}
}

func TestHostileNameIsText(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	const evil = `<script>alert(1)</script>`
	f.add(t, cron.Job{ID: "evil", Name: evil, HTTP: cron.HTTPConfig{URL: "https://example.com/?a=<b>", Body: `"><img src=x onerror=alert(2)>`,
		Headers: map[string]string{"X-Evil": "<svg onload=alert(3)>"}}})
	if _, err := f.runner.Update(context.Background(), "evil", func(j *cron.Job) error {
		j.LastStatus, j.LastError = cron.StatusFailed, `<iframe src="javascript:alert(4)">`
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b := f.browser(t)
	for _, p := range []string{"/", "/jobs", "/jobs?q=%3Cscript%3E", "/jobs/evil", "/jobs/evil/edit"} {
		code, body, _ := b.get(p)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d", p, code)
		}
		for _, raw := range []string{evil, "<img src=x", "<svg onload", "<iframe", "a=<b>"} {
			if strings.Contains(body, raw) {
				t.Errorf("GET %s: the page holds %q unescaped", p, raw)
			}
		}
		if p != "/" && !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("GET %s: the name is not shown as text", p)
		}
	}
}

func TestSecurityHeaders(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	b := f.browser(t)
	for _, p := range []string{"/", "/jobs", "/nope", "/assets/console.js"} {
		_, _, resp := b.get(p)
		h := resp.Header
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: Content-Security-Policy %q", p, csp)
		}
		if h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: X-Frame-Options %q, X-Content-Type-Options %q", p, h.Get("X-Frame-Options"), h.Get("X-Content-Type-Options"))
		}
	}
}

func TestCSRF(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.add(t, cron.Job{ID: "j"})
	b := f.browser(t)
	b.get("/jobs/j")
	other := f.browser(t)
	other.get("/jobs/j")
	tests := []struct {
		name string
		csrf string
		hdr  []string
	}{
		{"missing", "", nil},
		{"wrong", "AAAA", nil},
		{"another browser's", other.csrf, nil},
		{"cross-site", b.csrf, []string{"Sec-Fetch-Site", "cross-site"}},
		{"foreign origin", b.csrf, []string{"Origin", "https://evil.example"}},
	}
	for _, tt := range tests {
		code, body, _ := b.post("/jobs/j/pause", url.Values{"csrf": {tt.csrf}}, tt.hdr...)
		if code != http.StatusForbidden {
			t.Errorf("%s CSRF token: status %d, want 403", tt.name, code)
		}
		if !strings.Contains(body, `id="error"`) {
			t.Errorf("%s CSRF token: no error shown", tt.name)
		}
	}
	for _, p := range []string{"/new", "/jobs/j/edit", "/bulk", "/jobs/j/delete"} {
		if code, _, _ := b.post(p, url.Values{"csrf": {""}, "action": {"delete"}}); code != http.StatusForbidden {
			t.Errorf("POST %s without CSRF token: %d, want 403", p, code)
		}
	}
	if j, _ := f.runner.Get(context.Background(), "j"); j.Paused {
		t.Fatal("a refused request paused the job")
	}
	if code, _, _ := b.post("/jobs/j/pause", nil); code != http.StatusSeeOther {
		t.Fatalf("with its token: %d, want 303", code)
	}
	if j, _ := f.runner.Get(context.Background(), "j"); !j.Paused {
		t.Fatal("not paused")
	}
}

// writeButtons are marks of the controls that write.
var writeButtons = []string{`id="run-now"`, `id="run-with-form"`, `id="pause-form"`, `id="pause-all"`, `id="resume-all"`, `id="pause"`, `id="resume"`, `id="delete"`, `id="edit"`, `id="bulk"`, `/new"`}

func TestRoles(t *testing.T) {
	f := newFixture(t, fixtureOpts{auth: true})
	f.add(t, cron.Job{ID: "j"})
	f.add(t, cron.Job{ID: "k"})

	anon := f.browser(t)
	if code, _, resp := anon.get("/jobs"); code != http.StatusSeeOther || !strings.HasSuffix(resp.Header.Get("Location"), "/login") {
		t.Errorf("anonymous GET /jobs: %d to %q, want 303 to the sign-in form", code, resp.Header.Get("Location"))
	}
	anon.get("/login")
	if code, _, _ := anon.post("/jobs/j/pause", nil); code != http.StatusUnauthorized {
		t.Errorf("anonymous pause: %d, want 401", code)
	}
	anon.get("/login")
	if code, _, _ := anon.post("/login", url.Values{"token": {"nope"}}); code != http.StatusUnauthorized {
		t.Errorf("unknown token: %d, want 401", code)
	}

	viewer := f.browser(t)
	viewer.login(viewerToken)
	for _, p := range []string{"/", "/jobs", "/jobs/j"} {
		code, body, _ := viewer.get(p)
		if code != http.StatusOK {
			t.Fatalf("viewer GET %s: %d", p, code)
		}
		for _, mark := range writeButtons {
			if strings.Contains(body, mark) {
				t.Errorf("viewer GET %s: shows %s", p, mark)
			}
		}
		if !strings.Contains(body, "vera · viewer") {
			t.Errorf("viewer GET %s: does not name the user", p)
		}
	}
	for _, w := range []struct {
		path string
		vals url.Values
	}{
		{"/jobs/j/pause", nil}, {"/jobs/j/run", nil}, {"/jobs/j/delete", nil},
		{"/bulk", url.Values{"action": {"pause"}, "confirm": {"yes"}}},
		{"/new", url.Values{"name": {"x"}, "schedule.kind": {"every"}, "schedule.every": {"1m"}, "http.url": {"https://example.com"}}},
		{"/jobs/j/edit", url.Values{"name": {"renamed"}, "schedule.kind": {"every"}, "schedule.every": {"1m"}, "http.url": {"https://example.com"}}},
	} {
		if code, body, _ := viewer.post(w.path, w.vals); code != http.StatusForbidden {
			t.Errorf("viewer POST %s: %d, want 403\n%s", w.path, code, body)
		}
	}
	if code, _, _ := viewer.get("/new"); code != http.StatusForbidden {
		t.Errorf("viewer GET /new: %d, want 403", code)
	}
	if jobs := listJobs(t, f.runner); len(jobs) != 2 || jobs[0].Paused || jobs[0].Name != "" {
		t.Fatalf("a viewer changed the jobs: %+v", jobs)
	}

	op := f.browser(t)
	op.login(operatorToken)
	_, body, _ := op.get("/jobs/j")
	if !strings.Contains(body, `id="pause"`) || strings.Contains(body, `id="delete"`) {
		t.Error("operator: want the pause button and no delete button")
	}
	if code, _, _ := op.post("/jobs/j/pause", nil); code != http.StatusSeeOther {
		t.Errorf("operator pause: %d, want 303", code)
	}
	if code, _, _ := op.post("/jobs/j/delete", nil); code != http.StatusForbidden {
		t.Errorf("operator delete: %d, want 403", code)
	}
	if code, _, _ := op.post("/bulk", url.Values{"action": {"delete"}}); code != http.StatusForbidden {
		t.Errorf("operator bulk delete: %d, want 403", code)
	}

	admin := f.browser(t)
	admin.login(adminToken)
	if code, _, _ := admin.post("/jobs/k/delete", nil); code != http.StatusSeeOther {
		t.Errorf("admin delete: %d, want 303", code)
	}
	if _, err := f.runner.Get(context.Background(), "k"); err == nil {
		t.Error("k not deleted")
	}
	// The audit log names who did what, and the job page shows it.
	_, body, _ = admin.get("/jobs/j")
	if !strings.Contains(body, "otto (operator)") || !strings.Contains(body, "<code>pause</code>") {
		t.Error("the job page does not show the operator's pause in its changes")
	}
	// Signing out forgets the token.
	if code, _, _ := admin.post("/logout", nil); code != http.StatusSeeOther {
		t.Errorf("logout: %d", code)
	}
	if code, _, _ := admin.get("/jobs"); code != http.StatusSeeOther {
		t.Errorf("after logout GET /jobs: %d, want 303", code)
	}
}

func TestCookies(t *testing.T) {
	for _, tls := range []bool{false, true} {
		f := newFixture(t, fixtureOpts{auth: true, tls: tls})
		b := f.browser(t)
		b.get("/login")
		_, _, resp := b.post("/login", url.Values{"token": {adminToken}})
		var tok *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == sessionCookie {
				tok = c
			}
		}
		if tok == nil {
			t.Fatal("no session cookie")
		}
		if !tok.HttpOnly || tok.SameSite != http.SameSiteStrictMode || tok.Path != "/jobs-ui/" || tok.Secure != tls {
			t.Errorf("tls=%v: session cookie HttpOnly=%v SameSite=%v Path=%q Secure=%v", tls, tok.HttpOnly, tok.SameSite, tok.Path, tok.Secure)
		}
		// The cookie names a session; it is not the token.
		if strings.Contains(tok.Value, adminToken) || tok.Value == adminToken {
			t.Errorf("the session cookie holds the token: %q", tok.Value)
		}
	}
}

func TestReadOnly(t *testing.T) {
	f := newFixture(t, fixtureOpts{console: Config{ReadOnly: true}})
	f.add(t, cron.Job{ID: "j"})
	b := f.browser(t)
	_, body, _ := b.get("/jobs/j")
	for _, mark := range writeButtons {
		if strings.Contains(body, mark) {
			t.Errorf("read-only job page shows %s", mark)
		}
	}
	for _, p := range []string{"/jobs/j/pause", "/jobs/j/delete", "/bulk", "/new"} {
		if code, _, _ := b.post(p, url.Values{"action": {"pause"}}); code != http.StatusForbidden {
			t.Errorf("read-only POST %s: %d, want 403", p, code)
		}
	}
	if j, _ := f.runner.Get(context.Background(), "j"); j.Paused {
		t.Error("a read-only console paused a job")
	}
}

func TestFormShowsTheAPIErrorBesideTheField(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	b := f.browser(t)
	b.get("/new")
	form := url.Values{"id": {"nightly"}, "name": {"nightly"}, "type": {"http"}, "enabled": {"on"}, "schedule.kind": {"every"},
		"schedule.every": {"soon"}, "http.method": {"POST"}, "http.url": {"https://example.com/n"},
		"http.headers": {"X-A: 1\nX-B: 2"}, "max_retries": {"2"}}
	code, body, _ := b.post("/new", form)
	if code != http.StatusBadRequest {
		t.Fatalf("bad every: %d, want 400", code)
	}
	// The same body sent to the API is refused with the same message.
	resp, err := http.Post(f.srv.URL+"/api/jobs", "application/json", strings.NewReader(
		`{"id":"nightly","schedule":{"kind":"every","every":"soon"},"http":{"url":"https://example.com/n"}}`))
	if err != nil {
		t.Fatal(err)
	}
	var apiErr struct{ Error, Field string }
	_ = json.NewDecoder(resp.Body).Decode(&apiErr)
	resp.Body.Close()
	if apiErr.Field != "schedule.every" {
		t.Fatalf("API error %+v", apiErr)
	}
	want := fmt.Sprintf(`<p class="error field-error" data-field="schedule.every">%s</p>`, htmlEscape(apiErr.Error))
	if !strings.Contains(body, want) {
		t.Errorf("the form does not show the API's error beside schedule.every; want %s in\n%s", want, body)
	}
	if !strings.Contains(body, `value="soon"`) {
		t.Error("the form lost the value typed")
	}
	for _, bad := range []struct{ field, value, where string }{
		{"max_retries", "many", "max_retries"},
		{"http.headers", "no colon here", "http.headers"},
		{"http.url", "ftp://example.com", "http.url"},
		{"timeout", "-5s", "timeout"},
	} {
		vals := url.Values{}
		for k, v := range form {
			vals[k] = v
		}
		vals.Set("schedule.every", "1m")
		vals.Set(bad.field, bad.value)
		code, body, _ := b.post("/new", vals)
		if code != http.StatusBadRequest || !strings.Contains(body, `data-field="`+bad.where+`"`) {
			t.Errorf("%s=%q: %d, want 400 with an error beside %s", bad.field, bad.value, code, bad.where)
		}
	}
	form.Set("schedule.every", "90s")
	code, _, resp2 := b.post("/new", form)
	if code != http.StatusSeeOther || !strings.HasSuffix(resp2.Header.Get("Location"), "/jobs/nightly") {
		t.Fatalf("good form: %d to %q", code, resp2.Header.Get("Location"))
	}
	j, err := f.runner.Get(context.Background(), "nightly")
	if err != nil {
		t.Fatal(err)
	}
	if j.Schedule.Every != cron.Duration(90*time.Second) || j.MaxRetries != 2 || j.HTTP.Headers["X-B"] != "2" || j.HTTP.Method != "POST" {
		t.Errorf("created %+v", j)
	}

	// Edit: a cron schedule in a zone, one header fewer, retries back to
	// the default.
	b.get("/jobs/nightly/edit")
	edit := url.Values{"name": {"nightly v2"}, "type": {"http"}, "enabled": {"on"}, "schedule.kind": {"cron"}, "schedule.cron": {"30 2 * * *"},
		"schedule.tz": {"Europe/Paris"}, "http.method": {"GET"}, "http.url": {"https://example.com/n2"}, "http.headers": {"X-A: 9"}}
	if code, body, _ := b.post("/jobs/nightly/edit", edit); code != http.StatusSeeOther {
		t.Fatalf("edit: %d\n%s", code, body)
	}
	j, _ = f.runner.Get(context.Background(), "nightly")
	if j.Name != "nightly v2" || j.Schedule.Kind != cron.KindCron || j.Schedule.Every != 0 || j.Schedule.TZ != "Europe/Paris" ||
		len(j.HTTP.Headers) != 1 || j.HTTP.Headers["X-A"] != "9" || j.MaxRetries != cron.DefaultMaxRetries {
		t.Errorf("edited %+v", j)
	}
	_, body, _ = b.get("/jobs/nightly")
	if !strings.Contains(body, "every day at 02:30 (Europe/Paris)") || !strings.Contains(body, "CET") && !strings.Contains(body, "CEST") {
		t.Error("the job page does not show the schedule in words and its next times in its zone")
	}
}

func htmlEscape(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")
	return r.Replace(s)
}

func TestBulk(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	for i := range 10 {
		name := fmt.Sprintf("other-%d", i)
		if i%3 == 0 {
			name = fmt.Sprintf("Batch-%d", i)
		}
		f.add(t, cron.Job{ID: fmt.Sprintf("j%d", i), Name: name})
	}
	b := f.browser(t)
	b.get("/jobs?q=batch")
	code, body, _ := b.post("/bulk", url.Values{"action": {"pause"}, "q": {"batch"}})
	if code != http.StatusOK || !strings.Contains(body, `<b id="confirm-count">4</b>`) {
		t.Fatalf("bulk without confirm: %d, want the confirmation of 4 jobs\n%s", code, body)
	}
	for _, j := range listJobs(t, f.runner) {
		if j.Paused {
			t.Fatal("the confirmation paused a job")
		}
	}
	code, _, resp := b.post("/bulk", url.Values{"action": {"pause"}, "q": {"batch"}, "confirm": {"yes"}})
	if code != http.StatusSeeOther {
		t.Fatalf("bulk: %d", code)
	}
	for _, j := range listJobs(t, f.runner) {
		if want := strings.HasPrefix(j.Name, "Batch"); j.Paused != want {
			t.Errorf("%s (%s): paused %v, want %v", j.ID, j.Name, j.Paused, want)
		}
	}
	loc := resp.Header.Get("Location")
	_, body, _ = b.get(strings.TrimPrefix(loc, "/jobs-ui"))
	if !strings.Contains(body, "pause: 4 of 4 jobs") {
		t.Errorf("no outcome shown after the bulk action:\n%s", body)
	}
	// No filter: every job, counted by the runner.
	if code, body, _ := b.post("/bulk", url.Values{"action": {"resume"}}); code != http.StatusOK || !strings.Contains(body, `<b id="confirm-count">10</b>`) {
		t.Errorf("bulk of every job without confirm: %d, want the confirmation of 10 jobs\n%s", code, body)
	}
	if code, _, _ := b.post("/bulk", url.Values{"action": {"explode"}}); code != http.StatusBadRequest {
		t.Errorf("unknown action: %d, want 400", code)
	}
	if code, _, _ := b.post("/bulk", url.Values{"action": {"pause"}, "kind": {"weekly"}}); code != http.StatusBadRequest {
		t.Errorf("bad kind: %d, want 400", code)
	}
}

func TestRunNowShowsInHistory(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.add(t, cron.Job{ID: "j", Schedule: cron.Every(time.Hour)})
	b := f.browser(t)
	b.get("/jobs/j")
	if code, _, _ := b.post("/jobs/j/run", url.Values{"back": {"/jobs/j"}}); code != http.StatusSeeOther {
		t.Fatalf("run: %d", code)
	}
	select {
	case <-f.runs:
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not happen")
	}
	code, body, _ := b.get("/jobs/j/history")
	if code != http.StatusOK || strings.Count(body, `class="run"`) != 1 || !strings.Contains(body, "st-success") || !strings.Contains(body, "<td>200</td>") {
		t.Errorf("history: %d\n%s", code, body)
	}
	if strings.Contains(body, "<html") {
		t.Error("the history part is a whole page")
	}
	if !strings.Contains(body, `class="tag runnow"`) || !strings.Contains(body, `<span class="small trigger">by `) {
		t.Errorf("the history does not say the run was a run-now, and by whom:\n%s", body)
	}
}

func TestBadRequests(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.add(t, cron.Job{ID: "j"})
	b := f.browser(t)
	for _, tt := range []struct {
		path string
		want int
	}{
		{"/jobs/nope", 404}, {"/jobs?status=weird", 400}, {"/jobs?after=gone", 400}, {"/nothing", 404}, {"/jobs/j/edit/x", 404},
	} {
		if code, body, _ := b.get(tt.path); code != tt.want || !strings.Contains(body, `id="error"`) {
			t.Errorf("GET %s: %d, want %d with an error", tt.path, code, tt.want)
		}
	}
	if code, _, _ := b.post("/jobs/j/explode", nil); code != http.StatusNotFound {
		t.Errorf("unknown action: %d, want 404", code)
	}
	// A back field that leaves the console is ignored.
	for _, back := range []string{"//evil.example/x", "/\\evil.example", "/\t/evil.example", "https://evil.example/", "/%0a/x\n"} {
		_, _, resp := b.post("/jobs/j/pause", url.Values{"back": {back}})
		if loc := resp.Header.Get("Location"); loc != "/jobs-ui/jobs/j" {
			t.Errorf("back %q: redirect to %q, want /jobs-ui/jobs/j", back, loc)
		}
	}
	_, _, resp := b.post("/jobs/j/resume", url.Values{"back": {"/jobs?kind=every"}})
	if loc := resp.Header.Get("Location"); loc != "/jobs-ui/jobs?kind=every" {
		t.Errorf("back to the list: redirect to %q", loc)
	}
}

// TestPageWeight holds each page under 100 KB with a full page of jobs
// and a full history.
func TestPageWeight(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	long := strings.Repeat("x", 120)
	for i := range 200 {
		f.add(t, cron.Job{ID: fmt.Sprintf("job-%04d-%s", i, long[:60]), Name: "name " + long,
			Schedule: cron.Cron("*/5 * * * *")})
	}
	id := listJobs(t, f.runner)[0].ID
	if _, err := f.runner.Update(context.Background(), id, func(j *cron.Job) error {
		j.LastStatus, j.LastError = cron.StatusFailed, strings.Repeat("e", 5000)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for range historyRuns + 5 {
		if _, err := f.runner.RunNow(context.Background(), id, cron.RunOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
		<-f.runs
	}
	b := f.browser(t)
	for _, p := range []string{"/", "/jobs", "/jobs?kind=cron", "/jobs/" + id, "/jobs/" + id + "/edit", "/new"} {
		code, body, _ := b.get(p)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d", p, code)
		}
		if len(body) >= 100<<10 {
			t.Errorf("GET %s: %d bytes, want < 100 KB", p, len(body))
		}
		t.Logf("GET %s: %d bytes", p, len(body))
	}
}

func TestCleanLocal(t *testing.T) {
	for p, want := range map[string]bool{
		"/": true, "/jobs": true, "/jobs/": true, "/jobs/a%2Fb": true, "/jobs/a.b": true,
		"//jobs": false, "/jobs//x": false, "/jobs/./x": false, "/jobs/../x": false, "/..": false, "jobs": false,
	} {
		if got := cleanLocal(p); got != want {
			t.Errorf("cleanLocal(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestDescribe(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range []struct {
		s         cron.ScheduleSpec
		words, tz string
	}{
		{cron.Cron("0 3 * * *"), "every day at 03:00 (UTC)", "UTC"},
		{cron.ScheduleSpec{Kind: cron.KindCron, Cron: "30 9 * * 1-5", TZ: "Europe/Paris"}, "Monday to Friday at 09:30 (Europe/Paris)", "Europe/Paris"},
		{cron.Cron("CRON_TZ=Asia/Tokyo */15 * * * *"), "every 15 minutes, every day (Asia/Tokyo)", "Asia/Tokyo"},
		{cron.Cron("@hourly"), "every hour, on the hour (UTC)", "UTC"},
		{cron.Cron("0 0 1,15 * *"), `on the cron expression "0 0 1,15 * *" (UTC)`, "UTC"},
		{cron.Every(90 * time.Second), "every 90 seconds", "UTC"},
		{cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(time.Hour), Jitter: cron.Duration(time.Minute)}, "every hour, each run up to 1 minute late (jitter)", "UTC"},
		{cron.At(at), "once, at 2030-01-02 03:04:05 UTC", "UTC"},
	} {
		if got := describe(tt.s); got != tt.words {
			t.Errorf("describe(%+v) = %q, want %q", tt.s, got, tt.words)
		}
		if got := zoneName(tt.s); got != tt.tz {
			t.Errorf("zoneName(%+v) = %q, want %q", tt.s, got, tt.tz)
		}
	}
}

// TestSecretsHidden: a viewer's or an operator's job page shows no header
// value, URL password or alert secret of the job; an admin's shows them.
func TestSecretsHidden(t *testing.T) {
	f := newFixture(t, fixtureOpts{auth: true})
	j := cron.Job{ID: "s", HTTP: cron.HTTPConfig{Method: "POST", URL: "https://bob:pw-123@example.com/hook",
		Headers: map[string]string{"Authorization": "Bearer cb-token"}},
		Alert: &cron.AlertConfig{URL: "https://hooks.example.com/a", Secret: "alert-secret-1"}}
	f.add(t, j)
	secrets := []string{"pw-123", "cb-token", "alert-secret-1"}
	for tok, shows := range map[string]bool{viewerToken: false, operatorToken: false, adminToken: true} {
		b := f.browser(t)
		b.login(tok)
		code, body, _ := b.get("/jobs/s")
		if code != http.StatusOK {
			t.Fatalf("GET /jobs/s with %s: %d", tok, code)
		}
		for _, sec := range secrets[:2] {
			if strings.Contains(body, sec) != shows {
				t.Errorf("job page with %s: shows %q = %v, want %v", tok, sec, !shows, shows)
			}
		}
		if strings.Contains(body, secrets[2]) && !shows {
			t.Errorf("job page with %s shows the alert secret", tok)
		}
	}
}

// TestBulkConfirmBeyondCountMax: over more than countMax jobs, the
// confirmation of a bulk action with a filter does not scan them to count
// the matching ones (it says so), and the action still applies to exactly
// those, saying how many.
func TestBulkConfirmBeyondCountMax(t *testing.T) {
	if testing.Short() {
		t.Skip("100k jobs")
	}
	f := newFixture(t, fixtureOpts{})
	ctx := context.Background()
	for i := range countMax + 1 {
		name := "other"
		if i%25000 == 0 {
			name = "Batch"
		}
		if _, err := f.runner.Add(ctx, cron.Job{ID: fmt.Sprintf("j%06d", i), Name: name,
			HTTP: cron.HTTPConfig{URL: "https://example.com/hook"}, Schedule: cron.Every(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	b := f.browser(t)
	b.get("/jobs?q=batch")
	code, body, _ := b.post("/bulk", url.Values{"action": {"pause"}, "q": {"batch"}})
	if code != http.StatusOK || strings.Contains(body, `id="confirm-count"`) || !strings.Contains(body, "100,001 jobs") {
		t.Fatalf("bulk confirmation over 100,001 jobs: %d, want one that names every job matching, not counted\n%s", code, body)
	}
	code, _, resp := b.post("/bulk", url.Values{"action": {"pause"}, "q": {"batch"}, "confirm": {"yes"}})
	if code != http.StatusSeeOther {
		t.Fatalf("bulk: %d", code)
	}
	_, body, _ = b.get(strings.TrimPrefix(resp.Header.Get("Location"), "/jobs-ui"))
	if !strings.Contains(body, "pause: 5 of 5 jobs") {
		t.Errorf("no outcome of 5 jobs shown after the bulk action:\n%s", body)
	}
	if code, body, _ := b.post("/bulk", url.Values{"action": {"resume"}}); code != http.StatusOK || !strings.Contains(body, `<b id="confirm-count">100001</b>`) {
		t.Errorf("bulk of every job: %d, want the confirmation of 100001 jobs", code)
	}
}
