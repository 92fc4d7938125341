package console

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// The charts are server-rendered inline SVG: bars with a <title> each
// (the numbers on hover and for screen readers) and a table of the same
// numbers below; no script and nothing loaded, so they pass the
// Content-Security-Policy.

// chartMaxRuns is the most run records a chart of the overview reads;
// past it the chart says it is capped (the oldest runs are not counted:
// runs are read newest first).
const chartMaxRuns = 10_000

// jobChartRuns is how many of its latest runs a job's chart shows.
const jobChartRuns = 100

// chartStatuses are the statuses a runs chart stacks, bottom up.
var chartStatuses = []cron.Status{cron.StatusSuccess, cron.StatusFailed, cron.StatusTimeout, cron.StatusSkipped, cron.StatusMissed}

// bucket is one bar of a runs chart: the runs scheduled in [Start,
// Start+step), by status.
type bucket struct {
	Start  time.Time
	Counts map[cron.Status]int
	Total  int
}

// runsChart is a chart of runs over time, by status.
type runsChart struct {
	ID      string // the id of its element
	Title   string
	Step    time.Duration
	Buckets []bucket
	Max     int    // the tallest bar
	Total   int    // the runs counted
	Note    string // capped or failed reads
	SVG     template.HTML
}

// overviewCharts returns the overview's charts: the runs of every job
// per minute over the last hour and per hour over the last day, computed
// again in the background once older than Config.OverviewMaxAge (see
// cached; for every user: they hold counts only), read with ctx's values
// but not its end.
func (c *Console) overviewCharts(ctx context.Context) []*runsChart {
	ctx = context.WithoutCancel(ctx)
	return c.ch.get(c.cfg.OverviewMaxAge, func() []*runsChart {
		now := time.Now().UTC()
		return []*runsChart{
			c.runsOver(ctx, "chart-minute", "Runs per minute, last hour", now, time.Minute, 60, chartMaxRuns),
			c.runsOver(ctx, "chart-hour", "Runs per hour, last day", now, time.Hour, 24, chartMaxRuns),
		}
	})
}

// runsOver counts the runs of every job scheduled in the n steps up to
// now (the last one holding now), reading at most maxRuns records.
func (c *Console) runsOver(ctx context.Context, id, title string, now time.Time, step time.Duration, n, maxRuns int) *runsChart {
	ch := &runsChart{ID: id, Title: title, Step: step}
	end := now.Truncate(step).Add(step)
	start := end.Add(-time.Duration(n) * step)
	for i := range n {
		ch.Buckets = append(ch.Buckets, bucket{Start: start.Add(time.Duration(i) * step), Counts: map[cron.Status]int{}})
	}
	q := cron.RunQuery{Since: start, Until: end, Limit: cron.MaxRunQueryLimit}
	read, capped := 0, false
	for !capped {
		runs, next, err := c.r.QueryRuns(ctx, q)
		if errors.Is(err, cron.ErrUnsupported) {
			ch.Note = "the store keeps no run history"
			break
		}
		if err != nil {
			ch.Note = "reading the runs: " + err.Error()
			break
		}
		for i := range runs {
			if read == maxRuns {
				capped = true
				break
			}
			read++
			k := int(runs[i].ScheduledAt.Sub(start) / step)
			if k < 0 || k >= n {
				continue
			}
			b := &ch.Buckets[k]
			b.Counts[runs[i].Status]++
			b.Total++
			ch.Total++
		}
		if next.IsZero() || len(runs) == 0 {
			break
		}
		q.After = next
	}
	if capped {
		ch.Note = fmt.Sprintf("capped: the latest %s runs are counted; older ones in this window are not", thousands(maxRuns))
	}
	for _, b := range ch.Buckets {
		ch.Max = max(ch.Max, b.Total)
	}
	ch.SVG = ch.svg()
	return ch
}

