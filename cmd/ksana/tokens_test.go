package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/ksana-dev/ksana/cron/httpapi"
)

func TestParseTokens(t *testing.T) {
	const (
		v1 = "viewer-secret-0001"
		o1 = "operator-secret-01"
		a1 = "admin-secret-00001"
	)
	for _, tc := range []struct {
		name, file string
		want       []httpapi.Token
		errs       []string
	}{
		{"roles and names", "# ops team\nviewer " + v1 + " vera\n\n  operator\t" + o1 + " otto  \r\nadmin " + a1 + "\n",
			[]httpapi.Token{{Role: "viewer", Secret: v1, Name: "vera"}, {Role: "operator", Secret: o1, Name: "otto"}, {Role: "admin", Secret: a1}}, nil},
		{"no final newline", "admin " + a1 + " root", []httpapi.Token{{Role: "admin", Secret: a1, Name: "root"}}, nil},
		{"empty", "", nil, []string{"holds no token"}},
		{"comments only", "# nothing\n   # here\n", nil, []string{"holds no token"}},
		{"one word", "admin " + a1 + "\nviewer\n", []httpapi.Token{{Role: "admin", Secret: a1}}, []string{"line 2: want \"role token [name]\" (3 words at most, the name one word), got 1 words"}},
		{"four words", "admin s3cr3t-token-0001 my name\n", nil, []string{"line 1: want \"role token [name]\" (3 words at most, the name one word), got 4 words"}},
		{"unknown role", "\nroot s3cr3t-token-0001\n", nil, []string{"line 2: unknown role: want viewer, operator or admin (in lower case) as the first word"}},
		{"role case", "Admin s3cr3t-token-0001\n", nil, []string{"line 1: unknown role"}},
		{"secret first", "s3cr3t-token-0001 admin\n", nil, []string{"line 1: unknown role"}},
		{"twice", "admin s3cr3t-token-0001 a\nviewer s3cr3t-token-0001 b\n",
			[]httpapi.Token{{Role: "admin", Secret: "s3cr3t-token-0001", Name: "a"}}, []string{"line 2: the same token as line 1"}},
		{"not ascii", "admin s3cr3t-tökén-0001\n", nil, []string{"line 1: the token and the name must be printable ASCII"}},
		{"control", "admin s3cr3t\x00token-0001\n", nil, []string{"line 1: the token and the name must be printable ASCII"}},
		{"16 bytes", "admin s3cr3t-token-001\n", []httpapi.Token{{Role: "admin", Secret: "s3cr3t-token-001"}}, nil},
		{"too short", "admin s3cr3t-token-01\nviewer " + v1 + "\n",
			[]httpapi.Token{{Role: "viewer", Secret: v1}}, []string{"line 1: the token is shorter than 16 bytes"}},
		{"several bad lines", "viewer " + v1 + "\nroot s3cr3t-token-0001\nadmin s3cr3t\nadmin " + a1 + "\n",
			[]httpapi.Token{{Role: "viewer", Secret: v1}, {Role: "admin", Secret: a1}},
			[]string{"line 2: unknown role", "line 3: the token is shorter than 16 bytes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := parseTokens([]byte(tc.file))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("tokens (-want +got):\n%s", diff)
			}
			if len(errs) != len(tc.errs) {
				t.Fatalf("errors %v, want %d: %q", errs, len(tc.errs), tc.errs)
			}
			for i, err := range errs {
				if !strings.HasPrefix(err.Error(), tc.errs[i]) {
					t.Errorf("error %d: %q, want one starting %q", i, err, tc.errs[i])
				}
				if strings.Contains(err.Error(), "s3cr3t") {
					t.Errorf("error shows the token: %v", err)
				}
			}
		})
	}
}

