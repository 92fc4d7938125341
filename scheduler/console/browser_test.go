package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ksana-dev/ksana/internal/browsertest"
	"github.com/ksana-dev/ksana/internal/testenv"
	"github.com/ksana-dev/ksana/scheduler/console"
)

// TestBrowser drives the console in headless Chromium: the admin signs
// in, opens every page (a screenshot of each) and requeues a dead letter
// with its button; a read-only user sees no button and a requeue sent
// with their session and CSRF token is refused; the hostile field of a
// dead letter is shown as text.
func TestBrowser(t *testing.T) {
	exe := testenv.Chromium(t)
	shots := testenv.ScreenshotDir(t)
	f := newFixture(t, console.Config{ReadToken: readToken, AdminToken: adminToken})
	admin := browsertest.New(t, exe, f.base, shots, "dispatch-")
	admin.Open("/login")
	admin.Screenshot("login")
	admin.Login(adminToken)
	if got := admin.Text("#role"); got != "admin" {
		t.Errorf("role shown: %q, want admin", got)
	}

	pages := []struct{ path, name, sel, want string }{
		{"/", "overview", "#nodes", "node-1"},
		{"/pool?name=zh-en", "pool", "#pool-nodes", f.jobs[0]},
		{"/jobs", "jobs", "#jobs", "RUNNING"},
		{"/jobs?state=RUNNING", "jobs-running", "#states", "RUNNING 3"},
		{"/inboxes", "inboxes", "#inboxes", other},
		{"/dlq?instance=" + other, "dlq", "#dlq", "malformed: test"},
	}
	for _, p := range pages {
		admin.Open(p.path)
		if got := strings.Join(strings.Fields(admin.Text(p.sel)), " "); !strings.Contains(got, p.want) {
			t.Errorf("%s: %s shows %q, want it to hold %q", p.path, p.sel, got, p.want)
		}
		admin.Screenshot(p.name)
	}
	// The hostile field is text, and ran no script.
	if !strings.Contains(admin.Text("#dlq"), "<script>alert(1)</script>") || browsertest.Eval[bool](admin, `document.querySelectorAll("#dlq script").length > 0`) {
		t.Error("the dead letter's hostile field is not shown as text")
	}

	reader := browsertest.New(t, exe, f.base, shots, "dispatch-")
	reader.Login(readToken)
	reader.Open("/dlq?instance=" + other)
	if n := browsertest.Eval[int](reader, `document.querySelectorAll("button.requeue, button.delete").length`); n != 0 {
		t.Errorf("the read-only user sees %d buttons that write", n)
	}
	reader.Screenshot("dlq-read-only")
	status := browsertest.Eval[int](reader, fmt.Sprintf(`fetch("dlq/requeue", {method: "POST", body: new URLSearchParams({
		csrf: document.querySelector('input[name="csrf"]').value, instance: %q, id: %q})}).then(r => r.status)`, other, f.dead[0].ID))
	if status != 403 {
		t.Errorf("a requeue by the read-only user: status %d, want 403", status)
	}
	if dls, _ := f.inbox.DeadLetters(context.Background(), 10); len(dls) != 2 {
		t.Fatalf("after the refused requeue the queue holds %d dead letters, want 2", len(dls))
	}

	admin.Open("/dlq?instance=" + other)
	admin.Do("requeue", chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[id="dl-%s"] button.requeue`, f.dead[0].ID))),
		chromedp.WaitVisible(chromedp.CSS("#flash:not(.hidden)")))
	if got := admin.Text("#flash"); !strings.Contains(got, "requeued") {
		t.Errorf("flash after the requeue: %q", got)
	}
	admin.Screenshot("dlq-requeued")
	dls, _ := f.inbox.DeadLetters(context.Background(), 10)
	if len(dls) != 1 || dls[0].ID != f.dead[1].ID {
		t.Errorf("after the requeue the queue holds %v, want only %s", dls, f.dead[1].ID)
	}
	if n, _ := f.inbox.Len(context.Background()); n != 1 {
		t.Errorf("the inbox holds %d entries after the requeue, want 1", n)
	}
}