// label writes the start of a bucket: "22:57" for minutes, "Nov 27
// 22:00" for hours, in UTC.
func (ch *runsChart) label(t time.Time) string {
	if ch.Step < time.Hour {
		return t.UTC().Format("15:04")
	}
	return t.UTC().Format("Jan 2 15:04")
}

// Chart geometry, in the units of the viewBox.
const (
	chartW, chartH     = 600, 160
	chartLeft, chartTB = 34, 18 // room for the axis labels
)

// svg draws the chart as stacked bars.
func (ch *runsChart) svg() template.HTML {
	var b strings.Builder
	desc := fmt.Sprintf("%s: %s runs in all, at most %s in one bar", ch.Title, thousands(ch.Total), thousands(ch.Max))
	fmt.Fprintf(&b, `<svg viewBox="0 0 %d %d" width="100%%" role="img" aria-label="%s" class="chart" preserveAspectRatio="none"><title>%s</title>`,
		chartW, chartH, template.HTMLEscapeString(desc), template.HTMLEscapeString(desc))
	plotW, plotH := float64(chartW-chartLeft), float64(chartH-2*chartTB)
	top := max(ch.Max, 1)
	fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`, chartLeft, chartH-chartTB, chartW, chartH-chartTB)
	fmt.Fprintf(&b, `<text class="tick" x="%d" y="%d" text-anchor="end">%d</text>`, chartLeft-4, chartTB+4, top)
	fmt.Fprintf(&b, `<text class="tick" x="%d" y="%d" text-anchor="end">0</text>`, chartLeft-4, chartH-chartTB)
	w := plotW / float64(len(ch.Buckets))
	for i, bk := range ch.Buckets {
		x := float64(chartLeft) + float64(i)*w
		var parts []string
		for _, s := range chartStatuses {
			if n := bk.Counts[s]; n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, s))
			}
		}
		if len(parts) == 0 {
			parts = append(parts, "no run")
		}
		fmt.Fprintf(&b, `<g><title>%s UTC: %s</title>`, ch.label(bk.Start), strings.Join(parts, ", "))
		// A bar as tall as the plot, invisible, so that an empty bucket
		// has its hover too.
		fmt.Fprintf(&b, `<rect class="hover" x="%.1f" y="%d" width="%.1f" height="%.1f"/>`, x, chartTB, w, plotH)
		y := float64(chartH - chartTB)
		for _, s := range chartStatuses {
			n := bk.Counts[s]
			if n == 0 {
				continue
			}
			h := plotH * float64(n) / float64(top)
			y -= h
			fmt.Fprintf(&b, `<rect class="bar s-%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`, s, x+w*0.1, y, w*0.8, h)
		}
		b.WriteString(`</g>`)
	}
	if n := len(ch.Buckets); n > 0 {
		fmt.Fprintf(&b, `<text class="tick" x="%d" y="%d">%s</text>`, chartLeft, chartH-2, ch.label(ch.Buckets[0].Start))
		fmt.Fprintf(&b, `<text class="tick" x="%d" y="%d" text-anchor="end">%s UTC</text>`, chartW, chartH-2, ch.label(ch.Buckets[n-1].Start))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// Rows are the buckets that hold runs, for the table of numbers.
func (ch *runsChart) Rows() []chartRow {
	var out []chartRow
	for _, bk := range ch.Buckets {
		if bk.Total == 0 {
			continue
		}
		r := chartRow{Label: ch.label(bk.Start) + " UTC", Total: bk.Total}
		for _, s := range chartStatuses {
			r.Counts = append(r.Counts, bk.Counts[s])
		}
		out = append(out, r)
	}
	return out
}

// Statuses are the columns of the table of numbers.
func (ch *runsChart) Statuses() []cron.Status { return chartStatuses }

// chartRow is a row of a chart's table of numbers.
type chartRow struct {
	Label  string
	Counts []int // by chartStatuses
	Total  int
}

// --- a job's durations and lag ---

// jobChart is the chart of a job's latest runs: each one's duration
// (latency) and lag (triggered − scheduled).
type jobChart struct {
	Runs     []runRow // oldest first
	Note     string
	Duration template.HTML
	Lag      template.HTML
}

// jobChartOf reads the latest jobChartRuns runs of job id (one bounded
// read of [cron.Runner.Runs]) and draws them.
func (c *Console) jobChartOf(ctx context.Context, base, id string, role cron.Role) *jobChart {
	jc := &jobChart{}
	// The job's own history, newest first: the read of its history part,
	// one more run to know whether older ones are left out.
	runs, err := c.r.Runs(ctx, id, jobChartRuns+1)
	switch {
	case errors.Is(err, cron.ErrUnsupported):
		jc.Note = "the store keeps no run history"
		return jc
	case err != nil:
		jc.Note = "reading the runs: " + err.Error()
		return jc
	}
	if len(runs) > jobChartRuns {
		runs = runs[:jobChartRuns]
		jc.Note = fmt.Sprintf("the latest %d runs; older ones are not drawn", jobChartRuns)
	}
	// Only the runs that were called have a duration and a lag.
	called := runs[:0:0]
	for _, r := range runs {
		if !r.TriggeredAt.IsZero() {
			called = append(called, r)
		}
	}
	rs := rows(base, called, role)
	for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
		rs[i], rs[j] = rs[j], rs[i]
	}
	jc.Runs = rs
	if len(rs) == 0 {
		return jc
	}
	jc.Duration = seriesSVG("Duration of each run, oldest to newest", rs, func(r runRow) time.Duration { return time.Duration(r.Latency) })
	jc.Lag = seriesSVG("Lag of each run (triggered − scheduled), oldest to newest", rs, func(r runRow) time.Duration { return r.Lag })
	return jc
}

