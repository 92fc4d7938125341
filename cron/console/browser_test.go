package console

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/internal/browsertest"
	"github.com/ksana-dev/ksana/internal/testenv"
)

// TestBrowser drives the console in headless Chromium: the form with a
// validation error then a job created, run now with the run appearing
// without a reload, pause and resume, a bulk pause on a filter, a viewer
// who sees no button that writes and is refused a write, and a hostile
// job name shown as text. It saves a screenshot of each page.
func TestBrowser(t *testing.T) {
	exe := testenv.Chromium(t)
	shots := testenv.ScreenshotDir(t)
	f := newFixture(t, fixtureOpts{auth: true, console: Config{RefreshInterval: 300 * time.Millisecond}})
	admin := browsertest.New(t, exe, f.base, shots, "")
	admin.Login(adminToken)

	t.Run("create through the form", func(t *testing.T) {
		admin.In(t)
		admin.Open("/new")
		admin.Screenshot("form")
		admin.Set(`[name="id"]`, "nightly")
		admin.Set(`[name="name"]`, "nightly report")
		admin.Set(`[name="schedule.kind"]`, "every")
		admin.Set(`[name="schedule.every"]`, "soon")
		admin.Set(`[name="http.url"]`, "https://example.com/report")
		admin.Do("save", chromedp.Click(chromedp.CSS("#save")),
			chromedp.WaitVisible(chromedp.CSS(`.field-error[data-field="schedule.every"]`)))
		msg := browsertest.Eval[string](admin, `document.querySelector('.field-error[data-field="schedule.every"]').textContent`)
		if !strings.Contains(msg, "soon") {
			t.Errorf("the error beside schedule.every is %q", msg)
		}
		admin.Screenshot("form-error")
		admin.Set(`[name="schedule.every"]`, "1h")
		admin.Do("save again", chromedp.Click(chromedp.CSS("#save")), chromedp.WaitVisible(chromedp.CSS("#words")))
		if words := browsertest.Eval[string](admin, `document.querySelector("#words").textContent`); !strings.HasPrefix(words, "every hour") {
			t.Errorf("schedule in words: %q", words)
		}
		if _, err := f.runner.Get(context.Background(), "nightly"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("run now, pause, resume without a reload", func(t *testing.T) {
		admin.In(t)
		admin.Open("/jobs/nightly")
		browsertest.Eval[bool](admin, `window.__sameDocument = true`)
		admin.Do("run now", chromedp.Click(chromedp.CSS("#run-now")),
			chromedp.WaitVisible(chromedp.CSS("#history tr.run")))
		if got := browsertest.Eval[string](admin, `document.querySelector("#history tr.run .st").textContent`); got != "success" {
			t.Errorf("the run's status: %q", got)
		}
		admin.Do("pause", chromedp.Click(chromedp.CSS("#pause")), chromedp.WaitVisible(chromedp.CSS("#resume")))
		if j, _ := f.runner.Get(context.Background(), "nightly"); !j.Paused {
			t.Error("not paused")
		}
		if got := browsertest.Eval[string](admin, `document.querySelector("#state").textContent`); got != "paused" {
			t.Errorf("state shown: %q", got)
		}
		admin.Screenshot("job-paused")
		admin.Do("resume", chromedp.Click(chromedp.CSS("#resume")), chromedp.WaitVisible(chromedp.CSS("#pause")))
		if j, _ := f.runner.Get(context.Background(), "nightly"); j.Paused {
			t.Error("not resumed")
		}
		if !browsertest.Eval[bool](admin, `window.__sameDocument === true`) {
			t.Error("the actions reloaded the whole page")
		}
		// A run made elsewhere shows by the history's own refresh.
		if _, err := f.runner.RunNow(context.Background(), "nightly", cron.RunOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
		admin.Do("live history", chromedp.WaitVisible(chromedp.CSS("#history tr.run:nth-child(2)")))
		// Times show how far from now, the absolute time in UTC on hover.
		if title := browsertest.Eval[string](admin, `document.querySelector("#history time").title`); !absTimeRE.MatchString(title) {
			t.Errorf("time title %q, want the form 2026-11-27 22:57:25 UTC", title)
		}
		if text := browsertest.Eval[string](admin, `document.querySelector("#history time").textContent`); !relTimeRE.MatchString(text) {
			t.Errorf("time text %q, want a relative time such as 5 min ago", text)
		}
		admin.Screenshot("job")
	})

	t.Run("pause until a time and see it resume", func(t *testing.T) {
		admin.In(t)
		admin.Open("/jobs/nightly")
		// now+2s in the browser's zone, as a user types it.
		browsertest.Eval[bool](admin, `(() => { const d = new Date(Date.now() + 2000), p = n => String(n).padStart(2, "0");
			document.querySelector("#pause-until").value = d.getFullYear() + "-" + p(d.getMonth() + 1) + "-" + p(d.getDate()) +
				"T" + p(d.getHours()) + ":" + p(d.getMinutes()) + ":" + p(d.getSeconds()); return true })()`)
		admin.Do("pause until", chromedp.Click(chromedp.CSS("#pause-until-submit")), chromedp.WaitVisible(chromedp.CSS("#resume")))
		if got := browsertest.Eval[string](admin, `document.querySelector("#state").textContent`); !strings.HasPrefix(got, "paused until") {
			t.Errorf("state shown: %q, want paused until …", got)
		}
		j, _ := f.runner.Get(context.Background(), "nightly")
		if d := time.Until(j.PausedUntil); !j.Paused || d <= 0 || d > 3*time.Second {
			t.Fatalf("paused %v until %s (in %s), want about 2s from now", j.Paused, j.PausedUntil, d)
		}
		admin.Screenshot("job-paused-until")
		// The page shows the job enabled again by itself, without a reload.
		browsertest.Eval[bool](admin, `window.__sameDocument = true`)
		admin.Do("see it resume", chromedp.WaitVisible(chromedp.CSS("#state.st-success")))
		if !browsertest.Eval[bool](admin, `window.__sameDocument === true`) {
			t.Error("the page reloaded to show the end of the pause")
		}
		if j, _ := f.runner.Get(context.Background(), "nightly"); j.Paused {
			t.Error("the job shows enabled but is paused")
		}
		admin.Open("/jobs/nightly")
		if got := browsertest.Eval[string](admin, `document.querySelector("#state").textContent`); got != "enabled" {
			t.Errorf("after a reload the state is %q", got)
		}
	})

	t.Run("run now with a body override", func(t *testing.T) {
		admin.In(t)
		admin.Open("/jobs/nightly")
		before := browsertest.Eval[int](admin, `document.querySelectorAll("#history tr.run").length`)
		admin.Do("open the form", chromedp.Click(chromedp.CSS("#run-with summary")), chromedp.WaitVisible(chromedp.CSS("#rw-body")))
		admin.Set("#rw-body", `{"override":true}`)
		admin.Screenshot("run-with-overrides")
		admin.Do("run", chromedp.Click(chromedp.CSS("#run-with-submit")),
			chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf("#history tr.run:nth-child(%d)", before+1))))
		// The history refreshes itself: its new row can come before the
		// answer to the form, which brings the flash. Wait up to 10 s for it.
		flash := browsertest.Eval[string](admin, `new Promise(done => { const t0 = Date.now(); (function look() {
			const f = document.querySelector("#flash"), s = f ? f.textContent : "";
			if (s.includes("run queued") || Date.now() - t0 > 10000) done(s); else setTimeout(look, 50) })() })`)
		if !strings.Contains(flash, "run queued") {
			t.Errorf("flash %q", flash)
		}
	})

	t.Run("runs page filtered by status", func(t *testing.T) {
		admin.In(t)
		admin.Open("/runs?status=success")
		n := browsertest.Eval[int](admin, `document.querySelectorAll("#runs tr.run").length`)
		ok := browsertest.Eval[bool](admin, `[...document.querySelectorAll("#runs tr.run .st")].every(e => e.textContent === "success")`)
		if n < 2 || !ok {
			t.Errorf("runs page with status=success: %d rows, all success %v", n, ok)
		}
		admin.Screenshot("runs")
		admin.Open("/runs?status=failed")
		if n := browsertest.Eval[int](admin, `document.querySelectorAll("#runs tr.run").length`); n != 0 {
			t.Errorf("runs page with status=failed: %d rows, want none", n)
		}
	})

	t.Run("service pause banner", func(t *testing.T) {
		admin.In(t)
		admin.Open("/")
		admin.Set("#pa-reason", "maintenance window")
		admin.Do("pause all", chromedp.Click(chromedp.CSS("#pause-all-submit")), chromedp.WaitVisible(chromedp.CSS("#confirm-pause-all")))
		admin.Screenshot("pause-all-confirm")
		admin.Do("confirm", chromedp.Click(chromedp.CSS("#confirm-pause-all")), chromedp.WaitVisible(chromedp.CSS("#service-paused")))
		if !f.runner.Paused().Paused {
			t.Fatal("the service is not paused")
		}
		admin.Open("/jobs")
		if got := browsertest.Eval[string](admin, `document.querySelector("#service-paused").textContent`); !strings.Contains(got, "maintenance window") {
			t.Errorf("banner %q", got)
		}
		admin.Screenshot("service-paused")
		admin.Do("resume all", chromedp.Click(chromedp.CSS("#resume-all")), chromedp.WaitNotPresent(chromedp.CSS("#service-paused")))
		if f.runner.Paused().Paused {
			t.Error("the service is still paused")
		}
	})

	t.Run("bulk pause on a filter", func(t *testing.T) {
		admin.In(t)
		for i := range 5 {
			name := fmt.Sprintf("batch %d", i)
			if i == 4 {
				name = "lonely"
			}
			f.add(t, cron.Job{ID: fmt.Sprintf("b%d", i), Name: name})
		}
		admin.Open("/jobs?q=batch")
		admin.Screenshot("jobs")
		admin.Set("#bulk-action", "pause")
		admin.Do("apply", chromedp.Click(chromedp.CSS("#bulk button")), chromedp.WaitVisible(chromedp.CSS("#confirm-count")))
		if n := browsertest.Eval[string](admin, `document.querySelector("#confirm-count").textContent`); n != "4" {
			t.Errorf("confirmation counts %s jobs, want 4", n)
		}
		admin.Screenshot("bulk-confirm")
		admin.Do("confirm", chromedp.Click(chromedp.CSS("#confirm button")), chromedp.WaitVisible(chromedp.CSS("#jobs")))
		for _, j := range listJobs(t, f.runner) {
			if want := strings.HasPrefix(j.Name, "batch"); j.Paused != want {
				t.Errorf("%s %q: paused %v, want %v", j.ID, j.Name, j.Paused, want)
			}
		}
		if flash := browsertest.Eval[string](admin, `document.querySelector("#flash").textContent`); !strings.Contains(flash, "4 of 4") {
			t.Errorf("flash %q", flash)
		}
	})

	t.Run("hostile name", func(t *testing.T) {
		admin.In(t)
		const evil = `<script>window.__xss=1</script><img src=x onerror="window.__xss=2">`
		f.add(t, cron.Job{ID: "evil", Name: evil})
		for _, p := range []string{"/jobs?q=script", "/jobs/evil", "/jobs/evil/edit", "/"} {
			admin.Open(p)
			if xss := browsertest.Eval[bool](admin, `window.__xss === undefined`); !xss {
				t.Errorf("%s: the name ran as script", p)
			}
		}
		admin.Open("/jobs/evil")
		if h1 := browsertest.Eval[string](admin, `document.querySelector("h1").firstChild.textContent.trim()`); h1 != evil {
			t.Errorf("the title shows %q, want the name as text", h1)
		}
		admin.Screenshot("hostile-name")
	})

	t.Run("overview and phone", func(t *testing.T) {
		admin.In(t)
		admin.Open("/")
		admin.Screenshot("overview")
		admin.Do("phone", chromedp.EmulateViewport(390, 844))
		admin.Open("/jobs/nightly")
		if w := browsertest.Eval[int](admin, `document.documentElement.scrollWidth`); w > 420 {
			t.Errorf("on a phone the job page is %d px wide", w)
		}
		admin.Screenshot("job-phone")
		admin.Do("desktop", chromedp.EmulateViewport(1280, 900))
	})

	t.Run("viewer", func(t *testing.T) {
		viewer := browsertest.New(t, exe, f.base, shots, "")
		viewer.Login(viewerToken)
		viewer.Open("/jobs/nightly")
		for _, sel := range []string{"#run-now", "#pause", "#resume", "#edit", "#delete", "#bulk", "#run-with-form", "#pause-form", "#pause-all", "#resume-all"} {
			if browsertest.Eval[bool](viewer, fmt.Sprintf(`document.querySelector(%q) !== null`, sel)) {
				t.Errorf("a viewer sees %s", sel)
			}
		}
		viewer.Screenshot("viewer-job")
		status := browsertest.Eval[int](viewer, `fetch(location.pathname + "/pause", {method: "POST",
			body: new URLSearchParams({csrf: document.querySelector("main").dataset.csrf})}).then(r => r.status)`)
		if status != 403 {
			t.Errorf("a viewer's pause: %d, want 403", status)
		}
		if j, _ := f.runner.Get(context.Background(), "nightly"); j.Paused {
			t.Error("a viewer paused the job")
		}
	})
}
