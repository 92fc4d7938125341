package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// TestSecretsEveryOutput: one job holds a secret in every place (a
// callback header, the callback URL's user name, password and query, the
// body, the alert URL's password and query, the alert's signing secret, a
// run-now's header) and calls a target that echoes the request in its
// failed reply. Read as each role through every output (the API, the
// console, the CLI as JSON and as text, the audit log), no role sees a
// secret the rule hides from it: only an admin sees the job's own
// secrets, and only where the job is shown; no one sees them in the
// audit, the history, the logs or the alert payload.
func TestSecretsEveryOutput(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildKsana(t)
	// The target echoes what it got, as a misbehaving service would.
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(500)
		fmt.Fprintf(w, "you sent %s %s auth=%q key=%q extra=%q body=%s", r.Method, r.URL, r.Header.Get("Authorization"),
			r.Header.Get("X-Api-Key"), r.Header.Get("X-Extra"), b)
	}))
	defer echo.Close()
	var (
		mu     sync.Mutex
		alerts []string
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		alerts = append(alerts, string(b))
		mu.Unlock()
	}))
	defer hook.Close()
	host := func(u string) string { return strings.TrimPrefix(u, "http://") }

	toks := map[string]string{"viewer": "viewer-token-000000001", "operator": "operator-token-0000001", "admin": "admin-token-00000000001"}
	file := filepath.Join(t.TempDir(), "tokens")
	var lines []string
	for role, tok := range toks {
		lines = append(lines, role+" "+tok+" "+role+"-user")
	}
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := startMember(t, bin, "secrets", "KSANA_DATA="+t.TempDir(), "KSANA_API_TOKENS_FILE="+file)

	secrets := []string{"user-sec1", "pass-sec2", "qry-sec3", "hdr-sec4", "body-sec5", "alert-sec6", "alert-sec7", "sign-sec8", "hdr-sec9", "ovr-sec10"}
	// One retry: the run's attempt log holds the echoed replies too.
	job := `{"id":"s","name":"s","max_retries":1,"retry_backoff":"100ms",
		"http":{"method":"POST","url":"http://user-sec1:pass-sec2@` + host(echo.URL) + `/p?api_key=qry-sec3",
			"headers":{"Authorization":"Bearer hdr-sec4","X-Api-Key":"hdr-sec9"},"body":"{\"password\":\"body-sec5\"}"},
		"schedule":{"kind":"every","every":"1h"},
		"alert":{"url":"http://hook:alert-sec6@` + host(hook.URL) + `/h?token=alert-sec7","secret":"sign-sec8","after":1}}`
	api := func(role, method, path, body string) (int, string) {
		t.Helper()
		req, err := newRequest(method, m.url+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+toks[role])
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := api("admin", "POST", "/jobs", job); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	code, body := api("admin", "POST", "/jobs/s/run-now", `{"headers":{"X-Extra":"ovr-sec10"}}`)
	if code != 202 {
		t.Fatalf("run-now: %d %s", code, body)
	}
	var ticket struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal([]byte(body), &ticket); err != nil || ticket.RunID == "" {
		t.Fatalf("run-now answer %s: %v", body, err)
	}
	waitFor(t, "the failed run and its alert", func() bool {
		_, runs := api("admin", "GET", "/jobs/s/runs", "")
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(runs, `"failed"`) && strings.Contains(runs, `"attempt_log"`) && len(alerts) > 0
	})

	// Each output, as each role.
	outputs := map[string]map[string]string{}
	for role := range toks {
		o := map[string]string{}
		for _, p := range []string{"/jobs/s", "/jobs", "/jobs/s/runs", "/runs", "/runs/" + ticket.RunID, "/audit", "/audit?job_id=s"} {
			code, body := api(role, "GET", p, "")
			if code != 200 {
				t.Fatalf("GET %s as %s: %d %s", p, role, code, body)
			}
			o["API GET "+p] = body
		}
		for page, html := range consolePages(t, m.url, toks[role], "/ui/jobs/s", "/ui/", "/ui/jobs", "/ui/runs", "/ui/jobs/s/history") {
			o["console "+page] = html
		}
		env := []string{"KSANA_ADDR=" + m.url, "KSANA_API_TOKEN=" + toks[role]}
		for _, args := range [][]string{
			{"jobs", "get", "s"}, {"jobs", "get", "s", "-o", "json"}, {"jobs", "ls"}, {"jobs", "ls", "-o", "json"},
			{"runs", "-job", "s"}, {"runs", "-job", "s", "-o", "json"}, {"runs", "get", ticket.RunID}, {"runs", "get", ticket.RunID, "-o", "json"},
			{"audit"}, {"audit", "-o", "json"},
		} {
			code, out, errOut := cli(t, bin, env, "", args...)
			if code != 0 {
				t.Fatalf("ksana %s as %s: exit %d %s", strings.Join(args, " "), role, code, errOut)
			}
			o["CLI "+strings.Join(args, " ")] = out
		}
		outputs[role] = o
	}
	for role, o := range outputs {
		for where, text := range o {
			for _, s := range secrets {
				if !strings.Contains(text, s) {
					continue
				}
				// An admin reads the job's own secrets where the job
				// is shown: never in the audit, the history or a reply.
				jobView := !strings.Contains(where, "audit") && !strings.Contains(where, "runs") && !strings.Contains(where, "history")
				if role == "admin" && jobView && s != "ovr-sec10" {
					continue
				}
				t.Errorf("%s sees %s in %s", role, s, where)
			}
		}
	}
	// The admin does see them (the test reads what it claims to).
	if !strings.Contains(outputs["admin"]["API GET /jobs/s"], "hdr-sec4") || !strings.Contains(outputs["admin"]["CLI jobs get s -o json"], "pass-sec2") {
		t.Errorf("the admin does not see the job's secrets:\n%s", outputs["admin"]["API GET /jobs/s"])
	}
	// A viewer sees no reply excerpt; an operator sees it, secrets out.
	if strings.Contains(outputs["viewer"]["API GET /jobs/s/runs"], "you sent") {
		t.Errorf("a viewer sees the reply: %s", outputs["viewer"]["API GET /jobs/s/runs"])
	}
	if !strings.Contains(outputs["operator"]["API GET /jobs/s/runs"], "you sent") {
		t.Errorf("an operator does not see the reply: %s", outputs["operator"]["API GET /jobs/s/runs"])
	}
	mu.Lock()
	payload := strings.Join(alerts, "\n")
	mu.Unlock()
	for _, s := range secrets {
		if strings.Contains(payload, s) {
			t.Errorf("the alert payload holds %s: %s", s, payload)
		}
		if strings.Contains(m.logs.String(), s) {
			t.Errorf("the logs hold %s", s)
		}
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// consoleSignIn signs in to the console at base with token, from a
// client of its own (its cookies), and returns the client and the status
// of the sign-in.
func consoleSignIn(t *testing.T, base, token string) (*http.Client, int) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: httpClient.Timeout}
	resp, err := c.Get(base + "/ui/login")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	mt := csrfField.FindStringSubmatch(string(page))
	if mt == nil {
		t.Fatal("no CSRF field on the sign-in page")
	}
	resp, err = c.PostForm(base+"/ui/login", url.Values{"csrf": {mt[1]}, "token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return c, resp.StatusCode
}

// consolePages signs in to the console at base with token and returns the
// HTML of each page.
func consolePages(t *testing.T, base, token string, pages ...string) map[string]string {
	t.Helper()
	c, _ := consoleSignIn(t, base, token)
	get := func(p string) string {
		t.Helper()
		resp, err := c.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", p, resp.StatusCode, b)
		}
		return string(b)
	}
	out := map[string]string{}
	for _, p := range pages {
		out[p] = get(p)
	}
	return out
}
