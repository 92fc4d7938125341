package console_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ksana-dev/ksana/internal/testenv"
	"github.com/ksana-dev/ksana/scheduler/console"
)

// tab is one browser (its own profile, so its own cookies) with one tab.
type tab struct {
	t    *testing.T
	ctx  context.Context
	base string
	shot string
}

func newTab(t *testing.T, exe, base, shots string) *tab {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelA() })
	tb := &tab{t: t, ctx: ctx, base: base, shot: shots}
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	return tb
}

// do runs steps, each within 20s, failing the test on an error.
func (tb *tab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		loc, _ := chromedp.Run(tb.ctx, chromedp.Location())
		html, _ := chromedp.Run(tb.ctx, chromedp.OuterHTML(chromedp.CSS("main")))
		tb.t.Fatalf("%s: %v\nat %s\n%s", what, err, loc, html)
	}
}

// eval returns the value of a JavaScript expression in the page.
func eval[T any](tb *tab, expr string) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		tb.t.Fatalf("eval %s: %v", expr, err)
	}
	return v
}

func (tb *tab) open(path string) {
	tb.t.Helper()
	tb.do("open "+path, chromedp.Navigate(tb.base+path), chromedp.WaitReady(chromedp.CSS("main")))
}

func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	png, err := chromedp.Run(tb.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(tb.shot, "dispatch-"+name+".png"), png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

func (tb *tab) login(token string) {
	tb.t.Helper()
	tb.open("/login")
	tb.do("sign in", chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS("#role")))
}

func (tb *tab) text(sel string) string {
	tb.t.Helper()
	return eval[string](tb, fmt.Sprintf(`(document.querySelector(%q) || {textContent: ""}).textContent`, sel))
}

// TestBrowser drives the console in headless Chromium: the admin signs
// in, opens every page (a screenshot of each) and requeues a dead letter
// with its button; a read-only user sees no button and a requeue sent
// with their session and CSRF token is refused; the hostile field of a
// dead letter is shown as text.
func TestBrowser(t *testing.T) {
	exe := testenv.Chromium(t)
	shots := testenv.ScreenshotDir(t)
	f := newFixture(t, console.Config{ReadToken: readToken, AdminToken: adminToken})
	admin := newTab(t, exe, f.base, shots)
	admin.open("/login")
	admin.screenshot("login")
	admin.login(adminToken)
	if got := admin.text("#role"); got != "admin" {
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
		admin.open(p.path)
		if got := strings.Join(strings.Fields(admin.text(p.sel)), " "); !strings.Contains(got, p.want) {
			t.Errorf("%s: %s shows %q, want it to hold %q", p.path, p.sel, got, p.want)
		}
		admin.screenshot(p.name)
	}
	// The hostile field is text, and ran no script.
	if !strings.Contains(admin.text("#dlq"), "<script>alert(1)</script>") || eval[bool](admin, `document.querySelectorAll("#dlq script").length > 0`) {
		t.Error("the dead letter's hostile field is not shown as text")
	}

	reader := newTab(t, exe, f.base, shots)
	reader.login(readToken)
	reader.open("/dlq?instance=" + other)
	if n := eval[int](reader, `document.querySelectorAll("button.requeue, button.delete").length`); n != 0 {
		t.Errorf("the read-only user sees %d buttons that write", n)
	}
	reader.screenshot("dlq-read-only")
	status := eval[int](reader, fmt.Sprintf(`fetch("dlq/requeue", {method: "POST", body: new URLSearchParams({
		csrf: document.querySelector('input[name="csrf"]').value, instance: %q, id: %q})}).then(r => r.status)`, other, f.dead[0].ID))
	if status != 403 {
		t.Errorf("a requeue by the read-only user: status %d, want 403", status)
	}
	if dls, _ := f.inbox.DeadLetters(context.Background(), 10); len(dls) != 2 {
		t.Fatalf("after the refused requeue the queue holds %d dead letters, want 2", len(dls))
	}

	admin.open("/dlq?instance=" + other)
	admin.do("requeue", chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[id="dl-%s"] button.requeue`, f.dead[0].ID))),
		chromedp.WaitVisible(chromedp.CSS("#flash:not(.hidden)")))
	if got := admin.text("#flash"); !strings.Contains(got, "requeued") {
		t.Errorf("flash after the requeue: %q", got)
	}
	admin.screenshot("dlq-requeued")
	dls, _ := f.inbox.DeadLetters(context.Background(), 10)
	if len(dls) != 1 || dls[0].ID != f.dead[1].ID {
		t.Errorf("after the requeue the queue holds %v, want only %s", dls, f.dead[1].ID)
	}
	if n, _ := f.inbox.Len(context.Background()); n != 1 {
		t.Errorf("the inbox holds %d entries after the requeue, want 1", n)
	}
}
