package console_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ksana-dev/ksana/internal/websec"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/scheduler/console"
)

// TestPages signs in read-only and as admin, and checks what each page
// shows, the security headers, and that only the admin sees the buttons
// that write.
func TestPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t, console.Config{ReadToken: readToken, AdminToken: adminToken, PageSize: 2})
	reader, admin := f.user(t), f.user(t)
	reader.login(readToken)
	admin.login(adminToken)

	tests := []struct {
		path string
		want []string
	}{
		{"/", []string{`id="role">read<`, "node-1", "node-2", "session-1", "inst-a", other, `href="pool?name=zh-en"`, "en-fr", `id="n-jobs">3<`}},
		{"/pool?name=zh-en", []string{"Pool zh-en", "node-1", f.jobs[0], f.jobs[1], f.jobs[2], `id="capacity">4<`}},
		{"/pool?name=en-fr", []string{"Pool en-fr", "node-2", "0 / 2"}},
		{"/jobs", []string{"RUNNING", "<b>3</b>", `id="next"`, "turn-1", "node-1"}},
		{"/jobs?state=RUNNING&after=" + f.jobs[0], []string{"RUNNING"}},
		{"/jobs?state=CREATED", []string{`id="no-jobs"`}},
		{"/inboxes", []string{"inst-a", other, `href="dlq?instance=inst-b">2<`}},
		{"/dlq?instance=" + other, []string{f.dead[0].ID, f.dead[1].ID, "malformed: test", "(14 bytes, hidden)", "&lt;script&gt;alert(1)&lt;/script&gt;", "need the admin token"}},
		{"/dlq", []string{`id="no-dlq"`}},
	}
	for _, tt := range tests {
		code, body, h := reader.get(tt.path)
		if code != http.StatusOK {
			t.Errorf("GET %s: status %d, want 200\n%s", tt.path, code, body)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s: the page lacks %q", tt.path, w)
			}
		}
		for _, bad := range []string{"secret-payload", "<script>alert", `class="requeue"`} {
			if strings.Contains(body, bad) {
				t.Errorf("GET %s as a reader: the page shows %q", tt.path, bad)
			}
		}
		if got := h.Get("Content-Security-Policy"); !strings.Contains(got, "default-src 'self'") || !strings.Contains(got, "frame-ancestors 'none'") {
			t.Errorf("GET %s: Content-Security-Policy = %q", tt.path, got)
		}
		if got := h.Get("X-Frame-Options"); got != "DENY" {
			t.Errorf("GET %s: X-Frame-Options = %q, want DENY", tt.path, got)
		}
	}
	// The jobs pages, two at a time, list the three jobs once each.
	_, p1, _ := reader.get("/jobs")
	_, p2, _ := reader.get("/jobs?after=" + sortedJobs(f)[1])
	for _, id := range f.jobs {
		if n := strings.Count(p1, "<code>"+id+"</code>") + strings.Count(p2, "<code>"+id+"</code>"); n != 1 {
			t.Errorf("job %s is on the two pages %d times, want 1", id, n)
		}
	}
	code, body, _ := admin.get("/dlq?instance=" + other)
	if code != http.StatusOK || strings.Count(body, `class="requeue"`) != 2 || strings.Count(body, `danger delete`) != 2 {
		t.Errorf("the admin's dead letters page (status %d) lacks a requeue and a delete button per letter\n%s", code, body)
	}
}

func sortedJobs(f *fixture) []string {
	ids := append([]string(nil), f.jobs...)
	for i := range ids {
		for j := i + 1; j < len(ids); j++ {
			if ids[j] < ids[i] {
				ids[i], ids[j] = ids[j], ids[i]
			}
		}
	}
	return ids
}

