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
		if _, err := r.Pause(ctx, "e", time.Time{}); err != nil {
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
		want, _ := RunQuery{JobIDs: q.JobIDs, Statuses: q.Statuses, Since: q.Since, Until: q.Until, Limit: MaxRunQueryLimit}.Page(all)
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
			err = q.After.UnmarshalText([]byte(next.String()))
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
		if err := new(RunCursor).UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("UnmarshalText(%q) = nil error", bad)
		}
	}
}

// TestPauseRecordedAcrossRestart: the job keeps when it was paused
// (paused_at, in the store), so that a resume by a runner started again
// over the same store records the slots passed while it was paused: by
// hand, and by the pause timer at paused_until.
func TestPauseRecordedAcrossRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		t0 := time.Now()
		st := NewMemStore()
		r1 := newTestRunner(t, st, &fakeExec{}, Config{})
		mustAdd(t, r1, httpJob("e", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute), StartAt: t0.Add(time.Minute)}))
		stop := start(t, r1)
		time.Sleep(90 * time.Second)
		p, err := r1.Pause(ctx, "e", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if !p.PausedAt.Equal(t0.Add(90 * time.Second)) {
			t.Errorf("paused job: paused_at %v, want %v", p.PausedAt, t0.Add(90*time.Second))
		}
		if stored, _ := st.Load(ctx); !stored[0].PausedAt.Equal(t0.Add(90 * time.Second)) {
			t.Errorf("stored paused_at %v, want %v", stored[0].PausedAt, t0.Add(90*time.Second))
		}
		_ = stop()
		time.Sleep(10 * time.Minute) // slots 2m..11m pass while paused
		r2 := newTestRunner(t, st, &fakeExec{}, Config{})
		stop = start(t, r2)
		synctest.Wait()
		j, err := r2.Resume(ctx, "e")
		if err != nil {
			t.Fatal(err)
		}
		if !j.PausedAt.IsZero() {
			t.Errorf("resumed job: paused_at %v, want none", j.PausedAt)
		}
		if stored, _ := st.Load(ctx); !stored[0].PausedAt.IsZero() {
			t.Errorf("stored paused_at after the resume: %v, want none", stored[0].PausedAt)
		}
		synctest.Wait()

		// A timed pause set before a restart, ended by the pause timer of
		// the next runner.
		time.Sleep(time.Minute) // t0+12m30s: the slot of 12m runs
		if _, err := r2.Pause(ctx, "e", time.Now().Add(5*time.Minute)); err != nil {
			t.Fatal(err)
		}
		_ = stop()
		r3 := newTestRunner(t, st, &fakeExec{}, Config{})
		stop = start(t, r3)
		time.Sleep(6 * time.Minute) // resumed at t0+17m30s: slots 13m..17m passed
		synctest.Wait()
		if j := mustGet(t, r3, "e"); j.Paused || !j.PausedAt.IsZero() {
			t.Errorf("after paused_until: paused %v paused_at %v, want resumed", j.Paused, j.PausedAt)
		}
		_ = stop()
		want := []Run{
			{JobID: "e", ScheduledAt: t0.Add(13 * time.Minute), Status: StatusSkipped, Reason: ReasonPaused, Slots: 5},
			{JobID: "e", ScheduledAt: t0.Add(2 * time.Minute), Status: StatusSkipped, Reason: ReasonPaused, Slots: 10},
		}
		if diff := cmp.Diff(want, notCalledRuns(t, r3), ignoreRunTimes); diff != "" {
			t.Errorf("not-called runs (-want +got):\n%s", diff)
		}
	})
}

