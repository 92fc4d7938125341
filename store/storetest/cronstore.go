package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/cron"
)

// TestCronStore runs the conformance suite of [cron.Store] against the stores
// that open returns: each subtest opens a fresh, empty store. It checks
// creation order (a replaced job keeps its place), Delete and ErrNotFound,
// Record, the round trip of every field of a job (times to the microsecond
// and durations included), and, when the store implements it,
// [cron.RunStore]: newest-first history, the limit argument, a per-job
// limit that drops the oldest runs, and ErrNotFound for unknown jobs;
// the history across jobs ([cron.RunStore.QueryRuns]): every
// filter, the order (scheduled_at then run id, newest first, ties
// included), pages that cover every run once, a cursor of a run gone, and
// the reason and slots of a run; a run by its id ([cron.RunStore.RunByID]), of any job, before and after a flush, and ErrNotFound
// for an unknown id; when it implements [cron.PauseStore],
// the round trip of the service pause; when it implements
// [cron.AuditLog], IDs in order, the filters and keyset paging; when it
// implements [cron.IdempotencyStore], that the first reservation of a key
// wins (of concurrent ones too) and later ones get its entry, keys per
// job, Complete and Forget of one reservation only, and the window;
// when it implements [cron.AlertOutbox], the round trip of an alert,
// that each due alert is taken once (by concurrent takers too) and again
// once its lease is over, settling (delivered, retried, dead) and the
// listing of the pending and the dead.
// Persistence across a reopen is the adapter's own test.
func TestCronStore(t *testing.T, open func(t *testing.T) cron.Store) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(t *testing.T, s cron.Store)
	}{
		{"Empty", cronCaseEmpty},
		{"RoundTrip", cronCaseRoundTrip},
		{"CreationOrder", cronCaseCreationOrder},
		{"Delete", cronCaseDelete},
		{"Record", cronCaseRecord},
		{"Concurrent", cronCaseConcurrent},
		{"Runs", cronCaseRuns},
		{"RunLimit", cronCaseRunLimit},
		{"KeepRuns", cronCaseKeepRuns},
		{"QueryRuns", cronCaseQueryRuns},
		{"RunByID", cronCaseRunByID},
		{"Pause", cronCasePause},
		{"Audit", cronCaseAudit},
		{"Idempotency", cronCaseIdempotency},
		{"AlertOutbox", cronCaseAlertOutbox},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open(t)) })
	}
}

// cronTime is a time with microseconds, in UTC.
var cronTime = time.Date(2031, 5, 6, 7, 8, 9, 123456000, time.UTC)

// cronJobs returns one job of each kind with every field set.
func cronJobs() []cron.Job {
	return []cron.Job{
		{
			ID: "job-every", Name: "ping service", Type: cron.JobTypeHTTP,
			HTTP: cron.HTTPConfig{Method: "POST", URL: "https://example.com/ping",
				Headers: map[string]string{"X-Token": "abc", "Content-Type": "application/json"}, Body: `{"run":"{{run_id}}"}`},
			Schedule: cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(5 * time.Minute),
				StartAt: cronTime, Jitter: cron.Duration(1500 * time.Millisecond)},
			Timeout: cron.Duration(10 * time.Second), MaxRetries: 3, RetryBackoff: cron.Duration(5 * time.Second),
			MisfireGrace: cron.Duration(90 * time.Second),
			LastRunAt:    cronTime.Add(-time.Hour), NextRunAt: cronTime.Add(time.Hour),
			LastStatus: cron.StatusTimeout, LastError: "timeout after 10s",
			Alert:    &cron.AlertConfig{URL: "https://hooks.example.com/ksana", Secret: "s3cret", After: 2, PauseAfter: 5, Notify: "failure"},
			Failures: 2, LastAlert: cron.AlertFailingStreak,
		},
		{
			ID: "job-once", Name: "notify", Paused: true, PausedUntil: cronTime.Add(2 * time.Hour), PausedAt: cronTime.Add(-30 * time.Minute),
			Type:     cron.JobTypeHTTP,
			HTTP:     cron.HTTPConfig{Method: "GET", URL: "http://localhost:8080/x"},
			Schedule: cron.ScheduleSpec{Kind: cron.KindOnce, RunAt: cronTime.Add(24 * time.Hour)},
			Timeout:  cron.Duration(time.Second), RetryBackoff: cron.Duration(time.Second),
			LastStatus: cron.StatusPaused,
		},
		{
			ID: "job-cron", Name: "report", Type: cron.JobTypeHTTP,
			HTTP:     cron.HTTPConfig{Method: "PUT", URL: "https://example.com/report"},
			Schedule: cron.ScheduleSpec{Kind: cron.KindCron, Cron: "0 30 9 * * MON-FRI", TZ: "Europe/Berlin"},
			Timeout:  cron.Duration(30 * time.Second), MaxRetries: 1, RetryBackoff: cron.Duration(250 * time.Millisecond),
			NextRunAt: cronTime, KeepRuns: 120,
		},
	}
}

