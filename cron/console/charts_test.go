package console

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// chartFixture serves a console over a store holding a run a minute of
// job j over the last 30 minutes, every fifth one failed.
func chartFixture(t *testing.T) (*fixture, time.Time) {
	t.Helper()
	st := cron.NewMemStore()
	f := newFixture(t, fixtureOpts{auth: true, store: st})
	f.add(t, cron.Job{ID: "j"})
	now := time.Now().UTC()
	for i := range 30 {
		at := now.Add(-time.Duration(i) * time.Minute)
		r := cron.Run{ID: fmt.Sprintf("r%02d", i), JobID: "j", ScheduledAt: at, TriggeredAt: at.Add(50 * time.Millisecond), Status: cron.StatusSuccess,
			Attempts: 1, Latency: cron.Duration(time.Duration(i+1) * 10 * time.Millisecond)}
		if i%5 == 0 {
			r.Status = cron.StatusFailed
		}
		if err := st.AppendRun(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	return f, now
}

func TestRunsOver(t *testing.T) {
	f, now := chartFixture(t)
	c, err := newConsole(f.runner, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ch := c.runsOver(context.Background(), "x", "t", now, time.Minute, 60, 1000)
	if ch.Total != 30 || ch.Note != "" || len(ch.Buckets) != 60 || ch.Max != 1 {
		t.Fatalf("per minute: total %d, note %q, %d buckets, max %d", ch.Total, ch.Note, len(ch.Buckets), ch.Max)
	}
	failed := 0
	for _, b := range ch.Buckets {
		failed += b.Counts[cron.StatusFailed]
	}
	if failed != 6 {
		t.Errorf("failed runs counted: %d, want 6", failed)
	}
	svg := string(ch.SVG)
	for _, want := range []string{`role="img"`, `aria-label="t: 30 runs in all`, "<title>t: 30 runs", `class="bar s-failed"`, "UTC: 1 success</title>", "UTC: no run</title>"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the chart lacks %q", want)
		}
	}
	if rows := ch.Rows(); len(rows) != 30 {
		t.Errorf("the table of numbers has %d rows, want 30", len(rows))
	}
	// Capped reads say so.
	capped := c.runsOver(context.Background(), "x", "t", now, time.Minute, 60, 10)
	if capped.Total != 10 || !strings.Contains(capped.Note, "capped") {
		t.Errorf("capped: total %d, note %q", capped.Total, capped.Note)
	}
	hours := c.runsOver(context.Background(), "x", "t", now, time.Hour, 24, 1000)
	if hours.Total != 30 {
		t.Errorf("per hour: total %d, want 30", hours.Total)
	}
}

func TestChartsOnPages(t *testing.T) {
	f, _ := chartFixture(t)
	for _, tok := range []string{viewerToken, operatorToken, adminToken} {
		b := f.browser(t)
		b.login(tok)
		code, body, _ := b.get("/")
		if code != http.StatusOK {
			t.Fatalf("overview with %s: %d", tok, code)
		}
		for _, want := range []string{`id="chart-minute"`, `id="chart-hour"`, "Runs per minute, last hour", `<svg viewBox=`, "<summary>Numbers</summary>", "(30 runs)"} {
			if !strings.Contains(body, want) {
				t.Errorf("overview with %s lacks %q", tok, want)
			}
		}
		if strings.Count(body, "<script") != strings.Count(body, `<script src=`) || strings.Contains(body, " style=") {
			t.Error("the charts use a script or inline style, which the CSP refuses")
		}
		code, body, _ = b.get("/jobs/j")
		if code != http.StatusOK {
			t.Fatalf("job page with %s: %d", tok, code)
		}
		for _, want := range []string{`id="chart-durations"`, `id="chart-lag"`, "Lag of each run", "longest 300ms", `href="/jobs-ui/runs/r00"`} {
			if !strings.Contains(body, want) {
				t.Errorf("job page with %s lacks %q", tok, want)
			}
		}
	}
}

func TestChartsWithoutRuns(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.add(t, cron.Job{ID: "j"})
	b := f.browser(t)
	if _, body, _ := b.get("/"); !strings.Contains(body, "No run in this window.") {
		t.Error("an empty chart does not say so")
	}
	if _, body, _ := b.get("/jobs/j"); !strings.Contains(body, `id="charts"`) || strings.Contains(body, `id="chart-durations"`) {
		t.Error("a job without runs draws a chart")
	}
}
