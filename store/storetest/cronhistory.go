package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/cron"
)

func cronCaseQueryRuns(t *testing.T, s cron.Store) {
	rs := cronRunStore(t, s)
	qr := rs
	ctx := context.Background()
	cronSave(t, s, cronJobs()...)
	ids := []string{"job-every", "job-once", "job-cron"}
	var all []cron.Run
	for i := range 12 {
		for k, id := range ids {
			// Three runs share each scheduled time: ties are ordered by id.
			r := cronRun(id, i)
			r.ID = fmt.Sprintf("r%02d-%d", (i*7+k*5)%36, k)
			switch (i + k) % 4 {
			case 0:
				r.Status, r.Error, r.HTTPStatus = cron.StatusSuccess, "", 200
			case 1:
				r.Status, r.Reason, r.Slots, r.Attempts, r.HTTPStatus, r.Error = cron.StatusMissed, cron.ReasonDowntime, 17, 0, 0, ""
			case 2:
				r.Status, r.Reason, r.Attempts, r.HTTPStatus, r.Error = cron.StatusSkipped, cron.ReasonOverlap, 0, 0, "previous run still in flight"
			}
			all = append(all, r)
			if err := rs.AppendRun(ctx, r); err != nil {
				t.Fatalf("AppendRun: %v", err)
			}
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Every run kept (the newest of each job, up to the store's limit),
	// as appended (the instance is the store's to set).
	var kept []cron.Run
	for _, id := range ids {
		runs, err := rs.Runs(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, runs...)
	}
	stored, next, err := qr.QueryRuns(ctx, cron.RunQuery{Limit: cron.MaxRunQueryLimit})
	if err != nil {
		t.Fatalf("QueryRuns: %v", err)
	}
	want, _ := cron.RunQuery{Limit: cron.MaxRunQueryLimit}.Page(kept)
	if len(want) < len(ids) {
		t.Fatalf("%d runs kept of %d", len(want), len(all))
	}
	if diff := cmp.Diff(want, stored); diff != "" || !next.IsZero() {
		t.Fatalf("QueryRuns of every run, next %v (-want +got):\n%s", next, diff)
	}
	inst := stored[0].Instance
	mid := cronTime.Add(4 * time.Minute)
	for _, q := range []cron.RunQuery{
		{Limit: 5},
		{Limit: 1},
		{JobIDs: []string{"job-cron"}, Limit: 4},
		{JobIDs: []string{"job-cron", "job-every"}, Limit: 7},
		{Statuses: []cron.Status{cron.StatusMissed}, Limit: 2},
		{Statuses: []cron.Status{cron.StatusFailed, cron.StatusSkipped}, Limit: 6},
		{Since: mid, Limit: 4},
		{Until: mid, Limit: 4},
		{Since: mid, Until: mid.Add(3 * time.Minute), JobIDs: []string{"job-once"}, Statuses: []cron.Status{cron.StatusSuccess, cron.StatusFailed}},
		{Instance: inst, Limit: 11},
		{Instance: "no such instance"},
		{JobIDs: []string{"nope"}},
		{After: cron.RunCursor{ScheduledAt: mid, RunID: "r99"}, Limit: 3}, // a run gone: after its place
	} {
		want, _ := cron.RunQuery{JobIDs: q.JobIDs, Statuses: q.Statuses, Since: q.Since, Until: q.Until,
			Instance: q.Instance, After: q.After, Limit: cron.MaxRunQueryLimit}.Page(stored)
		got := []cron.Run{}
		for page := 0; ; page++ {
			runs, next, err := qr.QueryRuns(ctx, q)
			if err != nil {
				t.Fatalf("QueryRuns(%+v): %v", q, err)
			}
			if len(runs) > q.PageSize() || (!next.IsZero() && len(runs) != q.PageSize()) {
				t.Fatalf("QueryRuns(%+v): %d runs, next %v; want at most %d, and a full page before a next", q, len(runs), next, q.PageSize())
			}
			got = append(got, runs...)
			if next.IsZero() || page > len(all) {
				break
			}
			q.After = next
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("QueryRuns(%+v), every page (-want +got):\n%s", q, diff)
		}
	}
	// A deleted job's runs are gone from the history.
	if err := s.Delete(ctx, "job-every"); err != nil {
		t.Fatal(err)
	}
	runs, _, err := qr.QueryRuns(ctx, cron.RunQuery{JobIDs: []string{"job-every"}})
	if err != nil || len(runs) != 0 {
		t.Errorf("QueryRuns of a deleted job = %d runs, %v; want none", len(runs), err)
	}
}

func cronCaseRunByID(t *testing.T, s cron.Store) {
	rs := cronRunStore(t, s)
	g := rs
	ctx := context.Background()
	cronSave(t, s, cronJobs()...)
	check := func(when string, runs []cron.Run) {
		t.Helper()
		for _, want := range runs {
			got, err := g.RunByID(ctx, want.ID)
			if err != nil {
				t.Errorf("%s: RunByID(%q): %v", when, want.ID, err)
				continue
			}
			want.Instance = got.Instance // the store's to set
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: RunByID(%q) (-want +got):\n%s", when, want.ID, diff)
			}
		}
	}
	var runs []cron.Run
	for i := range 3 {
		for _, id := range []string{"job-every", "job-cron"} {
			r := cronRun(id, i)
			if i == 1 {
				r.Status, r.Reason, r.Slots, r.Attempts, r.HTTPStatus, r.Error, r.Trigger = cron.StatusMissed, cron.ReasonDowntime, 4, 0, 0, "", ""
			}
			if i == 2 { // retried: each attempt is kept
				r.Attempts = 2
				r.AttemptLog = []cron.Attempt{
					{StartedAt: r.TriggeredAt, Duration: cron.Duration(1500 * time.Millisecond), Status: cron.StatusFailed, HTTPStatus: 503, Error: "http 503; reply: busy"},
					{StartedAt: r.TriggeredAt.Add(3 * time.Second), Duration: cron.Duration(time.Millisecond), Status: r.Status, HTTPStatus: r.HTTPStatus, Error: r.Error},
				}
			}
			if err := rs.AppendRun(ctx, r); err != nil {
				t.Fatalf("AppendRun: %v", err)
			}
			runs = append(runs, r)
		}
	}
	check("before a flush", runs)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	check("after a flush", runs)
	if _, err := g.RunByID(ctx, "no-such-run"); !errors.Is(err, cron.ErrNotFound) {
		t.Errorf("RunByID of an unknown id: %v, want ErrNotFound", err)
	}
}