func cronLoad(t *testing.T, s cron.Store) []cron.Job {
	t.Helper()
	got, err := s.Load(context.Background())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return got
}

func cronIDs(js []cron.Job) []string {
	ids := make([]string, 0, len(js))
	for _, j := range js {
		ids = append(ids, j.ID)
	}
	return ids
}

func cronSave(t *testing.T, s cron.Store, js ...cron.Job) {
	t.Helper()
	for _, j := range js {
		if err := s.Save(context.Background(), j); err != nil {
			t.Fatalf("Save(%s): %v", j.ID, err)
		}
	}
}

func cronCaseEmpty(t *testing.T, s cron.Store) {
	if got := cronLoad(t, s); len(got) != 0 {
		t.Errorf("Load of a new store = %v, want no jobs", cronIDs(got))
	}
}

func cronCaseRoundTrip(t *testing.T, s cron.Store) {
	want := cronJobs()
	cronSave(t, s, want...)
	if diff := cmp.Diff(want, cronLoad(t, s)); diff != "" {
		t.Errorf("Load after Save (-want +got):\n%s", diff)
	}
}

func cronCaseCreationOrder(t *testing.T, s cron.Store) {
	js := cronJobs()
	cronSave(t, s, js...)
	// Replacing the first job keeps its place.
	repl := js[0]
	repl.Name, repl.HTTP.URL, repl.Paused = "renamed", "https://example.org/other", true
	cronSave(t, s, repl)
	extra := js[1]
	extra.ID = "job-new"
	cronSave(t, s, extra)
	got := cronLoad(t, s)
	if diff := cmp.Diff([]string{"job-every", "job-once", "job-cron", "job-new"}, cronIDs(got)); diff != "" {
		t.Fatalf("creation order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(repl, got[0]); diff != "" {
		t.Errorf("replaced job (-want +got):\n%s", diff)
	}
}

func cronCaseDelete(t *testing.T, s cron.Store) {
	ctx := context.Background()
	cronSave(t, s, cronJobs()...)
	if err := s.Delete(ctx, "job-once"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if diff := cmp.Diff([]string{"job-every", "job-cron"}, cronIDs(cronLoad(t, s))); diff != "" {
		t.Errorf("after Delete (-want +got):\n%s", diff)
	}
	if err := s.Delete(ctx, "job-once"); !errors.Is(err, cron.ErrNotFound) {
		t.Errorf("Delete(deleted id) error = %v, want cron.ErrNotFound", err)
	}
	if err := s.Delete(ctx, "nope"); !errors.Is(err, cron.ErrNotFound) {
		t.Errorf("Delete(unknown id) error = %v, want cron.ErrNotFound", err)
	}
	// A new job with a deleted id goes last.
	j := cronJobs()[1]
	cronSave(t, s, j)
	if diff := cmp.Diff([]string{"job-every", "job-cron", "job-once"}, cronIDs(cronLoad(t, s))); diff != "" {
		t.Errorf("after re-adding (-want +got):\n%s", diff)
	}
}

func cronCaseRecord(t *testing.T, s cron.Store) {
	ctx := context.Background()
	js := cronJobs()
	cronSave(t, s, js...)
	tests := []struct {
		id string
		b  cron.Bookkeeping
	}{
		{"job-every", cron.Bookkeeping{LastRunAt: cronTime.Add(time.Minute), NextRunAt: cronTime.Add(6 * time.Minute), LastStatus: cron.StatusSuccess}},
		{"job-once", cron.Bookkeeping{LastStatus: cron.StatusMissed}},
		{"job-cron", cron.Bookkeeping{LastRunAt: cronTime, NextRunAt: cronTime.Add(24 * time.Hour), LastStatus: cron.StatusFailed, LastError: "http 500: boom",
			Failures: 1, LastAlert: cron.AlertFailing}},
		{"job-cron", cron.Bookkeeping{LastRunAt: cronTime.Add(time.Second), NextRunAt: cronTime.Add(24 * time.Hour), LastStatus: cron.StatusSkipped, LastError: "previous run still in flight"}},
	}
	want := map[string]cron.Job{}
	for _, j := range js {
		want[j.ID] = j
	}
	for _, tt := range tests {
		if err := s.Record(ctx, tt.id, tt.b); err != nil {
			t.Fatalf("Record(%s): %v", tt.id, err)
		}
		j := want[tt.id]
		tt.b.Apply(&j)
		want[tt.id] = j
	}
	for _, got := range cronLoad(t, s) {
		if diff := cmp.Diff(want[got.ID], got); diff != "" {
			t.Errorf("job %s after Record (-want +got):\n%s", got.ID, diff)
		}
	}
	if err := s.Record(ctx, "nope", cron.Bookkeeping{LastStatus: cron.StatusSuccess}); !errors.Is(err, cron.ErrNotFound) {
		t.Errorf("Record(unknown id) error = %v, want cron.ErrNotFound", err)
	}
	if got := cronLoad(t, s); len(got) != len(js) {
		t.Errorf("Record of an unknown id created a job: %v", cronIDs(got))
	}
}

func cronCaseConcurrent(t *testing.T, s cron.Store) {
	ctx := context.Background()
	base := cronJobs()[0]
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 10 {
				j := base
				j.ID = fmt.Sprintf("c%d-%d", g, i)
				if err := s.Save(ctx, j); err != nil {
					t.Errorf("Save: %v", err)
					return
				}
				b := cron.Bookkeeping{LastRunAt: cronTime.Add(time.Duration(i) * time.Second), LastStatus: cron.StatusSuccess}
				if err := s.Record(ctx, j.ID, b); err != nil {
					t.Errorf("Record: %v", err)
				}
				if i%3 == 0 {
					if err := s.Delete(ctx, j.ID); err != nil {
						t.Errorf("Delete: %v", err)
					}
				}
			}
		})
	}
	wg.Wait()
	got := cronLoad(t, s)
	if len(got) != 4*6 {
		t.Errorf("jobs after concurrent writes: %d, want %d", len(got), 4*6)
	}
	for _, j := range got {
		if j.LastStatus != cron.StatusSuccess {
			t.Errorf("job %s: status %q, want success", j.ID, j.LastStatus)
		}
	}
}

