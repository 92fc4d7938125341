package console

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/internal/testenv"
)

// tab is one browser (its own profile, so its own cookies) with one tab.
type tab struct {
	t    *testing.T
	ctx  context.Context
	base string
	shot string // the screenshot directory
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
	if err := chromedp.Do(ctx); err != nil { // starts the browser
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

// screenshot saves the page, whole, as name.png.
func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	png, err := chromedp.Run(tb.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(tb.shot, name+".png"), png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// set gives an input of the page a value and tells the page's script.
func (tb *tab) set(sel, value string) {
	tb.t.Helper()
	tb.do("set "+sel,
		chromedp.SetValue(chromedp.CSS(sel), value),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).dispatchEvent(new Event("change"))`, sel)),
	)
}

func (tb *tab) login(token string) {
	tb.t.Helper()
	tb.open("/login")
	tb.do("sign in", chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS("#role")))
}

// TestBrowser drives the console in headless Chromium: the form with a
// validation error then a job created, run now with the run appearing
// without a reload, pause and resume, a bulk pause on a filter, a viewer
// who sees no button that writes and is refused a write, and a hostile
// job name shown as text. It saves a screenshot of each page.
func TestBrowser(t *testing.T) {
	exe := testenv.Chromium(t)
	shots := testenv.ScreenshotDir(t)
	f := newFixture(t, fixtureOpts{auth: true, console: Config{RefreshInterval: 300 * time.Millisecond}})
	admin := newTab(t, exe, f.base, shots)
	admin.login(adminToken)

	t.Run("create through the form", func(t *testing.T) {
		admin.t = t
		admin.open("/new")
		admin.screenshot("form")
		admin.set(`[name="id"]`, "nightly")
		admin.set(`[name="name"]`, "nightly report")
		admin.set(`[name="schedule.kind"]`, "every")
		admin.set(`[name="schedule.every"]`, "soon")
		admin.set(`[name="http.url"]`, "https://example.com/report")
		admin.do("save", chromedp.Click(chromedp.CSS("#save")),
			chromedp.WaitVisible(chromedp.CSS(`.field-error[data-field="schedule.every"]`)))
		msg := eval[string](admin, `document.querySelector('.field-error[data-field="schedule.every"]').textContent`)
		if !strings.Contains(msg, "soon") {
			t.Errorf("the error beside schedule.every is %q", msg)
		}
		admin.screenshot("form-error")
		admin.set(`[name="schedule.every"]`, "1h")
		admin.do("save again", chromedp.Click(chromedp.CSS("#save")), chromedp.WaitVisible(chromedp.CSS("#words")))
		if words := eval[string](admin, `document.querySelector("#words").textContent`); !strings.HasPrefix(words, "every hour") {
			t.Errorf("schedule in words: %q", words)
		}
		if _, err := f.runner.Get(context.Background(), "nightly"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("run now, pause, resume without a reload", func(t *testing.T) {
		admin.t = t
		admin.open("/jobs/nightly")
		eval[bool](admin, `window.__sameDocument = true`)
		admin.do("run now", chromedp.Click(chromedp.CSS("#run-now")),
			chromedp.WaitVisible(chromedp.CSS("#history tr.run")))
		if got := eval[string](admin, `document.querySelector("#history tr.run .st").textContent`); got != "success" {
			t.Errorf("the run's status: %q", got)
		}
		admin.do("pause", chromedp.Click(chromedp.CSS("#pause")), chromedp.WaitVisible(chromedp.CSS("#resume")))
		if j, _ := f.runner.Get(context.Background(), "nightly"); !j.Paused {
			t.Error("not paused")
		}
		if got := eval[string](admin, `document.querySelector("#state").textContent`); got != "paused" {
			t.Errorf("state shown: %q", got)
		}
		admin.screenshot("job-paused")
		admin.do("resume", chromedp.Click(chromedp.CSS("#resume")), chromedp.WaitVisible(chromedp.CSS("#pause")))
		if j, _ := f.runner.Get(context.Background(), "nightly"); j.Paused {
			t.Error("not resumed")
		}
		if !eval[bool](admin, `window.__sameDocument === true`) {
			t.Error("the actions reloaded the whole page")
		}
		// A run made elsewhere shows by the history's own refresh.
		if _, err := f.runner.RunNow(context.Background(), "nightly", cron.RunOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
		admin.do("live history", chromedp.WaitVisible(chromedp.CSS("#history tr.run:nth-child(2)")))
		// Times show how far from now, the absolute time in UTC on hover.
		if title := eval[string](admin, `document.querySelector("#history time").title`); !absTimeRE.MatchString(title) {
			t.Errorf("time title %q, want the form 2026-11-27 22:57:25 UTC", title)
		}
		if text := eval[string](admin, `document.querySelector("#history time").textContent`); !relTimeRE.MatchString(text) {
			t.Errorf("time text %q, want a relative time such as 5 min ago", text)
		}
		admin.screenshot("job")
	})

	t.Run("pause until a time and see it resume", func(t *testing.T) {
		admin.t = t
		admin.open("/jobs/nightly")
		// now+2s in the browser's zone, as a user types it.
		eval[bool](admin, `(() => { const d = new Date(Date.now() + 2000), p = n => String(n).padStart(2, "0");
			document.querySelector("#pause-until").value = d.getFullYear() + "-" + p(d.getMonth() + 1) + "-" + p(d.getDate()) +
				"T" + p(d.getHours()) + ":" + p(d.getMinutes()) + ":" + p(d.getSeconds()); return true })()`)
		admin.do("pause until", chromedp.Click(chromedp.CSS("#pause-until-submit")), chromedp.WaitVisible(chromedp.CSS("#resume")))
		if got := eval[string](admin, `document.querySelector("#state").textContent`); !strings.HasPrefix(got, "paused until") {
			t.Errorf("state shown: %q, want paused until …", got)
		}
		j, _ := f.runner.Get(context.Background(), "nightly")
		if d := time.Until(j.PausedUntil); !j.Paused || d <= 0 || d > 3*time.Second {
			t.Fatalf("paused %v until %s (in %s), want about 2s from now", j.Paused, j.PausedUntil, d)
		}
		admin.screenshot("job-paused-until")
		// The page shows the job enabled again by itself, without a reload.
		eval[bool](admin, `window.__sameDocument = true`)
		admin.do("see it resume", chromedp.WaitVisible(chromedp.CSS("#state.st-success")))
		if !eval[bool](admin, `window.__sameDocument === true`) {
			t.Error("the page reloaded to show the end of the pause")
		}
		if j, _ := f.runner.Get(context.Background(), "nightly"); j.Paused {
			t.Error("the job shows enabled but is paused")
		}
		admin.open("/jobs/nightly")
		if got := eval[string](admin, `document.querySelector("#state").textContent`); got != "enabled" {
			t.Errorf("after a reload the state is %q", got)
		}
	})

	t.Run("run now with a body override", func(t *testing.T) {
		admin.t = t
		admin.open("/jobs/nightly")
		before := eval[int](admin, `document.querySelectorAll("#history tr.run").length`)
		admin.do("open the form", chromedp.Click(chromedp.CSS("#run-with summary")), chromedp.WaitVisible(chromedp.CSS("#rw-body")))
		admin.set("#rw-body", `{"override":true}`)
		admin.screenshot("run-with-overrides")
		admin.do("run", chromedp.Click(chromedp.CSS("#run-with-submit")),
			chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf("#history tr.run:nth-child(%d)", before+1))))
		if flash := eval[string](admin, `document.querySelector("#flash").textContent`); !strings.Contains(flash, "run queued") {
			t.Errorf("flash %q", flash)
		}
	})

	t.Run("runs page filtered by status", func(t *testing.T) {
		admin.t = t
		admin.open("/runs?status=success")
		n := eval[int](admin, `document.querySelectorAll("#runs tr.run").length`)
		ok := eval[bool](admin, `[...document.querySelectorAll("#runs tr.run .st")].every(e => e.textContent === "success")`)
		if n < 2 || !ok {
			t.Errorf("runs page with status=success: %d rows, all success %v", n, ok)
		}
		admin.screenshot("runs")
		admin.open("/runs?status=failed")
		if n := eval[int](admin, `document.querySelectorAll("#runs tr.run").length`); n != 0 {
			t.Errorf("runs page with status=failed: %d rows, want none", n)
		}
	})

	t.Run("service pause banner", func(t *testing.T) {
		admin.t = t
		admin.open("/")
		admin.set("#pa-reason", "maintenance window")
		admin.do("pause all", chromedp.Click(chromedp.CSS("#pause-all-submit")), chromedp.WaitVisible(chromedp.CSS("#confirm-pause-all")))
		admin.screenshot("pause-all-confirm")
		admin.do("confirm", chromedp.Click(chromedp.CSS("#confirm-pause-all")), chromedp.WaitVisible(chromedp.CSS("#service-paused")))
		if !f.runner.Paused().Paused {
			t.Fatal("the service is not paused")
		}
		admin.open("/jobs")
		if got := eval[string](admin, `document.querySelector("#service-paused").textContent`); !strings.Contains(got, "maintenance window") {
			t.Errorf("banner %q", got)
		}
		admin.screenshot("service-paused")
		admin.do("resume all", chromedp.Click(chromedp.CSS("#resume-all")), chromedp.WaitNotPresent(chromedp.CSS("#service-paused")))
		if f.runner.Paused().Paused {
			t.Error("the service is still paused")
		}
	})

	t.Run("bulk pause on a filter", func(t *testing.T) {
		admin.t = t
		for i := range 5 {
			name := fmt.Sprintf("batch %d", i)
			if i == 4 {
				name = "lonely"
			}
			f.add(t, cron.Job{ID: fmt.Sprintf("b%d", i), Name: name})
		}
		admin.open("/jobs?q=batch")
		admin.screenshot("jobs")
		admin.set("#bulk-action", "pause")
		admin.do("apply", chromedp.Click(chromedp.CSS("#bulk button")), chromedp.WaitVisible(chromedp.CSS("#confirm-count")))
		if n := eval[string](admin, `document.querySelector("#confirm-count").textContent`); n != "4" {
			t.Errorf("confirmation counts %s jobs, want 4", n)
		}
		admin.screenshot("bulk-confirm")
		admin.do("confirm", chromedp.Click(chromedp.CSS("#confirm button")), chromedp.WaitVisible(chromedp.CSS("#jobs")))
		for _, j := range listJobs(t, f.runner) {
			if want := strings.HasPrefix(j.Name, "batch"); j.Paused != want {
				t.Errorf("%s %q: paused %v, want %v", j.ID, j.Name, j.Paused, want)
			}
		}
		if flash := eval[string](admin, `document.querySelector("#flash").textContent`); !strings.Contains(flash, "4 of 4") {
			t.Errorf("flash %q", flash)
		}
	})

	t.Run("hostile name", func(t *testing.T) {
		admin.t = t
		const evil = `<script>window.__xss=1</script><img src=x onerror="window.__xss=2">`
		f.add(t, cron.Job{ID: "evil", Name: evil})
		for _, p := range []string{"/jobs?q=script", "/jobs/evil", "/jobs/evil/edit", "/"} {
			admin.open(p)
			if xss := eval[bool](admin, `window.__xss === undefined`); !xss {
				t.Errorf("%s: the name ran as script", p)
			}
		}
		admin.open("/jobs/evil")
		if h1 := eval[string](admin, `document.querySelector("h1").firstChild.textContent.trim()`); h1 != evil {
			t.Errorf("the title shows %q, want the name as text", h1)
		}
		admin.screenshot("hostile-name")
	})

	t.Run("overview and phone", func(t *testing.T) {
		admin.t = t
		admin.open("/")
		admin.screenshot("overview")
		admin.do("phone", chromedp.EmulateViewport(390, 844))
		admin.open("/jobs/nightly")
		if w := eval[int](admin, `document.documentElement.scrollWidth`); w > 420 {
			t.Errorf("on a phone the job page is %d px wide", w)
		}
		admin.screenshot("job-phone")
		admin.do("desktop", chromedp.EmulateViewport(1280, 900))
	})

	t.Run("viewer", func(t *testing.T) {
		viewer := newTab(t, exe, f.base, shots)
		viewer.login(viewerToken)
		viewer.open("/jobs/nightly")
		for _, sel := range []string{"#run-now", "#pause", "#resume", "#edit", "#delete", "#bulk", "#run-with-form", "#pause-form", "#pause-all", "#resume-all"} {
			if eval[bool](viewer, fmt.Sprintf(`document.querySelector(%q) !== null`, sel)) {
				t.Errorf("a viewer sees %s", sel)
			}
		}
		viewer.screenshot("viewer-job")
		status := eval[int](viewer, `fetch(location.pathname + "/pause", {method: "POST",
			body: new URLSearchParams({csrf: document.querySelector("main").dataset.csrf})}).then(r => r.status)`)
		if status != 403 {
			t.Errorf("a viewer's pause: %d, want 403", status)
		}
		if j, _ := f.runner.Get(context.Background(), "nightly"); j.Paused {
			t.Error("a viewer paused the job")
		}
	})
}
