package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/client"
)

func auditFlags(fs *flag.FlagSet, o *cmdOpts) {
	fs.StringVar(&o.job, "job", "", "only the entries of the job of this `ID`")
	fs.StringVar(&o.who, "who", "", "only the entries of the token of this `name`")
	fs.StringVar(&o.since, "since", "", "only the entries made at or after this RFC3339 `time`")
	fs.StringVar(&o.after, "after", "", "only the entries after the one of this `ID` (the last of the previous page)")
	fs.IntVar(&o.limit, "limit", 0, "a page of at most `N` entries, 1 to 1000 (default the API's, 100); the next page's -after is printed on stderr")
	fs.BoolVar(&o.reverse, "reverse", false, "newest first: the newest -limit entries that match (read from the oldest on: narrow a long log with -since or -job)")
}

func cmdAudit(ctx context.Context, e *cmdEnv, _ []string) error {
	opts := client.AuditOptions{JobID: e.o.job, Who: e.o.who, Limit: e.o.limit}
	if e.o.since != "" {
		t, err := time.Parse(time.RFC3339Nano, e.o.since)
		if err != nil {
			return usagef("-since must be an RFC3339 time such as 2026-12-01T00:00:00Z, got %q", e.o.since)
		}
		opts.Since = t
	}
	if e.o.after != "" {
		n, err := strconv.ParseInt(e.o.after, 10, 64)
		if err != nil || n < 0 {
			return usagef("-after must be an entry's id (an integer >= 0), got %q", e.o.after)
		}
		opts.After = n
	}
	if e.o.limit < 0 {
		return usagef("-limit must be positive, got %d", e.o.limit)
	}
	var p client.AuditPage
	var err error
	if e.o.reverse {
		p, err = newestAudit(ctx, e, opts)
	} else {
		p, err = e.c.Audit(ctx, opts)
	}
	if err != nil {
		return err
	}
	if p.Next != 0 {
		fmt.Fprintf(e.stderr, "more entries follow: -after %d\n", p.Next)
	}
	if e.o.output == "json" {
		if p.Entries == nil {
			p.Entries = []client.AuditEntry{}
		}
		return e.json(p.Entries)
	}
	w := e.table()
	fmt.Fprintln(w, "ID\tTIME\tWHO\tROLE\tACTION\tJOB\tCHANGED")
	for _, a := range p.Entries {
		what := changed(a.Before, a.After)
		switch {
		case a.PauseAfter != nil:
			what = pauseText(*a.PauseAfter)
		case a.Action == cron.ActionRunNow && a.Replay:
			what = "replay of run " + a.RunID
		case a.Action == cron.ActionRunNow:
			what = "run " + a.RunID
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, timeText(a.Time), dash(a.Who), dash(a.Role), a.Action, dash(a.JobID), what)
	}
	return w.Flush()
}

// newestAudit returns the newest entries that opts selects (up to its
// limit, default 100), newest first: it pages through them from the
// oldest, keeping the newest. It says on stderr how many older ones it
// left out.
func newestAudit(ctx context.Context, e *cmdEnv, opts client.AuditOptions) (client.AuditPage, error) {
	keep := opts.Limit
	if keep == 0 {
		keep = 100
	}
	opts.Limit = 1000
	var last []client.AuditEntry
	older := 0
	for {
		p, err := e.c.Audit(ctx, opts)
		if err != nil {
			return client.AuditPage{}, err
		}
		last = append(last, p.Entries...)
		if n := len(last) - keep; n > 0 {
			older += n
			last = slices.Delete(last, 0, n)
		}
		if p.Next == 0 {
			break
		}
		opts.After = p.Next
	}
	slices.Reverse(last)
	if older > 0 {
		fmt.Fprintf(e.stderr, "%d older entries not shown: raise -limit, or narrow with -since or -job\n", older)
	}
	return client.AuditPage{Entries: last}, nil
}

// changed names the fields of a job that a write changed: "created",
// "deleted", "name,schedule", or "-" for none.
func changed(before, after *cron.Job) string {
	switch {
	case before == nil && after == nil:
		return "-"
	case before == nil:
		return "created"
	case after == nil:
		return "deleted"
	}
	b, a := jobFields(before), jobFields(after)
	var out []string
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if !reflect.DeepEqual(a[k], b[k]) {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}

// jobFields is the JSON form of j as a map of its fields.
func jobFields(j *cron.Job) map[string]any {
	m := map[string]any{}
	if b, err := json.Marshal(j); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	return m
}
