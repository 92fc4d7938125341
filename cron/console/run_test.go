package console

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// TestRunPage shows one run to each role, with its trigger, and its
// reply (which may echo the request) only to the roles that may read it.
func TestRunPage(t *testing.T) {
	f := newFixture(t, fixtureOpts{auth: true, exec: cron.ExecutorFunc(func(ctx context.Context, j *cron.Job, info cron.RunInfo) cron.Result {
		log := []cron.Attempt{
			{StartedAt: time.Now(), Duration: cron.Duration(time.Second), Status: cron.StatusTimeout, Error: "timeout after 1s"},
			{StartedAt: time.Now(), Status: cron.StatusFailed, HTTPStatus: 503, Error: "http 503; reply: echo token-in-attempt"},
			{StartedAt: time.Now(), Status: cron.StatusFailed, HTTPStatus: 500, Error: "http 500; reply: echo token-in-reply"},
		}
		return cron.Result{Status: cron.StatusFailed, Attempts: 3, HTTPStatus: 500, Error: "http 500; reply: echo token-in-reply", AttemptLog: log}
	})})
	f.add(t, cron.Job{ID: "j", Name: "Nightly"})
	op := f.browser(t)
	op.login(operatorToken)
	op.get("/jobs/j")
	if code, body, _ := op.post("/jobs/j/run", url.Values{"force": {"on"}}); code != http.StatusSeeOther {
		t.Fatalf("run: %d\n%s", code, body)
	}
	run := waitRun(t, f)
	if run.ID == "" {
		t.Fatal("the run has no id")
	}
	for tok, seesReply := range map[string]bool{viewerToken: false, operatorToken: true, adminToken: true} {
		b := f.browser(t)
		b.login(tok)
		code, body, _ := b.get("/runs/" + url.PathEscape(run.ID))
		if code != http.StatusOK {
			t.Fatalf("GET /runs/%s with %s: %d\n%s", run.ID, tok, code, body)
		}
		for _, want := range []string{`id="run-now-mark"`, `run now, asked by <b>otto</b>`, `id="run-attempts">3<`, `id="run-http">500<`, `href="/jobs-ui/jobs/j"`, ">Nightly<", " UTC</time>"} {
			if !strings.Contains(body, want) {
				t.Errorf("run page with %s lacks %q\n%s", tok, want, body)
			}
		}
		if strings.Contains(body, "token-in-reply") != seesReply || strings.Contains(body, "token-in-attempt") != seesReply {
			t.Errorf("run page with %s: shows the replies = %v, want %v", tok, !seesReply, seesReply)
		}
		if !strings.Contains(body, `id="run-attempt-log"`) || strings.Count(body, "timeout after 1s") != 1 || !strings.Contains(body, ">503<") {
			t.Errorf("run page with %s lacks the attempt log\n%s", tok, body)
		}
		// Every run row links to the run's page.
		for _, page := range []string{"/runs", "/jobs/j", "/jobs/j/history"} {
			if _, body, _ := b.get(page); !strings.Contains(body, `href="/jobs-ui/runs/`+url.PathEscape(run.ID)+`"`) || !strings.Contains(body, `tag runnow`) {
				t.Errorf("%s does not link the run to its page, or does not mark it as a run-now\n%s", page, body)
			}
		}
	}
}

func TestRunPageNotFound(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	b := f.browser(t)
	hostile := `<script>alert(1)</script>"x`
	code, body, _ := b.get("/runs/" + url.PathEscape(hostile))
	if code != http.StatusNotFound || !strings.Contains(body, `id="error"`) || !strings.Contains(body, "not found") {
		t.Fatalf("GET /runs/<hostile>: %d, want 404 with an error\n%s", code, body)
	}
	if strings.Contains(body, "<script>alert") {
		t.Errorf("the run id is not escaped:\n%s", body)
	}
	if !strings.Contains(body, html.EscapeString(`"<script>alert(1)</script>\"x"`)) && !strings.Contains(body, "&lt;script&gt;") {
		t.Errorf("the error does not name the run id as text:\n%s", body)
	}
	if code, _, _ := b.get("/runs/nope"); code != http.StatusNotFound {
		t.Errorf("GET /runs/nope: %d, want 404", code)
	}
}