// TestSignIn: with tokens set every page needs a sign-in, an unknown
// token is refused, sign-out ends the session.
func TestSignIn(t *testing.T) {
	t.Parallel()
	f := newFixture(t, console.Config{ReadToken: readToken, AdminToken: adminToken})
	u := f.user(t)
	for _, p := range []string{"/", "/jobs", "/pool?name=zh-en", "/inboxes", "/dlq"} {
		res, err := u.c.Get(f.base + p)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ui/login" {
			t.Errorf("GET %s not signed in: %d to %q, want 303 to /ui/login", p, res.StatusCode, res.Header.Get("Location"))
		}
	}
	u.get("/login")
	if code, body := u.post("/login", url.Values{"token": {"wrong-token-0123456789"}}, nil); code != http.StatusUnauthorized || !strings.Contains(body, "unknown token") {
		t.Errorf("sign in with a wrong token: %d, want 401 with a message\n%s", code, body)
	}
	u.login(adminToken)
	if code, _, _ := u.get("/"); code != http.StatusOK {
		t.Fatalf("overview after sign-in: %d", code)
	}
	if code, _ := u.post("/logout", nil, nil); code != http.StatusSeeOther {
		t.Errorf("sign out: %d, want 303", code)
	}
	if code, _, _ := u.get("/"); code != http.StatusSeeOther {
		t.Errorf("overview after sign-out: %d, want 303 to the sign-in", code)
	}
	// The trailing slash of the mount point.
	if res, err := u.c.Get(f.srv.URL + "/ui"); err != nil || res.StatusCode != http.StatusMovedPermanently && res.StatusCode != http.StatusFound && res.StatusCode != http.StatusTemporaryRedirect {
		t.Errorf("GET /ui: %v %v, want a redirect to /ui/", res.StatusCode, err)
	}
}

// TestDeadLetterActions: an admin requeues and deletes; a reader, a
// visitor, a form without its CSRF token, one from another origin and
// one that is no URL-encoded form are refused and change nothing.
func TestDeadLetterActions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, console.Config{ReadToken: readToken, AdminToken: adminToken})
	reader, admin, visitor := f.user(t), f.user(t), f.user(t)
	reader.login(readToken)
	admin.login(adminToken)
	visitor.get("/login")
	form := func(id string) url.Values { return url.Values{"instance": {other}, "id": {id}} }
	refused := []struct {
		name string
		u    *user
		path string
		form url.Values
		edit func(*http.Request)
		want int
	}{
		{"reader requeues", reader, "/dlq/requeue", form(f.dead[0].ID), nil, http.StatusForbidden},
		{"reader deletes", reader, "/dlq/delete", form(f.dead[0].ID), nil, http.StatusForbidden},
		{"visitor requeues", visitor, "/dlq/requeue", form(f.dead[0].ID), nil, http.StatusUnauthorized},
		{"no CSRF token", admin, "/dlq/requeue", url.Values{"instance": {other}, "id": {f.dead[0].ID}, "csrf": {""}}, nil, http.StatusForbidden},
		{"wrong CSRF token", admin, "/dlq/requeue", url.Values{"instance": {other}, "id": {f.dead[0].ID}, "csrf": {"x" + admin.csrf}}, nil, http.StatusForbidden},
		{"another origin", admin, "/dlq/requeue", form(f.dead[0].ID), func(r *http.Request) {
			r.Header.Set("Origin", "https://evil.example")
			r.Header.Set("Sec-Fetch-Site", "cross-site")
		}, http.StatusForbidden},
		{"JSON body", admin, "/dlq/requeue", form(f.dead[0].ID), func(r *http.Request) { r.Header.Set("Content-Type", "application/json") }, http.StatusUnsupportedMediaType},
		{"bad instance", admin, "/dlq/requeue", url.Values{"instance": {"a b"}, "id": {f.dead[0].ID}}, nil, http.StatusBadRequest},
		{"unknown id", admin, "/dlq/requeue", form("1-999"), nil, http.StatusNotFound},
	}
	for _, tt := range refused {
		if code, body := tt.u.post(tt.path, tt.form, tt.edit); code != tt.want {
			t.Errorf("%s: status %d, want %d\n%s", tt.name, code, tt.want, body)
		}
	}
	ctx := context.Background()
	if dls, _ := f.inbox.DeadLetters(ctx, 10); len(dls) != 2 {
		t.Fatalf("after the refused writes the queue holds %d dead letters, want 2", len(dls))
	}
	admin.get("/dlq?instance=" + other)
	if code, body := admin.post("/dlq/requeue", form(f.dead[0].ID), nil); code != http.StatusSeeOther {
		t.Fatalf("admin requeues: %d, want 303\n%s", code, body)
	}
	_, body, _ := admin.get("/dlq?instance=" + other)
	if !strings.Contains(body, "requeued to the inbox of "+other) || strings.Contains(body, `id="dl-`+f.dead[0].ID+`"`) {
		t.Errorf("after the requeue the page lacks its message or still lists %s\n%s", f.dead[0].ID, body)
	}
	msgs, err := f.inbox.Read(ctx, "c2", 10, 0)
	if err != nil || len(msgs) != 1 || msgs[0].Fields.Get("job_id") != "j-dead-0" {
		t.Errorf("the inbox after the requeue: %v, %v; want the dead letter's fields", msgs, err)
	}
	if code, body := admin.post("/dlq/delete", form(f.dead[1].ID), nil); code != http.StatusSeeOther {
		t.Fatalf("admin deletes: %d, want 303\n%s", code, body)
	}
	if dls, _ := f.inbox.DeadLetters(ctx, 10); len(dls) != 0 {
		t.Errorf("after the requeue and the delete the queue holds %v, want none", dls)
	}
	if code, _ := admin.post("/dlq/delete", form(f.dead[1].ID), nil); code != http.StatusNotFound {
		t.Errorf("delete again: %d, want 404", code)
	}
}

