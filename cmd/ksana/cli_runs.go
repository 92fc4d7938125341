package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/client"
)

func historyFlags(fs *flag.FlagSet, o *cmdOpts) {
	fs.Func("job", "only the runs of the job of this `ID` (repeatable, or a comma-separated list)", func(v string) error {
		for id := range strings.SplitSeq(v, ",") {
			if id = strings.TrimSpace(id); id != "" {
				o.jobs = append(o.jobs, id)
			}
		}
		return nil
	})
	fs.StringVar(&o.status, "status", "", "only the runs of these `statuses`, comma-separated: success, failed, timeout, skipped, missed")
	fs.StringVar(&o.since, "since", "", "only the runs scheduled at or after this `time`: RFC 3339, or a duration ago (90m, 24h)")
	fs.StringVar(&o.until, "until", "", "only the runs scheduled before this `time`: RFC 3339, or a duration ago")
	fs.StringVar(&o.instance, "instance", "", "only the runs claimed by this `instance` (a shared database)")
	fs.IntVar(&o.limit, "limit", 0, "a page of at most `N` runs, 1 to 1000 (default the API's, 50); the next page's -after is printed on stderr")
	fs.StringVar(&o.after, "after", "", "the `cursor` of the next page, as printed by the previous one")
}

// parseWhen reads a -since or -until: an RFC 3339 time, or a duration
// before now.
func parseWhen(flagName, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, usagef("-%s must be an RFC 3339 time (2026-01-02T15:04:05Z) or a duration ago (90m), got %q", flagName, v)
}

func cmdHistory(ctx context.Context, e *cmdEnv, _ []string) error {
	opts := client.HistoryOptions{JobIDs: e.o.jobs, Instance: e.o.instance, Limit: e.o.limit, After: e.o.after}
	if e.o.limit < 0 {
		return usagef("-limit must be positive, got %d", e.o.limit)
	}
	for st := range strings.SplitSeq(e.o.status, ",") {
		if st = strings.TrimSpace(st); st != "" {
			opts.Statuses = append(opts.Statuses, cron.Status(st))
		}
	}
	now := time.Now()
	var err error
	if opts.Since, err = parseWhen("since", e.o.since, now); err != nil {
		return err
	}
	if opts.Until, err = parseWhen("until", e.o.until, now); err != nil {
		return err
	}
	p, err := e.c.AllRuns(ctx, opts)
	if err != nil {
		return err
	}
	if p.Next != "" {
		fmt.Fprintf(e.stderr, "more runs follow: -after %s\n", p.Next)
	}
	if e.o.output == "json" {
		if p.Runs == nil {
			p.Runs = []cron.Run{}
		}
		return e.json(p.Runs)
	}
	w := e.table()
	fmt.Fprintln(w, "RUN ID\tJOB\tSCHEDULED\tTRIGGER\tSTATUS\tSLOTS\tREASON\tATTEMPTS\tHTTP\tLATENCY\tINSTANCE\tERROR")
	for _, r := range p.Runs {
		httpStatus := "-"
		if r.HTTPStatus != 0 {
			httpStatus = strconv.Itoa(r.HTTPStatus)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\n", r.ID, r.JobID, timeText(r.ScheduledAt), triggerText(r), r.Status,
			max(r.Slots, 1), dash(r.Reason), r.Attempts, httpStatus, r.Latency, dash(r.Instance), dash(oneLine(r.Error)))
	}
	return w.Flush()
}

func cmdRunGet(ctx context.Context, e *cmdEnv, args []string) error {
	var run cron.Run
	var err error
	if e.o.wait != "" {
		d, perr := time.ParseDuration(e.o.wait)
		if perr != nil || d <= 0 {
			return usagef("-wait: must be a positive duration such as 30s or 5m, got %q", e.o.wait)
		}
		wctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		run, err = e.c.Wait(wctx, args[0])
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return fmt.Errorf("run %s has not ended after -wait %s (or no run has that id)", args[0], d)
		}
	} else {
		run, err = e.c.Run(ctx, args[0])
	}
	if err != nil {
		return err
	}
	if e.o.output == "json" {
		return e.json(run)
	}
	w := e.table()
	row := func(k, v string) { fmt.Fprintf(w, "%s\t%s\n", k, v) }
	row("run_id", run.ID)
	row("job_id", run.JobID)
	row("trigger", triggerText(run))
	row("status", string(run.Status))
	if run.Reason != "" {
		row("reason", run.Reason)
	}
	if run.Slots > 1 {
		row("slots", strconv.Itoa(run.Slots))
	}
	row("scheduled_at", timeText(run.ScheduledAt))
	row("triggered_at", timeText(run.TriggeredAt))
	row("finished_at", timeText(run.FinishedAt))
	row("attempts", strconv.Itoa(run.Attempts))
	if run.HTTPStatus != 0 {
		row("http_status", strconv.Itoa(run.HTTPStatus))
	}
	row("latency", run.Latency.String())
	if run.Instance != "" {
		row("instance", run.Instance)
	}
	if run.Error != "" {
		row("error", oneLine(run.Error))
	}
	for i, a := range run.AttemptLog {
		v := fmt.Sprintf("%s at %s, %s", a.Status, timeText(a.StartedAt), a.Duration)
		if a.HTTPStatus != 0 {
			v += ", http " + strconv.Itoa(a.HTTPStatus)
		}
		if a.Error != "" {
			v += ": " + oneLine(a.Error)
		}
		row("attempt "+strconv.Itoa(i+1), v)
	}
	return w.Flush()
}

// triggerText says what started run r: "schedule", "run-now by NAME", or
// "-" (a slot not called, or a record older than the trigger).
func triggerText(r cron.Run) string {
	if r.Trigger == cron.TriggerRunNow && r.TriggeredBy != "" {
		return "run-now by " + r.TriggeredBy
	}
	return dash(r.Trigger)
}
