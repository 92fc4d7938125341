package main

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// send makes a request with the headers h (a "Host" entry sets the Host
// header) and returns the status and the body.
func send(t *testing.T, c *http.Client, method, u, body string, h map[string]string) (int, string, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// TestNoDriveByWrites: without a token (the default), a write a web page
// of another site could send without a preflight (no Content-Type, a
// form's or text/plain, or a JSON one that says it comes from another
// site) is refused and changes nothing, and a request naming a host that
// is not this machine (DNS rebinding) is refused, reads too.
func TestNoDriveByWrites(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildKsana(t)
	m := startMember(t, bin, "doors", "KSANA_DATA="+t.TempDir())
	port := m.url[strings.LastIndex(m.url, ":")+1:]
	c := &http.Client{Timeout: 10 * time.Second}
	job := `{"id":"j","http":{"url":"http://127.0.0.1:9/"},"schedule":{"kind":"every","every":"1h"}}`
	json := map[string]string{"Content-Type": "application/json"}
	for _, tc := range []struct {
		name         string
		method, path string
		body         string
		h            map[string]string
		want         int
	}{
		{"no Content-Type", "POST", "/jobs", job, nil, 415},
		{"text/plain", "POST", "/jobs", job, map[string]string{"Content-Type": "text/plain"}, 415},
		{"a form", "POST", "/jobs", "id=j", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415},
		{"pause without a body nor a type", "POST", "/pause", "", nil, 415},
		{"cross-site fetch", "POST", "/jobs", job, map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, 403},
		{"another origin", "POST", "/pause", "", map[string]string{"Content-Type": "application/json", "Origin": "http://evil.test"}, 403},
		{"rebound host, read", "GET", "/jobs", "", map[string]string{"Host": "evil.test:" + port}, 421},
		{"rebound host, write", "POST", "/jobs", job, map[string]string{"Content-Type": "application/json", "Host": "evil.test:" + port}, 421},
		{"rebound host, console", "GET", "/ui/jobs", "", map[string]string{"Host": "evil.test:" + port}, 421},
		{"this machine by name", "GET", "/jobs", "", map[string]string{"Host": "localhost:" + port}, 200},
		{"same origin", "POST", "/pause", "", map[string]string{"Content-Type": "application/json", "Origin": "http://127.0.0.1:" + port, "Sec-Fetch-Site": "same-origin"}, 200},
		{"resume", "POST", "/resume", "", json, 200},
	} {
		if code, body, _ := send(t, c, tc.method, m.url+tc.path, tc.body, tc.h); code != tc.want {
			t.Errorf("%s: %s %s: %d %s, want %d", tc.name, tc.method, tc.path, code, body, tc.want)
		}
	}
	if code, body, _ := send(t, c, "GET", m.url+"/jobs", "", nil); code != 200 || body != "[]\n" {
		t.Errorf("after the refused writes: %d %s, want no job", code, body)
	}
	if h := m.health(t); h["paused"] != nil {
		t.Errorf("a refused write paused the service: %v", h)
	}
}

// TestGuessingThrottled: wrong tokens from one address are slowed down
// (429 with Retry-After, logged with the address and a count), at the
// API and at the console's sign-in alike, while the right token from
// another address goes on working; a token shorter than 16 bytes cannot
// be configured.
func TestGuessingThrottled(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildKsana(t)
	const good = "admin-token-000000000001"
	m := startMember(t, bin, "guess", "KSANA_DATA="+t.TempDir(), "KSANA_API_TOKEN="+good)
	c := &http.Client{Timeout: 10 * time.Second}
	var codes []int
	for i := range 15 {
		code, _, h := send(t, c, "GET", m.url+"/jobs", "", map[string]string{"Authorization": "Bearer wrong-guess-" + strings.Repeat("x", i)})
		codes = append(codes, code)
		if code == 429 && h.Get("Retry-After") == "" {
			t.Errorf("429 without Retry-After")
		}
	}
	if codes[0] != 401 || codes[len(codes)-1] != 429 {
		t.Errorf("15 wrong tokens: %v, want 401s then 429s", codes)
	}
	// The console's sign-in counts against the same address.
	if _, code := consoleSignIn(t, m.url, "another-wrong-one"); code != 429 {
		t.Errorf("console sign-in from the throttled address: %d, want 429", code)
	}
	// The right token from another address is not slowed down.
	other := fromAddr("127.0.0.2")
	if code, body, _ := send(t, other, "GET", m.url+"/jobs", "", map[string]string{"Authorization": "Bearer " + good}); code != 200 {
		t.Errorf("the right token from 127.0.0.2: %d %s", code, body)
	}
	waitFor(t, "a log record of the wrong tokens", func() bool {
		return strings.Contains(m.logs.String(), `"msg":"httpapi: wrong token","client":"127.0.0.1"`)
	})
	if strings.Contains(m.logs.String(), "wrong-guess") {
		t.Error("the logs hold a guessed token")
	}
}

// TestConsoleSessions: the console's cookie names a session, not the
// token; signing out ends the session (its cookie no longer works), and
// so does removing its token from the tokens file.
func TestConsoleSessions(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildKsana(t)
	file := filepath.Join(t.TempDir(), "tokens")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("admin admin-token-00000000001 ada\nviewer viewer-token-0000000001 vera\n")
	m := startMember(t, bin, "sessions", "KSANA_DATA="+t.TempDir(), "KSANA_API_TOKENS_FILE="+file)
	signIn := func(tok string) (*http.Client, *http.Cookie) {
		t.Helper()
		c, _ := consoleSignIn(t, m.url, tok)
		u, _ := url.Parse(m.url + "/ui/")
		for _, ck := range c.Jar.Cookies(u) {
			if ck.Name == "ksana_session" {
				if strings.Contains(ck.Value, tok) {
					t.Errorf("the session cookie holds the token")
				}
				return c, ck
			}
		}
		t.Fatalf("no session cookie after signing in")
		return nil, nil
	}
	// replay sends only the stolen cookie: the page, or the sign-in.
	noRedirect := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	replay := func(ck *http.Cookie) int {
		code, _, _ := send(t, noRedirect, "GET", m.url+"/ui/jobs", "", map[string]string{"Cookie": ck.Name + "=" + ck.Value})
		return code
	}
	// The cookie is no API token.
	c, ck := signIn("admin-token-00000000001")
	if code, _, _ := send(t, noRedirect, "GET", m.url+"/jobs", "", map[string]string{"Authorization": "Bearer " + ck.Value}); code != 401 {
		t.Errorf("the session id as an API token: %d, want 401", code)
	}
	if got := replay(ck); got != 200 {
		t.Fatalf("the session: %d, want 200", got)
	}
	// Sign-out ends it, also for a copy of the cookie.
	_, page, _ := send(t, c, "GET", m.url+"/ui/jobs", "", nil)
	mt := csrfField.FindStringSubmatch(page)
	if mt == nil {
		t.Fatal("no CSRF field on the jobs page")
	}
	resp, err := c.PostForm(m.url+"/ui/logout", url.Values{"csrf": {mt[1]}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := replay(ck); got != http.StatusSeeOther {
		t.Errorf("the cookie after sign-out: %d, want 303 to the sign-in", got)
	}
	// A token removed from the file ends its sessions.
	_, vck := signIn("viewer-token-0000000001")
	if got := replay(vck); got != 200 {
		t.Fatalf("the viewer's session: %d", got)
	}
	write("admin admin-token-00000000001 ada\n")
	if err := m.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the viewer's session to end with its token", func() bool { return replay(vck) == http.StatusSeeOther })
}

// TestRunNowOverridesFromOutside: a run-now may not set Host or a
// hop-by-hop header; an operator may add a header but not replace one
// the job's author set; the audit names the headers, not their values.
func TestRunNowOverridesFromOutside(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildKsana(t)
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("admin admin-token-00000000001 ada\noperator operator-token-000001 otto\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := startMember(t, bin, "overrides", "KSANA_DATA="+t.TempDir(), "KSANA_API_TOKENS_FILE="+file)
	hook := newCallback(t, 200, 0)
	c := &http.Client{Timeout: 10 * time.Second}
	as := func(tok string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/json"}
	}
	admin, op := as("admin-token-00000000001"), as("operator-token-000001")
	job := `{"id":"j","http":{"url":"` + hook.URL + `/","headers":{"Authorization":"Bearer author-secret-1"}},"schedule":{"kind":"every","every":"1h"}}`
	if code, body, _ := send(t, c, "POST", m.url+"/jobs", job, admin); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	for _, tc := range []struct {
		name string
		h    map[string]string
		body string
		want int
	}{
		{"Host", op, `{"headers":{"Host":"internal.example"}}`, 400},
		{"Transfer-Encoding", admin, `{"headers":{"Transfer-Encoding":"chunked"}}`, 400},
		{"Connection", op, `{"headers":{"connection":"close"}}`, 400},
		{"operator replaces Authorization", op, `{"headers":{"authorization":"Bearer mine-000"}}`, 403},
		{"operator adds a header", op, `{"headers":{"X-Release":"r-42-value"}, "force": true}`, 202},
		{"admin replaces Authorization", admin, `{"headers":{"Authorization":"Bearer override-01"}, "force": true}`, 202},
	} {
		if code, body, _ := send(t, c, "POST", m.url+"/jobs/j/run-now", tc.body, tc.h); code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, code, body, tc.want)
		}
	}
	_, audit, _ := send(t, c, "GET", m.url+"/audit?job_id=j", "", admin)
	for _, s := range []string{"r-42-value", "override-01", "author-secret-1"} {
		if strings.Contains(audit, s) {
			t.Errorf("the audit holds %s: %s", s, audit)
		}
	}
	if !strings.Contains(audit, `"overrides":{"headers":{"X-Release":"(hidden)"}`) || strings.Count(audit, `"action":"run-now"`) != 2 {
		t.Errorf("the audit of the run-nows: %s", audit)
	}
}

// fromAddr is a client whose connections come from the loopback address
// ip (any of 127.0.0.0/8 reaches a server on 127.0.0.1).
func fromAddr(ip string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext}}
}
