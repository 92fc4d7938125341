package browsertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// stepTimeout bounds each step of a Tab.
const stepTimeout = 20 * time.Second

// Tab is one browser (its own profile, so its own cookies) with one tab,
// on the console served at a base URL.
type Tab struct {
	t      *testing.T
	ctx    context.Context
	base   string
	shots  string // the screenshot directory
	prefix string // of the screenshots' names
}

// New starts the browser at exe, 1280 by 900, for the console at base
// (an http:// URL without a trailing slash); its screenshots go to the
// directory shots, their names starting with prefix. The browser stops
// when t ends.
func New(t *testing.T, exe, base, shots, prefix string) *Tab {
	t.Helper()
	// Chromium leaves a directory of its own in TMPDIR (its singleton
	// socket) when it is stopped: give it one of t's, removed with it.
	tmp := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.Env("TMPDIR="+tmp),
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
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("starting %s: %v", exe, err)
	}
	return &Tab{t: t, ctx: ctx, base: base, shots: shots, prefix: prefix}
}

// In makes the steps that follow fail t (a subtest of the test that
// made tb) instead.
func (tb *Tab) In(t *testing.T) { tb.t = t }

// Do runs steps, each within 20s, failing the test on an error with the
// page's address and the HTML of its main element.
func (tb *Tab) Do(what string, steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		loc, _ := chromedp.Run(tb.ctx, chromedp.Location())
		html, _ := chromedp.Run(tb.ctx, chromedp.OuterHTML(chromedp.CSS("main")))
		tb.t.Fatalf("%s: %v\nat %s\n%s", what, err, loc, html)
	}
}

// Eval returns the value of a JavaScript expression in tb's page.
func Eval[T any](tb *Tab, expr string) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		tb.t.Fatalf("eval %s: %v", expr, err)
	}
	return v
}

// Open loads the page at path (below the base URL) and waits for its
// main element.
func (tb *Tab) Open(path string) {
	tb.t.Helper()
	tb.Do("open "+path, chromedp.Navigate(tb.base+path), chromedp.WaitReady(chromedp.CSS("main")))
}

// Screenshot saves the page, whole, as the prefix and name .png.
func (tb *Tab) Screenshot(name string) {
	tb.t.Helper()
	png, err := chromedp.Run(tb.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(tb.shots, tb.prefix+name+".png"), png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// Set gives an input of the page a value and tells the page's script (a
// change event).
func (tb *Tab) Set(sel, value string) {
	tb.t.Helper()
	tb.Do("set "+sel,
		chromedp.SetValue(chromedp.CSS(sel), value),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).dispatchEvent(new Event("change"))`, sel)),
	)
}

// Login signs in on /login with token, waiting for the role the
// consoles show once signed in (#role).
func (tb *Tab) Login(token string) {
	tb.t.Helper()
	tb.Open("/login")
	tb.Do("sign in", chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS("#role")))
}

// Text returns the text of the first element sel selects, "" when none.
func (tb *Tab) Text(sel string) string {
	tb.t.Helper()
	return Eval[string](tb, fmt.Sprintf(`(document.querySelector(%q) || {textContent: ""}).textContent`, sel))
}
