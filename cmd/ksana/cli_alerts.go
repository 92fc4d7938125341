package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/ksana-dev/ksana/cron"
)

func alertsFlags(fs *flag.FlagSet, o *cmdOpts) {
	fs.IntVar(&o.limit, "limit", 0, "at most `N` alerts, 1 to 1000 (default the API's, 100)")
	fs.BoolVar(&o.dead, "dead", false, "the dead alerts (given up: past their horizon, or refused for good) instead of the pending ones")
}

// cmdAlerts lists the alert outbox: the counts on stderr, the oldest
// alerts of one state as a table.
func cmdAlerts(ctx context.Context, e *cmdEnv, _ []string) error {
	if e.o.limit < 0 {
		return usagef("-limit must be positive, got %d", e.o.limit)
	}
	a, err := e.c.Alerts(ctx, e.o.dead, e.o.limit)
	if err != nil {
		return err
	}
	if e.o.output == "json" {
		if a.Alerts == nil {
			a.Alerts = []cron.AlertDelivery{}
		}
		return e.json(a)
	}
	fmt.Fprintf(e.stderr, "%d pending, %d dead\n", a.Pending, a.Dead)
	w := e.table()
	fmt.Fprintln(w, "DELIVERY\tRAISED\tJOB\tTRANSITION\tRUN\tATTEMPTS\tNEXT\tLAST ERROR")
	for _, d := range a.Alerts {
		next := "-"
		if d.Dead {
			next = "dead"
		} else if !d.NextAt.IsZero() {
			next = timeText(d.NextAt)
		}
		errText := strings.ReplaceAll(d.LastError, "\n", " ")
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", d.ID, timeText(d.CreatedAt), d.Alert.Job.ID, d.Alert.Transition,
			dash(d.Alert.Run.ID), d.Attempts, next, dash(errText))
	}
	return w.Flush()
}