// FuzzParseTokens: any file yields tokens that a TokenSet takes, and an
// error per bad line naming it (or the lack of tokens) that never shows a
// word of the file.
func FuzzParseTokens(f *testing.F) {
	for _, s := range []string{
		"admin a\n", "viewer v vera\n# c\noperator o\n", "", "#\n", "root x\n", "admin a\nadmin a\n",
		"admin a b c\n", "admin\n", "admin \xff\n", "\r\n\r\nviewer abcdefghijklmnopq\r\n", "operator op\x7f\n",
		"abcdefghijklmnopq admin\n", "viewer abcdefghijklmnopq\nviewer abcdefghijklmnopq\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, file string) {
		tokens, errs := parseTokens([]byte(file))
		for _, err := range errs {
			msg := err.Error()
			if !strings.HasPrefix(msg, "line ") && !strings.HasPrefix(msg, "holds no token") {
				t.Fatalf("error %q names no line", msg)
			}
			for _, line := range strings.Split(file, "\n") {
				for _, w := range strings.Fields(line) {
					if len(w) < 10 || strings.Trim(w, "0123456789") == "" {
						continue
					}
					if strings.Contains(msg, w) {
						t.Fatalf("error %q shows the word %q", msg, w)
					}
				}
			}
		}
		if len(tokens) == 0 && len(errs) == 0 {
			t.Fatal("no error and no token")
		}
		if len(tokens) == 0 {
			return
		}
		if _, err := httpapi.NewTokenSet(tokens); err != nil {
			t.Fatalf("parsed tokens refused by TokenSet: %v", err)
		}
	})
}