// seriesSVG draws one bar per run of the value v, each with its title.
func seriesSVG(title string, rs []runRow, v func(runRow) time.Duration) template.HTML {
	var top, sum time.Duration
	for _, r := range rs {
		top = max(top, v(r))
		sum += v(r)
	}
	desc := fmt.Sprintf("%s: %d runs, longest %s, mean %s", title, len(rs), durText(top), durText(sum/time.Duration(len(rs))))
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %d %d" width="100%%" role="img" aria-label="%s" class="chart" preserveAspectRatio="none"><title>%s</title>`,
		chartW, chartH, template.HTMLEscapeString(desc), template.HTMLEscapeString(desc))
	plotW, plotH := float64(chartW-chartLeft), float64(chartH-2*chartTB)
	fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`, chartLeft, chartH-chartTB, chartW, chartH-chartTB)
	fmt.Fprintf(&b, `<text class="tick" x="%d" y="%d" text-anchor="end">%s</text>`, chartLeft-4, chartTB+4, template.HTMLEscapeString(durText(top)))
	fmt.Fprintf(&b, `<text class="tick" x="%d" y="%d" text-anchor="end">0</text>`, chartLeft-4, chartH-chartTB)
	w := plotW / float64(max(len(rs), 20))
	for i, r := range rs {
		x := float64(chartLeft) + float64(i)*w
		d := max(v(r), 0)
		h := 0.0
		if top > 0 {
			h = max(plotH*float64(d)/float64(top), 1)
		}
		st := string(r.Status)
		if st == "" {
			st = "never"
		}
		fmt.Fprintf(&b, `<g><title>%s: %s, %s</title><rect class="hover" x="%.1f" y="%d" width="%.1f" height="%.1f"/><rect class="bar s-%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/></g>`,
			template.HTMLEscapeString(abs(r.ScheduledAt)), template.HTMLEscapeString(durText(v(r))), template.HTMLEscapeString(st),
			x, chartTB, w, plotH, template.HTMLEscapeString(st), x+w*0.15, float64(chartH-chartTB)-h, w*0.7, h)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
