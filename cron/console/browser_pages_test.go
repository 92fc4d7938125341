package console

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/internal/browsertest"
	"github.com/ksana-dev/ksana/internal/testenv"
)

// TestBrowserPages drives the overview with its charts, a job's page, a
// run's page and the jobs list at 420 px wide in headless Chromium, and
// saves a screenshot of each.
func TestBrowserPages(t *testing.T) {
	exe := testenv.Chromium(t)
	shots := testenv.ScreenshotDir(t)
	st := cron.NewMemStore()
	f := newFixture(t, fixtureOpts{auth: true, store: st, console: Config{PageSize: 10}})
	now := time.Now()
	for i := range 24 {
		j := cron.Job{ID: fmt.Sprintf("report-%02d", i), Name: fmt.Sprintf("A rather long job name, number %d, for the narrow screen", i), Schedule: cron.Every(time.Duration(i+1) * 5 * time.Minute)}
		if i%3 == 0 {
			j.Schedule = cron.ScheduleSpec{Kind: cron.KindCron, Cron: "0 9 * * 1-5", TZ: "Europe/Paris"}
		}
		f.add(t, j)
	}
	// An hour of history: a run a minute, a few failed and one run-now.
	var runNow cron.Run
	for i := range 60 {
		at := now.Add(-time.Duration(60-i) * time.Minute).Truncate(time.Minute)
		r := cron.Run{ID: fmt.Sprintf("run-%02d", i), JobID: "report-00", ScheduledAt: at, TriggeredAt: at.Add(time.Duration(i%7) * 40 * time.Millisecond),
			FinishedAt: at.Add(time.Second), Status: cron.StatusSuccess, Attempts: 1, HTTPStatus: 200, Latency: cron.Duration(time.Duration(100+i*13%400) * time.Millisecond), Trigger: cron.TriggerSchedule}
		if i%9 == 4 {
			r.Status, r.HTTPStatus, r.Attempts, r.Error = cron.StatusFailed, 503, 3, "http 503"
		}
		if i == 57 {
			r.Trigger, r.TriggeredBy = cron.TriggerRunNow, "ada"
		}
		if err := st.AppendRun(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if r.Trigger == cron.TriggerRunNow {
			runNow = r
		}
	}
	tb := browsertest.New(t, exe, f.base, shots, "")
	tb.Login(adminToken)

	tb.Open("/")
	tb.Do("charts", chromedp.WaitVisible(chromedp.CSS("#chart-minute svg")))
	if n := browsertest.Eval[int](tb, `document.querySelectorAll("#chart-minute svg rect.bar").length`); n == 0 {
		t.Error("the runs-per-minute chart has no bar")
	}
	tb.Screenshot("overview-charts")

	tb.Open("/jobs/report-00")
	tb.Do("job charts", chromedp.WaitVisible(chromedp.CSS("#chart-durations svg")))
	if zone := browsertest.Eval[string](tb, `document.querySelector("#zone").textContent`); zone != "Europe/Paris" {
		t.Errorf("the job's zone: %q", zone)
	}
	if n := browsertest.Eval[int](tb, `document.querySelectorAll("#next th").length`); n != 3 {
		t.Errorf("the next runs table has %d columns, want 3 (Paris, UTC, relative)", n)
	}
	tb.Screenshot("job-charts")

	tb.Open("/runs/" + url.PathEscape(runNow.ID))
	if got := browsertest.Eval[string](tb, `document.querySelector("#run-trigger").textContent`); !strings.Contains(got, "ada") {
		t.Errorf("the run's trigger: %q", got)
	}
	if browsertest.Eval[bool](tb, `document.querySelector("#run-now-mark") === null`) {
		t.Error("the run-now is not marked")
	}
	tb.Screenshot("run")

	tb.Do("narrow", chromedp.EmulateViewport(420, 900))
	tb.Open("/jobs")
	if browsertest.Eval[int](tb, `document.querySelectorAll("#jobs tbody tr").length`) != 10 {
		t.Error("the jobs page does not show 10 jobs")
	}
	overflow := browsertest.Eval[int](tb, `document.body.scrollWidth - document.documentElement.clientWidth`)
	if overflow > 0 {
		t.Errorf("at 420 px the page body overflows by %d px", overflow)
	}
	if w := browsertest.Eval[int](tb, `document.documentElement.scrollWidth`); w > 420 {
		t.Errorf("at 420 px the page is %d px wide", w)
	}
	tb.Screenshot("jobs-420")
	tb.Open("/")
	if overflow := browsertest.Eval[int](tb, `document.documentElement.scrollWidth - document.documentElement.clientWidth`); overflow > 0 {
		t.Errorf("at 420 px the overview overflows by %d px", overflow)
	}
	tb.Screenshot("overview-420")
	tb.Do("desktop", chromedp.EmulateViewport(1280, 900))
}
