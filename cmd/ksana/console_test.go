package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestConsoleServed: / redirects to the console at /ui/, which lists the
// jobs, and the API keeps every other path.
func TestConsoleServed(t *testing.T) {
	t.Parallel()
	ts := startService(t, t.TempDir(), map[string]string{"KSANA_API_TOKEN": "s3cret-token-0001"})
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(ts.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("GET /: %d to %q, want 302 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, tt := range []struct {
		path string
		code int
		has  string
	}{
		{"/ui/login", 200, `action="/ui/login"`},
		{"/ui/assets/console.js", 200, "use strict"},
		{"/ui/jobs", 303, ""},   // to the sign-in form
		{"/jobs", 401, "token"}, // the API, guarded by its token
		{"/health", 200, "ok"},
		{"/nope", 404, "no such endpoint"},
	} {
		resp, err := noFollow.Get(ts.url + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.code || !strings.Contains(string(b), tt.has) {
			t.Errorf("GET %s: %d, want %d with %q\n%s", tt.path, resp.StatusCode, tt.code, tt.has, b)
		}
	}
}

// TestConsoleSettings: KSANA_CONSOLE=off serves no console (the API
// answers /ui/ and / with its 404); KSANA_CONSOLE_READONLY=true shows no
// button that writes and refuses writes.
func TestConsoleSettings(t *testing.T) {
	t.Parallel()
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	off := startService(t, t.TempDir(), map[string]string{"KSANA_CONSOLE": "off"})
	for _, p := range []string{"/", "/ui/", "/ui/jobs"} {
		if code, body := get(off.url + p); code != http.StatusNotFound || strings.Contains(body, "<html") {
			t.Errorf("console off: GET %s: %d, want the API's 404\n%s", p, code, body)
		}
	}
	ro := startService(t, t.TempDir(), map[string]string{"KSANA_CONSOLE_READONLY": "true", "KSANA_CONSOLE_SECRET": strings.Repeat("s", 40)})
	code, body := get(ro.url + "/ui/jobs")
	if code != http.StatusOK || !strings.Contains(body, "read-only") || strings.Contains(body, `id="bulk"`) || strings.Contains(body, `/new"`) {
		t.Errorf("read-only console: GET /ui/jobs: %d, want the read-only badge and no write\n%s", code, body)
	}
}