func cronRunStore(t *testing.T, s cron.Store) cron.RunStore {
	rs, ok := s.(cron.RunStore)
	if !ok {
		t.Skip("the store keeps no run history (no cron.RunStore)")
	}
	return rs
}

func cronRun(job string, i int) cron.Run {
	at := cronTime.Add(time.Duration(i) * time.Minute)
	return cron.Run{ID: fmt.Sprintf("%s-run-%03d", job, i), JobID: job, ScheduledAt: at, TriggeredAt: at.Add(1500 * time.Microsecond),
		FinishedAt: at.Add(time.Second), Status: cron.StatusFailed, Attempts: 2, HTTPStatus: 503, Error: "http 503",
		Latency: cron.Duration(998500 * time.Microsecond), Alert: []string{"", cron.AlertFailing}[i%2],
		Trigger: []string{cron.TriggerRunNow, cron.TriggerSchedule, cron.TriggerSchedule}[i%3], TriggeredBy: []string{"alice", "", ""}[i%3]}
}

func cronCaseRuns(t *testing.T, s cron.Store) {
	rs := cronRunStore(t, s)
	ctx := context.Background()
	cronSave(t, s, cronJobs()...)
	if got, err := rs.Runs(ctx, "job-every", 10); err != nil || len(got) != 0 {
		t.Errorf("Runs of a job without runs = %v, %v; want none", got, err)
	}
	var all []cron.Run
	for i := range 3 {
		r := cronRun("job-every", i)
		all = append(all, r)
		if err := rs.AppendRun(ctx, r); err != nil {
			t.Fatalf("AppendRun: %v", err)
		}
	}
	ok := cronRun("job-once", 0)
	ok.Status, ok.HTTPStatus, ok.Error, ok.Attempts = cron.StatusSuccess, 200, "", 1
	if err := rs.AppendRun(ctx, ok); err != nil {
		t.Fatalf("AppendRun: %v", err)
	}
	tests := []struct {
		id    string
		limit int
		want  []cron.Run
	}{
		{"job-every", 10, []cron.Run{all[2], all[1], all[0]}},
		{"job-every", 0, []cron.Run{all[2], all[1], all[0]}},
		{"job-every", 2, []cron.Run{all[2], all[1]}},
		{"job-once", 5, []cron.Run{ok}},
	}
	for _, tt := range tests {
		got, err := rs.Runs(ctx, tt.id, tt.limit)
		if err != nil {
			t.Fatalf("Runs(%s, %d): %v", tt.id, tt.limit, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Runs(%s, %d) (-want +got):\n%s", tt.id, tt.limit, diff)
		}
	}
	if _, err := rs.Runs(ctx, "nope", 10); !errors.Is(err, cron.ErrNotFound) {
		t.Errorf("Runs(unknown id) error = %v, want cron.ErrNotFound", err)
	}
	if err := rs.AppendRun(ctx, cronRun("nope", 0)); !errors.Is(err, cron.ErrNotFound) {
		t.Errorf("AppendRun(unknown job) error = %v, want cron.ErrNotFound", err)
	}
	// Deleting a job drops its history.
	if err := s.Delete(ctx, "job-every"); err != nil {
		t.Fatal(err)
	}
	cronSave(t, s, cronJobs()[0])
	if got, err := rs.Runs(ctx, "job-every", 10); err != nil || len(got) != 0 {
		t.Errorf("Runs of a re-created job = %d runs, %v; want none", len(got), err)
	}
}

// cronCaseKeepRuns: a job's KeepRuns bounds its history in place of the
// store's number, also when it is raised or lowered later; a job without
// one keeps the store's number.
func cronCaseKeepRuns(t *testing.T, s cron.Store) {
	rs := cronRunStore(t, s)
	ctx := context.Background()
	jobs := cronJobs()
	jobs[0].KeepRuns = 3
	cronSave(t, s, jobs...)
	appendRuns := func(from, to int, ids ...string) {
		t.Helper()
		for i := from; i <= to; i++ {
			for _, id := range ids {
				if err := rs.AppendRun(ctx, cronRun(id, i)); err != nil {
					t.Fatalf("AppendRun: %v", err)
				}
			}
		}
	}
	check := func(what string, newest, n int) {
		t.Helper()
		var want []string
		for i := newest; i > newest-n; i-- {
			want = append(want, cronRun("job-every", i).ID)
		}
		for _, limit := range []int{0, 1000} {
			got, err := rs.Runs(ctx, "job-every", limit)
			if err != nil {
				t.Fatalf("Runs: %v", err)
			}
			var ids []string
			for _, r := range got {
				ids = append(ids, r.ID)
			}
			if diff := cmp.Diff(want, ids); diff != "" {
				t.Errorf("%s: Runs(limit %d) (-want +got):\n%s", what, limit, diff)
			}
		}
	}
	appendRuns(0, 9, "job-every", "job-once")
	check("keep_runs 3", 9, 3)
	if other, err := rs.Runs(ctx, "job-once", 0); err != nil || len(other) == 0 || other[0].ID != cronRun("job-once", 9).ID {
		t.Errorf("a job without keep_runs: %d runs, %v; want its newest first", len(other), err)
	}
	jobs[0].KeepRuns = 5
	cronSave(t, s, jobs[0])
	appendRuns(10, 12, "job-every")
	check("keep_runs raised to 5", 12, 5)
	jobs[0].KeepRuns = 2
	cronSave(t, s, jobs[0])
	appendRuns(13, 13, "job-every")
	check("keep_runs lowered to 2", 13, 2)
}

func cronCaseRunLimit(t *testing.T, s cron.Store) {
	rs := cronRunStore(t, s)
	ctx := context.Background()
	cronSave(t, s, cronJobs()...)
	const n = 300
	for i := range n {
		if err := rs.AppendRun(ctx, cronRun("job-every", i)); err != nil {
			t.Fatalf("AppendRun: %v", err)
		}
	}
	if err := rs.AppendRun(ctx, cronRun("job-cron", 0)); err != nil {
		t.Fatalf("AppendRun: %v", err)
	}
	got, err := rs.Runs(ctx, "job-every", 0)
	if err != nil {
		t.Fatalf("Runs: %v", err)
	}
	if len(got) == 0 || len(got) >= n {
		t.Fatalf("kept %d of %d runs, want a per-job limit in [1, %d)", len(got), n, n)
	}
	// The kept runs are the newest ones, newest first.
	var want []cron.Run
	for i := n - 1; i >= n-len(got); i-- {
		want = append(want, cronRun("job-every", i))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kept runs (-want +got):\n%s", diff)
	}
	if other, err := rs.Runs(ctx, "job-cron", 0); err != nil || len(other) != 1 {
		t.Errorf("another job's history = %d runs, %v; want its 1 run", len(other), err)
	}
}