// TestTokensFileProcess runs the built binary with a tokens file and
// KSANA_API_TOKEN: each role gets what it may; SIGHUP swaps the tokens,
// and a removed token goes whatever else the file holds: a bad line on
// reload is refused, logged and shown in /health while the other lines
// apply, an emptied or unreadable file leaves none of its tokens valid; a
// bad file or a short token at start is exit 2 naming the line; and no
// token ever reaches the logs or /health.
func TestTokensFileProcess(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("SIGHUP")
	}
	bin := buildKsana(t)
	file := filepath.Join(t.TempDir(), "tokens")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	secrets := []string{"single-secret-0001", "viewer-secret-0001", "operator-secret-01", "admin-secret-00001", "viewer-secret-0002", "bad-secret-000001"}

	// A bad file at start, or a short KSANA_API_TOKEN: exit 2, the line
	// named, no token shown.
	for _, tc := range []struct{ file, token, want string }{
		{"viewer viewer-secret-0001 vera\nroot bad-secret-000001\n", "", "line 2: unknown role"},
		{"viewer viewer-secret-0001 vera\nadmin short-secret\n", "", "line 2: the token is shorter than 16 bytes"},
		{"viewer viewer-secret-0001 vera\n", "short-secret", "KSANA_API_TOKEN (a secret of 12 bytes, not shown): must be at least 16 bytes"},
	} {
		write(tc.file)
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "KSANA_DATA="+t.TempDir(), "PORT=0", "KSANA_API_TOKENS_FILE="+file, "KSANA_API_TOKEN="+tc.token)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := runProcess(cmd)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Fatalf("bad tokens at start: %v, stderr:\n%s\nwant exit 2 and %q", err, stderr.String(), tc.want)
		}
		for _, s := range append(secrets, "short-secret") {
			if strings.Contains(stderr.String(), s) {
				t.Errorf("stderr shows a token: %s", stderr.String())
			}
		}
	}

	write("# roles\nviewer viewer-secret-0001 vera\noperator operator-secret-01 otto\nadmin admin-secret-00001 ada\n")
	c := startChild(t, bin, t.TempDir(), "KSANA_API_TOKENS_FILE="+file, "KSANA_API_TOKEN=single-secret-0001")
	defer c.kill(t)
	// Each request comes from an address of its own, so that the wrong
	// tokens this test sends on purpose are not throttled (see
	// TestGuessingThrottled).
	from := 1
	as := func(method, path, body, tok string) int {
		t.Helper()
		req, err := newRequest(method, c.url+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		from++
		resp, err := fromAddr(fmt.Sprintf("127.0.%d.%d", from/250, 1+from%250)).Do(req)
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

	// A bad line is refused and reported; the other lines apply, and a
	// token removed from the file goes even so.
	write("viewer viewer-secret-0002 vic\nroot bad-secret-000001\nadmin short-secret\noperator operator-secret-01 otto\n")
	hup := func(status string, errs ...string) {
		t.Helper()
		if err := c.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		var h map[string]any
		waitFor(t, "the reload in /health", func() bool {
			h = nil
			if _, err := getJSON(c.url+"/health", &h); err != nil {
				return false
			}
			var got []string
			for _, e := range anySlice(h["tokens_reload_errors"]) {
				got = append(got, e.(string))
			}
			return h["tokens_reload"] == status && cmp.Equal(got, errs, cmpopts.EquateEmpty())
		})
		if _, err := time.Parse(time.RFC3339, h["tokens_reload_at"].(string)); err != nil {
			t.Errorf("/health tokens_reload_at: %v", err)
		}
	}
	hup("bad lines", "line 2: unknown role: want viewer, operator or admin (in lower case) as the first word",
		"line 3: the token is shorter than 16 bytes")
	// The log line comes through a pipe: it may reach the test a moment
	// after /health shows the reload.
	logged := func(logs string) bool {
		return strings.Contains(logs, `"level":"ERROR","msg":"ksana: SIGHUP: KSANA_API_TOKENS_FILE has bad lines`) &&
			strings.Contains(logs, "line 2: unknown role")
	}
	for deadline := time.Now().Add(5 * time.Second); !logged(c.logs.String()) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if logs := c.logs.String(); !logged(logs) {
		t.Errorf("the bad lines are not logged as an ERROR naming them:\n%s", logs)
	}
	for tok, want := range map[string]int{"viewer-secret-0002": 200, "operator-secret-01": 200, "admin-secret-00001": 401,
		"bad-secret-000001": 401, "short-secret": 401, "single-secret-0001": 200} {
		if got := as("GET", "/jobs", "", tok); got != want {
			t.Errorf("after a reload with bad lines, GET /jobs as %s: %d, want %d", tok, got, want)
		}
	}

	// An emptied file leaves no token of it valid: authentication stays
	// on (KSANA_API_TOKEN is not in the file and stays).
	write("")
	hup("failed", "holds no token (want lines \"role token [name]\", role viewer, operator or admin)")
	for tok, want := range map[string]int{"viewer-secret-0002": 401, "operator-secret-01": 401, "": 401, "single-secret-0001": 200} {
		if got := as("GET", "/jobs", "", tok); got != want {
			t.Errorf("after emptying the file, GET /jobs as %q: %d, want %d", tok, got, want)
		}
	}
	// So does a file of bad lines only, and one that cannot be read.
	write("viewer viewer-secret-0002 vic\n")
	hup("ok")
	write("viewer viewer-secret-0002 vic extra\n")
	hup("failed", "line 1: want \"role token [name]\" (3 words at most, the name one word), got 4 words")
	if got := as("GET", "/jobs", "", "viewer-secret-0002"); got != 401 {
		t.Errorf("after a file of bad lines only: %d, want 401", got)
	}
	write("viewer viewer-secret-0002 vic\n")
	hup("ok")
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	hup("failed", "the file cannot be read: no such file or directory")
	if got := as("GET", "/jobs", "", "viewer-secret-0002"); got != 401 {
		t.Errorf("after removing the file: %d, want 401", got)
	}
	if !strings.Contains(c.logs.String(), "KSANA_API_TOKENS_FILE cannot be read: NO token of it is valid") {
		t.Errorf("an unreadable file is not logged:\n%s", c.logs.String())
	}
	write("viewer viewer-secret-0002 vic\n")
	hup("ok")
	if got := as("GET", "/jobs", "", "viewer-secret-0002"); got != 200 {
		t.Errorf("after the file is back: %d, want 200", got)
	}
	if health, _ := httpGet(c.url + "/health"); strings.Contains(health, file) {
		t.Errorf("/health shows the file's path: %s", health)
	}
	for _, s := range append(secrets, "short-secret") {
		if strings.Contains(c.logs.String(), s) {
			t.Errorf("the log shows the token %s:\n%s", s, c.logs.String())
		}
	}
}

// getJSON decodes the JSON answer of a GET of url into out.
func getJSON(url string, out any) (int, error) {
	resp, err := httpClient.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(out)
}

func anySlice(v any) []any {
	s, _ := v.([]any)
	return s
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
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("file modes")
	}
	for _, tc := range []struct {
		mode os.FileMode
		warn bool
	}{{0o600, false}, {0o644, true}, {0o640, true}} {
		file := filepath.Join(t.TempDir(), "tokens")
		if err := os.WriteFile(file, []byte("admin a-secret-token-0001\n"), tc.mode); err != nil {
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
		if strings.Contains(ts.logs.String(), "a-secret-token-0001") {
			t.Errorf("the log shows the token:\n%s", ts.logs.String())
		}
	}
}