// TestOpenConsole: without tokens every visitor reads, nobody writes.
func TestOpenConsole(t *testing.T) {
	t.Parallel()
	f := newFixture(t, console.Config{})
	u := f.user(t)
	code, body, _ := u.get("/dlq?instance=" + other)
	if code != http.StatusOK || strings.Contains(body, `class="requeue"`) {
		t.Fatalf("open console's dead letters: %d, buttons shown = %v", code, strings.Contains(body, `class="requeue"`))
	}
	if code, _ := u.post("/dlq/requeue", url.Values{"instance": {other}, "id": {f.dead[0].ID}}, nil); code != http.StatusForbidden {
		t.Errorf("requeue on an open console: %d, want 403", code)
	}
	if code, _, _ := u.get("/login"); code != http.StatusSeeOther {
		t.Errorf("sign-in form of an open console: %d, want a redirect to the overview", code)
	}
}

func TestNewBadConfig(t *testing.T) {
	t.Parallel()
	cfg := scheduler.Config{InstanceID: "x"}
	st, err := scheduler.NewMemStores(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d, err := scheduler.NewDispatcher(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  console.Config
		want string
	}{
		{"short read token", console.Config{ReadToken: "short"}, "Config.ReadToken"},
		{"short admin token", console.Config{AdminToken: "short"}, "Config.AdminToken"},
		{"same tokens", console.Config{ReadToken: readToken, AdminToken: readToken}, "Config.AdminToken"},
		{"short secret", console.Config{Secret: []byte("x")}, "Config.Secret"},
		{"page size", console.Config{PageSize: 501}, "Config.PageSize"},
		{"prefix", console.Config{Prefix: "ui"}, "Config.Prefix"},
	}
	for _, tt := range tests {
		if _, err := console.New(d, tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: New error = %v, want one naming %s", tt.name, err, tt.want)
		}
	}
	if _, err := console.New(nil, console.Config{}); err == nil {
		t.Error("New(nil): no error")
	}
}

// TestSignInThrottled: wrong tokens from one address are answered 429
// with Retry-After once its burst is spent, even with the right token,
// while the right token from another address still signs in.
func TestSignInThrottled(t *testing.T) {
	t.Parallel()
	f := newFixture(t, console.Config{ReadToken: readToken, AdminToken: adminToken})
	guesser := f.user(t)
	guesser.get("/login")
	for i := range websec.GuessBurst {
		if code, _ := guesser.post("/login", url.Values{"token": {fmt.Sprintf("wrong-token-%012d", i)}}, nil); code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i+1, code)
		}
	}
	form := url.Values{"token": {adminToken}, "csrf": {guesser.csrf}}
	req, _ := http.NewRequest(http.MethodPost, f.base+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", f.srv.URL)
	res, err := guesser.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Errorf("the right token after %d wrong ones: %d (Retry-After %q), want 429 with Retry-After", websec.GuessBurst, res.StatusCode, res.Header.Get("Retry-After"))
	}
	// The same server, reached from 127.0.0.2.
	other := f.user(t)
	other.c.Transport = &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}
	other.login(adminToken)
	if code, _, _ := other.get("/"); code != http.StatusOK {
		t.Errorf("the overview from another address: %d, want 200", code)
	}
}
