package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/cron/httpapi"
)

func TestParseTokens(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       []httpapi.Token
		err        string
	}{
		{"roles and names", "# ops team\nviewer v-1 vera\n\n  operator\to-1 otto  \r\nadmin a-1\n",
			[]httpapi.Token{{Role: "viewer", Secret: "v-1", Name: "vera"}, {Role: "operator", Secret: "o-1", Name: "otto"}, {Role: "admin", Secret: "a-1"}}, ""},
		{"no final newline", "admin a-1 root", []httpapi.Token{{Role: "admin", Secret: "a-1", Name: "root"}}, ""},
		{"empty", "", nil, "holds no token"},
		{"comments only", "# nothing\n   # here\n", nil, "holds no token"},
		{"one word", "admin a-1\nviewer\n", nil, "line 2: want \"role token [name]\""},
		{"four words", "admin s3cr3t-token my name\n", nil, "line 1: want \"role token [name]\""},
		{"unknown role", "\nroot s3cr3t-token\n", nil, `line 2: unknown role "root": want viewer, operator or admin`},
		{"role case", "Admin s3cr3t-token\n", nil, `line 1: unknown role "Admin"`},
		{"twice", "admin s3cr3t-token a\nviewer s3cr3t-token b\n", nil, "line 2: the same token as line 1"},
		{"not ascii", "admin s3cr3t-tökén\n", nil, "line 1: the token and the name must be printable ASCII"},
		{"control", "admin s3cr3t\x00token\n", nil, "line 1: the token and the name must be printable ASCII"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseTokens([]byte(tc.file))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one holding %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "s3cr3t") {
					t.Errorf("error shows the token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("tokens (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzParseTokens: any file yields tokens that a TokenSet takes, or an
// error naming a line (or the lack of tokens) that never shows a token.
func FuzzParseTokens(f *testing.F) {
	for _, s := range []string{
		"admin a\n", "viewer v vera\n# c\noperator o\n", "", "#\n", "root x\n", "admin a\nadmin a\n",
		"admin a b c\n", "admin\n", "admin \xff\n", "\r\n\r\nviewer abcdefghijkl\r\n", "operator op\x7f\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, file string) {
		tokens, err := parseTokens([]byte(file))
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "line ") && !strings.HasPrefix(msg, "holds no token") {
				t.Fatalf("error %q names no line", msg)
			}
			for _, line := range strings.Split(file, "\n") {
				fs := strings.Fields(line)
				if len(fs) < 2 || len(fs[1]) < 10 || strings.Trim(fs[1], "0123456789") == "" {
					continue
				}
				if strings.Contains(strings.ReplaceAll(msg, fs[0], ""), fs[1]) {
					t.Fatalf("error %q shows the token %q", msg, fs[1])
				}
			}
			return
		}
		if len(tokens) == 0 {
			t.Fatal("no error and no token")
		}
		if _, err := httpapi.NewTokenSet(tokens); err != nil {
			t.Fatalf("parsed tokens refused by TokenSet: %v", err)
		}
	})
}

// TestTokensFileProcess runs the built binary with a tokens file and
// KSANA_API_TOKEN: each role gets what it may, SIGHUP swaps the tokens, a
// bad file on reload keeps the old ones and is logged, a bad file at
// start is exit 2 naming the line, and no token ever reaches the logs.
func TestTokensFileProcess(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("SIGHUP")
	}
	bin := filepath.Join(t.TempDir(), "ksana")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	file := filepath.Join(t.TempDir(), "tokens")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	secrets := []string{"single-secret-0001", "viewer-secret-0001", "operator-secret-01", "admin-secret-00001", "viewer-secret-0002", "bad-secret-000001"}

	// A bad file at start: exit 2, the line named, no token shown.
	write("viewer viewer-secret-0001 vera\nroot bad-secret-000001\n")
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "KSANA_DATA="+t.TempDir(), "PORT=0", "KSANA_API_TOKENS_FILE="+file)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), `line 2: unknown role "root"`) {
		t.Fatalf("bad tokens file at start: %v, stderr:\n%s\nwant exit 2 naming line 2", err, stderr.String())
	}
	for _, s := range secrets {
		if strings.Contains(stderr.String(), s) {
			t.Errorf("stderr shows a token: %s", stderr.String())
		}
	}

	write("# roles\nviewer viewer-secret-0001 vera\noperator operator-secret-01 otto\nadmin admin-secret-00001 ada\n")
	t.Setenv("KSANA_API_TOKENS_FILE", file)
	t.Setenv("KSANA_API_TOKEN", "single-secret-0001")
	c := startChild(t, bin, t.TempDir())
	defer c.kill(t)
	as := func(method, path, body, tok string) int {
		t.Helper()
		req, err := newRequest(method, c.url+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	job := `{"id":"j","http":{"url":"http://127.0.0.1:9/x"},"schedule":{"kind":"every","every":"1h"}}`
	for _, s := range []struct {
		method, path, body, tok string
		want                    int
	}{
		{"POST", "/jobs", job, "viewer-secret-0001", 403},
		{"POST", "/jobs", job, "operator-secret-01", 403},
		{"POST", "/jobs", job, "admin-secret-00001", 201},
		{"GET", "/jobs/j", "", "viewer-secret-0001", 200},
		{"POST", "/jobs/j/pause", "", "viewer-secret-0001", 403},
		{"POST", "/jobs/j/pause", "", "operator-secret-01", 200},
		{"DELETE", "/jobs/j", "", "operator-secret-01", 403},
		{"PATCH", "/jobs/j", `{"name":"n"}`, "single-secret-0001", 200},
		{"GET", "/jobs", "", "viewer-secret-0002", 401},
	} {
		if got := as(s.method, s.path, s.body, s.tok); got != s.want {
			t.Errorf("%s %s as %s: %d, want %d", s.method, s.path, s.tok, got, s.want)
		}
	}
	var audit []httpapi.AuditEntry
	req, _ := newRequest("GET", c.url+"/audit", "")
	req.Header.Set("Authorization", "Bearer viewer-secret-0001")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(resp.Body).Decode(&audit); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var who []string
	for _, e := range audit {
		who = append(who, e.Who+" "+string(e.Action)+" "+e.JobID)
	}
	if diff := cmp.Diff([]string{"ada create j", "otto pause j", "admin update j"}, who); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}

	// Reload: vera's token goes, a new viewer comes.
	write("viewer viewer-secret-0002 vic\nadmin admin-secret-00001 ada\n")
	if err := c.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new viewer token", func() bool { return as("GET", "/jobs", "", "viewer-secret-0002") == 200 })
	if got := as("GET", "/jobs", "", "viewer-secret-0001"); got != 401 {
		t.Errorf("removed token after SIGHUP: %d, want 401", got)
	}
	if got := as("GET", "/jobs", "", "operator-secret-01"); got != 401 {
		t.Errorf("removed operator token after SIGHUP: %d, want 401", got)
	}

	// A bad file on reload keeps the old tokens.
	write("viewer viewer-secret-0001\nviewer bad-secret-000001 x y\n")
	if err := c.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload error in the log", func() bool { return strings.Contains(c.logs.String(), "not reloaded") })
	if !strings.Contains(c.logs.String(), "line 2") {
		t.Errorf("reload error names no line:\n%s", c.logs.String())
	}
	for tok, want := range map[string]int{"viewer-secret-0002": 200, "admin-secret-00001": 200, "viewer-secret-0001": 401, "single-secret-0001": 200} {
		if got := as("GET", "/jobs", "", tok); got != want {
			t.Errorf("after a bad reload, GET /jobs as %s: %d, want %d", tok, got, want)
		}
	}
	for _, s := range secrets {
		if strings.Contains(c.logs.String(), s) {
			t.Errorf("the log shows the token %s:\n%s", s, c.logs.String())
		}
	}
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// newRequest is a request with a JSON body when body is not "".
func newRequest(method, url, body string) (*http.Request, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err == nil && method != http.MethodGet && method != http.MethodHead {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, err
}

// TestTokensFileMode: a tokens file others may read is named in a warning
// at start; one only its owner reads is not.
func TestTokensFileMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes")
	}
	for _, tc := range []struct {
		mode os.FileMode
		warn bool
	}{{0o600, false}, {0o644, true}, {0o640, true}} {
		file := filepath.Join(t.TempDir(), "tokens")
		if err := os.WriteFile(file, []byte("admin a-secret-token\n"), tc.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(file, tc.mode); err != nil { // past the umask
			t.Fatal(err)
		}
		ts := startService(t, t.TempDir(), map[string]string{"KSANA_API_TOKENS_FILE": file})
		ts.stop()
		if got := strings.Contains(ts.logs.String(), "can be read by other users"); got != tc.warn {
			t.Errorf("mode %v: warned %v, want %v; logs:\n%s", tc.mode, got, tc.warn, ts.logs.String())
		}
		if strings.Contains(ts.logs.String(), "a-secret-token") {
			t.Errorf("the log shows the token:\n%s", ts.logs.String())
		}
	}
}
