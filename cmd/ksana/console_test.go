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
	ts := startService(t, t.TempDir(), map[string]string{"KSANA_API_TOKEN": "s3cret"})
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
