package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

func untilFlags(fs *flag.FlagSet, o *cmdOpts) {
	fs.StringVar(&o.until, "until", "", "resume by itself at this RFC3339 `time` (2026-12-01T00:00:00Z)")
	fs.StringVar(&o.forDur, "for", "", "resume by itself after this `duration` (2h, 30m)")
}

// untilTime is the time of -until or -for (zero for neither), seen at
// now.
func (o *cmdOpts) untilTime(now time.Time) (time.Time, error) {
	switch {
	case o.until != "" && o.forDur != "":
		return time.Time{}, usagef("give -until or -for, not both")
	case o.until != "":
		t, err := time.Parse(time.RFC3339Nano, o.until)
		if err != nil {
			return time.Time{}, usagef("-until must be an RFC3339 time such as 2026-12-01T00:00:00Z, got %q", o.until)
		}
		return t, nil
	case o.forDur != "":
		d, err := time.ParseDuration(o.forDur)
		if err != nil || d <= 0 {
			return time.Time{}, usagef("-for must be a positive duration such as 2h or 30m, got %q", o.forDur)
		}
		return now.Add(d), nil
	}
	return time.Time{}, nil
}

func cmdPauseAll(ctx context.Context, e *cmdEnv, _ []string) error {
	until, err := e.o.untilTime(time.Now())
	if err != nil {
		return err
	}
	p, err := e.c.PauseAll(ctx, until, e.o.reason)
	if err != nil {
		return err
	}
	return e.printPause(p)
}

func cmdResumeAll(ctx context.Context, e *cmdEnv, _ []string) error {
	p, err := e.c.ResumeAll(ctx)
	if err != nil {
		return err
	}
	return e.printPause(p)
}

func (e *cmdEnv) printPause(p cron.PauseState) error {
	if e.o.output == "json" {
		return e.json(p)
	}
	_, err := fmt.Fprintln(e.stdout, pauseText(p))
	return err
}

// pauseText says in a line what p is.
func pauseText(p cron.PauseState) string {
	if !p.Paused {
		return "the service is not paused: jobs fire"
	}
	s := "the service is paused"
	if !p.Until.IsZero() {
		s += " until " + timeText(p.Until)
	} else {
		s += " until resumed (ksana resume)"
	}
	if p.Reason != "" {
		s += ": " + p.Reason
	}
	return s
}
