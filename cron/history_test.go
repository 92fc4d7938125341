package cron

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var ignoreRunTimes = cmpopts.IgnoreFields(Run{}, "ID", "TriggeredAt", "FinishedAt")

func notCalledRuns(t *testing.T, r *Runner) []Run {
	t.Helper()
	runs, _, err := r.QueryRuns(context.Background(), RunQuery{Statuses: []Status{StatusSkipped, StatusMissed}})
	if err != nil {
		t.Fatalf("QueryRuns: %v", err)
	}
	return runs
}

// TestDowntimeOneRecord: the slots of an every job that passed while no
// runner ran are one missed record, reason downtime, with their count.
func TestDowntimeOneRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		st := NewMemStore()
		r1 := newTestRunner(t, st, &fakeExec{}, Config{})
		mustAdd(t, r1, httpJob("e", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute), StartAt: t0.Add(time.Minute)}))
		stop := start(t, r1)
		time.Sleep(90 * time.Second) // the slot of 1m runs
		synctest.Wait()
		_ = stop()
		time.Sleep(time.Hour) // down from 1m30s to 61m30s: slots 2m..61m pass
		r2 := newTestRunner(t, st, &fakeExec{}, Config{})
		stop = start(t, r2)
		synctest.Wait()
		_ = stop()
		want := []Run{{JobID: "e", ScheduledAt: t0.Add(2 * time.Minute), Status: StatusMissed, Reason: ReasonDowntime, Slots: 60}}
		if diff := cmp.Diff(want, notCalledRuns(t, r2), ignoreRunTimes); diff != "" {
			t.Errorf("not-called runs (-want +got):\n%s", diff)
		}
	})
}

// TestPauseOneRecord: the slots that passed while a job was paused are
// one skipped record, reason paused, written when it is resumed.
func TestPauseOneRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		t0 := time.Now()
		r := newTestRunner(t, nil, &fakeExec{}, Config{})
		mustAdd(t, r, httpJob("e", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute), StartAt: t0.Add(time.Minute)}))
		stop := start(t, r)
		defer stop()
		time.Sleep(90 * time.Second)
		if _, err := r.Pause(ctx, "e"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Minute) // slots 2m..11m pass
		if _, err := r.Resume(ctx, "e"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		want := []Run{
			{JobID: "e", ScheduledAt: t0.Add(2 * time.Minute), Status: StatusSkipped, Reason: ReasonPaused, Slots: 10},
		}
		if diff := cmp.Diff(want, notCalledRuns(t, r), ignoreRunTimes); diff != "" {
			t.Errorf("not-called runs (-want +got):\n%s", diff)
		}
	})
}

// TestQueryRunsPaging: every run once across the pages, newest first,
// filters applied; a bad query names its field.
func TestQueryRunsPaging(t *testing.T) {
	st := NewMemStore()
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var all []Run
	for _, id := range []string{"a", "b"} {
		if err := st.Save(ctx, httpJob(id, ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute)})); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			r := Run{ID: id + string(rune('a'+i)), JobID: id, ScheduledAt: t0.Add(time.Duration(i/2) * time.Minute), Status: StatusSuccess}
			if i%3 == 0 {
				r.Status = StatusFailed
			}
			all = append(all, r)
			if err := st.AppendRun(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, q := range []RunQuery{{Limit: 7}, {Limit: 3, JobIDs: []string{"b"}}, {Limit: 4, Statuses: []Status{StatusFailed}},
		{Limit: 5, Since: t0.Add(2 * time.Minute), Until: t0.Add(6 * time.Minute)}} {
		want, _ := PageRuns(all, RunQuery{JobIDs: q.JobIDs, Statuses: q.Statuses, Since: q.Since, Until: q.Until, Limit: MaxRunQueryLimit})
		var got []Run
		for page := 0; ; page++ {
			runs, next, err := st.QueryRuns(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, runs...)
			if next.IsZero() {
				break
			}
			if len(runs) != q.Limit || page > 50 {
				t.Fatalf("a page of %d runs with a next cursor, want %d", len(runs), q.Limit)
			}
			q.After, err = ParseRunCursor(next.String())
			if err != nil {
				t.Fatal(err)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("query %+v (-want +got):\n%s", q, diff)
		}
	}
	r := newTestRunner(t, st, &fakeExec{}, Config{})
	for _, c := range []struct {
		q     RunQuery
		field string
	}{{RunQuery{Limit: -1}, "limit"}, {RunQuery{Limit: MaxRunQueryLimit + 1}, "limit"}, {RunQuery{Statuses: []Status{"paused"}}, "status"},
		{RunQuery{Since: t0, Until: t0}, "since"}, {RunQuery{JobIDs: []string{""}}, "job"}} {
		_, _, err := r.QueryRuns(ctx, c.q)
		if ve, ok := err.(*ValidationError); !ok || ve.Field != c.field {
			t.Errorf("QueryRuns(%+v) error %v, want a ValidationError of %q", c.q, err, c.field)
		}
	}
	for _, bad := range []string{"x", "1.", ".a", "a.b"} {
		if _, err := ParseRunCursor(bad); err == nil {
			t.Errorf("ParseRunCursor(%q) = nil error", bad)
		}
	}
}
