package main

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestConsoleServed: an instance serves the console at /ui/; with tokens
// set a visitor is sent to the sign-in, the admin token signs in; without
// tokens the console is open and read-only.
func TestConsoleServed(t *testing.T) {
	t.Parallel()
	const read, admin = "console-read-0123456789", "console-admin-0123456789"
	inst := startInstance(t, testPlane("console-a", nil), ServerConfig{ConsoleReadToken: read, ConsoleAdminToken: admin})
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	base := "http://" + inst.addr + "/ui"
	get := func(path string) (int, string, http.Header) {
		res, err := c.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b), res.Header
	}
	if code, _, h := get("/"); code != http.StatusSeeOther || h.Get("Location") != "/ui/login" {
		t.Fatalf("GET /ui/ not signed in: %d to %q, want 303 to /ui/login", code, h.Get("Location"))
	}
	_, page, h := get("/login")
	if !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'self'") {
		t.Errorf("Content-Security-Policy = %q", h.Get("Content-Security-Policy"))
	}
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the sign-in form has no CSRF token:\n%s", page)
	}
	res, err := c.PostForm(base+"/login", url.Values{"csrf": {m[1]}, "token": {admin}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in as admin: %d, want 303", res.StatusCode)
	}
	if code, body, _ := get("/"); code != http.StatusOK || !strings.Contains(body, "console-a") || !strings.Contains(body, `id="role">admin<`) {
		t.Errorf("overview as admin: %d\n%.400s", code, body)
	}
	for _, p := range []string{"/jobs", "/inboxes", "/dlq", "/pool?name=p"} {
		if code, _, _ := get(p); code != http.StatusOK {
			t.Errorf("GET /ui%s as admin: %d, want 200", p, code)
		}
	}

	open := startInstance(t, testPlane("console-b", nil), ServerConfig{})
	res, err = http.Get("http://" + open.addr + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(b), "open · read-only") {
		t.Errorf("open console: %d\n%.400s", res.StatusCode, b)
	}
}

// TestConsoleTokens: the console tokens come from the file or, winning
// over it, from the environment; a short one, or the same token for both
// roles, is refused naming the key or the variable and never the value.
func TestConsoleTokens(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/c.toml"
	file := "[dispatcher]\nconsole_read_token = \"file-read-0123456789\"\nconsole_admin_token = \"file-admin-0123456789\"\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	cfg, err := loadConfig(path, "", env())
	if err != nil || cfg.Server.ConsoleReadToken != "file-read-0123456789" || cfg.Server.ConsoleAdminToken != "file-admin-0123456789" {
		t.Errorf("the file's tokens: %q %q, %v", cfg.Server.ConsoleReadToken, cfg.Server.ConsoleAdminToken, err)
	}
	cfg, err = loadConfig(path, "", env(envConsoleReadToken, "env-read-0123456789", envConsoleAdminToken, "env-admin-0123456789"))
	if err != nil || cfg.Server.ConsoleReadToken != "env-read-0123456789" || cfg.Server.ConsoleAdminToken != "env-admin-0123456789" {
		t.Errorf("the variables' tokens: %q %q, %v", cfg.Server.ConsoleReadToken, cfg.Server.ConsoleAdminToken, err)
	}
	bad := []struct {
		name string
		err  func() error
		want string
	}{
		{"short variable", func() error { _, err := loadConfig(path, "", env(envConsoleAdminToken, "shortsecret")); return err }, envConsoleAdminToken},
		{"same tokens", func() error {
			_, err := loadConfig(path, "", env(envConsoleReadToken, "same-token-0123456789", envConsoleAdminToken, "same-token-0123456789"))
			return err
		}, "dispatcher.console_admin_token"},
		{"short in the file", func() error {
			_, err := parseConfig([]byte("[dispatcher]\nconsole_read_token = \"shortsecret\"\n"))
			return err
		}, "dispatcher.console_read_token"},
		{"same in the file", func() error {
			_, err := parseConfig([]byte("[dispatcher]\nconsole_read_token = \"same-token-0123456789\"\nconsole_admin_token = \"same-token-0123456789\"\n"))
			return err
		}, "dispatcher.console_admin_token"},
	}
	for _, tt := range bad {
		err := tt.err()
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "shortsecret") || strings.Contains(err.Error(), "same-token") {
			t.Errorf("%s: %v, want an error naming %s without the value", tt.name, err, tt.want)
		}
	}
}