// TestPausedAtSystemField: paused_at is the runner's: a pause again with
// a new paused_until keeps the first one, an update of a paused job keeps
// it whatever the change sets, an update that disables the job sets it
// and one that enables it records the pause and clears it; Add stores
// none, and Prepare clears it on a job that runs.
func TestPausedAtSystemField(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		t0 := time.Now()
		st := NewMemStore()
		r := newTestRunner(t, st, &fakeExec{}, Config{})
		add := httpJob("e", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute), StartAt: t0.Add(time.Minute)})
		add.PausedAt = t0.Add(-time.Hour)
		if j := mustAdd(t, r, add); !j.PausedAt.IsZero() {
			t.Errorf("Add kept paused_at %v of a running job", j.PausedAt)
		}
		add2 := httpJob("p", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute), StartAt: t0.Add(time.Minute)})
		add2.Paused, add2.PausedAt = true, t0.Add(-time.Hour)
		if j := mustAdd(t, r, add2); !j.PausedAt.IsZero() {
			t.Errorf("Add kept paused_at %v of a paused job", j.PausedAt)
		}
		stop := start(t, r)
		defer stop()
		time.Sleep(90 * time.Second)
		if _, err := r.Pause(ctx, "e", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		j, err := r.Pause(ctx, "e", time.Now().Add(2*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if !j.PausedAt.Equal(t0.Add(90 * time.Second)) {
			t.Errorf("paused again: paused_at %v, want the first %v", j.PausedAt, t0.Add(90*time.Second))
		}
		j, err = r.Update(ctx, "e", func(j *Job) error {
			j.Name, j.PausedAt = "renamed", time.Now().Add(time.Minute)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !j.PausedAt.Equal(t0.Add(90 * time.Second)) {
			t.Errorf("updated while paused: paused_at %v, want %v", j.PausedAt, t0.Add(90*time.Second))
		}
		time.Sleep(2 * time.Minute) // t0+4m30s: slots 2m..4m passed
		j, err = r.Update(ctx, "e", func(j *Job) error { j.Paused = false; return nil })
		if err != nil {
			t.Fatal(err)
		}
		if j.Paused || !j.PausedAt.IsZero() {
			t.Errorf("enabled by an update: paused %v paused_at %v", j.Paused, j.PausedAt)
		}
		time.Sleep(time.Minute) // the slot of 5m runs
		j, err = r.Update(ctx, "e", func(j *Job) error { j.Paused = true; return nil })
		if err != nil {
			t.Fatal(err)
		}
		if !j.PausedAt.Equal(t0.Add(330 * time.Second)) {
			t.Errorf("disabled by an update: paused_at %v, want %v", j.PausedAt, t0.Add(330*time.Second))
		}
		time.Sleep(time.Minute) // the slot of 6m passes
		if _, err := r.Resume(ctx, "e"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		want := []Run{
			{JobID: "e", ScheduledAt: t0.Add(6 * time.Minute), Status: StatusSkipped, Reason: ReasonPaused},
			{JobID: "e", ScheduledAt: t0.Add(2 * time.Minute), Status: StatusSkipped, Reason: ReasonPaused, Slots: 3},
		}
		if diff := cmp.Diff(want, notCalledRuns(t, r), ignoreRunTimes); diff != "" {
			t.Errorf("not-called runs (-want +got):\n%s", diff)
		}

		run := Job{ID: "x", HTTP: HTTPConfig{URL: "http://callback.test/hook"}, Schedule: ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute)},
			PausedAt: t0}
		if _, err := run.Prepare(t0, Rules{}); err != nil || !run.PausedAt.IsZero() {
			t.Errorf("Prepare of a running job: paused_at %v, err %v; want none", run.PausedAt, err)
		}
		paused := run
		paused.Paused, paused.PausedAt = true, t0.In(time.FixedZone("x", 3600))
		if _, err := paused.Prepare(t0, Rules{}); err != nil || !paused.PausedAt.Equal(t0) || paused.PausedAt.Location() != time.UTC {
			t.Errorf("Prepare of a paused job: paused_at %v, err %v; want %v in UTC", paused.PausedAt, err, t0)
		}
	})
}

// TestServicePauseAcrossRestart: the slots that pass while the service is
// paused are skipped, reason service paused, also those held back before
// a restart and those that pass while the runner is down during the
// pause; only the slots after the pause's end run. Every slot is there
// exactly once: the skipped records' slots add up to the slots passed.
func TestServicePauseAcrossRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		t0 := time.Now()
		st := NewMemStore()
		ex := &fakeExec{}
		r1 := newTestRunner(t, st, ex, Config{})
		mustAdd(t, r1, httpJob("e", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute), StartAt: t0.Add(time.Minute)}))
		stop := start(t, r1)
		time.Sleep(90 * time.Second) // the slot of 1m runs
		if _, err := r1.PauseAll(ctx, time.Time{}, "maintenance"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Minute) // slots 2m..6m held back by the pause
		synctest.Wait()
		_ = stop()
		time.Sleep(10 * time.Minute) // down, still paused: slots 7m..16m
		r2 := newTestRunner(t, st, ex, Config{})
		stop = start(t, r2)
		time.Sleep(3 * time.Minute) // paused again on r2: 17m..19m
		if _, err := r2.ResumeAll(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute) // 20m runs
		synctest.Wait()
		_ = stop()
		got := notCalledRuns(t, r2)
		total := 0
		for _, run := range got {
			if run.Status != StatusSkipped || run.Reason != ReasonServicePaused {
				t.Errorf("run %+v: want status skipped, reason %q", run, ReasonServicePaused)
			}
			total += max(run.Slots, 1)
		}
		if total != 18 {
			t.Errorf("skipped records stand for %d slots, want 18 (2m..19m): %+v", total, got)
		}
		if n := len(ex.runs()); n != 2 {
			t.Errorf("%d calls, want 2 (the slots of 1m and 20m)", n)
		}
	})
}
