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

// TestSharedStore runs the conformance suite of [cron.SharedStore]
// against the stores that open returns: each subtest opens a fresh, empty
// store shared by two runners (two processes on one database), a and b,
// each owning every job. It checks versions (a write raises them, a
// create of an id the other stored is ErrExists, a write at a version
// another write passed is ErrConflict and changes nothing, also after
// the job was deleted and created again), the version check of
// RecordBatch (the bookkeeping of an older version is refused, the
// last-run fields of an older run are kept, LastOnly keeps next_run_at),
// claims (one winner per slot across the two, a run-now by its id, a
// batch answering each slot), the completion of claimed runs, the pages
// and counts of every job, LoadHeld with versions, and LastSlots (the
// latest row of a slot of each job, claimed or recorded, not a run-now).
func TestSharedStore(t *testing.T, open func(t *testing.T) (a, b cron.SharedStore)) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(t *testing.T, a, b cron.SharedStore)
	}{
		{"Versions", sharedCaseVersions},
		{"RecordOrder", sharedCaseRecordOrder},
		{"Claims", sharedCaseClaims},
		{"PageAndCount", sharedCasePageAndCount},
		{"LoadHeld", sharedCaseLoadHeld},
		{"LastSlots", sharedCaseLastSlots},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := open(t)
			c.fn(t, a, b)
		})
	}
}

// sharedWrite writes j at version (0: create; negative: at any
// version) and returns its new version.
func sharedWrite(t *testing.T, s cron.SharedStore, j cron.Job, version int64) int64 {
	t.Helper()
	v, err := s.Write(context.Background(), j, version)
	if err != nil {
		t.Fatalf("Write(%s, version %d): %v", j.ID, version, err)
	}
	return v
}

func sharedRead(t *testing.T, s cron.SharedStore, id string) (cron.Job, int64) {
	t.Helper()
	j, v, err := s.Read(context.Background(), id)
	if err != nil {
		t.Fatalf("Read(%s): %v", id, err)
	}
	return j, v
}

func sharedCaseVersions(t *testing.T, a, b cron.SharedStore) {
	ctx := context.Background()
	j := cronJobs()[0]
	v1 := sharedWrite(t, a, j, 0)
	if _, err := b.Write(ctx, j, 0); !errors.Is(err, cron.ErrExists) {
		t.Errorf("create through b of an id a stored: %v, want ErrExists", err)
	}
	if _, _, err := b.Read(ctx, "nope"); !errors.Is(err, cron.ErrNotFound) {
		t.Errorf("Read of an unknown id: %v, want ErrNotFound", err)
	}
	got, v := sharedRead(t, b, j.ID)
	if v != v1 {
		t.Errorf("Read through b: version %d, want %d (Write's)", v, v1)
	}
	if diff := cmp.Diff(j, got); diff != "" {
		t.Errorf("Read through b (-want +got):\n%s", diff)
	}
	j.Name = "renamed"
	v2 := sharedWrite(t, b, j, -1)
	if v2 <= v1 {
		t.Errorf("version after a replace = %d, want more than %d", v2, v1)
	}
	if _, v := sharedRead(t, a, j.ID); v != v2 {
		t.Errorf("Read through a after b's write: version %d, want %d", v, v2)
	}
	// Compare and set: a write at the version read lands; a second one
	// from that same version is a conflict and changes nothing.
	j.Name = "by a"
	v3 := sharedWrite(t, a, j, v2)
	if v3 <= v2 {
		t.Errorf("version after a write at version %d = %d, want more", v2, v3)
	}
	late := j
	late.Name = "by b, from the version before a's"
	if _, err := b.Write(ctx, late, v2); !errors.Is(err, cron.ErrConflict) {
		t.Errorf("write through b at version %d after a wrote version %d: %v, want ErrConflict", v2, v3, err)
	}
	if got, v := sharedRead(t, b, j.ID); got.Name != "by a" || v != v3 {
		t.Errorf("after a refused write: name %q, version %d; want a's write, %q at %d", got.Name, v, "by a", v3)
	}
	// A job deleted and created again takes up no version of the one
	// before: a write made from a read of that one is a conflict.
	if err := a.Delete(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	again := sharedWrite(t, b, j, 0)
	if _, err := a.Write(ctx, late, v1); again == v1 || !errors.Is(err, cron.ErrConflict) {
		t.Errorf("write at version %d (the first of the job deleted) after it was created again at version %d: %v, want ErrConflict", v1, again, err)
	}
	gone := cronJobs()[1]
	if _, err := a.Write(ctx, gone, 7); !errors.Is(err, cron.ErrNotFound) {
		t.Errorf("write at version 7 of an id never stored: %v, want ErrNotFound", err)
	}
	if _, _, err := a.Read(ctx, gone.ID); !errors.Is(err, cron.ErrNotFound) {
		t.Errorf("a write at a version must not add the job: Read gives %v", err)
	}
}

func sharedCaseRecordOrder(t *testing.T, a, b cron.SharedStore) {
	ctx := context.Background()
	j := cronJobs()[0]
	j.LastRunAt, j.NextRunAt, j.LastStatus, j.LastError = time.Time{}, cronTime, "", ""
	v1 := sharedWrite(t, a, j, 0)
	run1 := cron.Bookkeeping{LastRunAt: cronTime, NextRunAt: cronTime.Add(5 * time.Minute), LastStatus: cron.StatusSuccess}
	// The pause, acknowledged, through b.
	paused := j
	paused.Paused, paused.NextRunAt, paused.LastStatus = true, time.Time{}, cron.StatusPaused
	v2 := sharedWrite(t, b, paused, -1)
	// a's bookkeeping of a run that ended before the pause: refused.
	if err := a.RecordBatch(ctx, []cron.Recorded{{ID: j.ID, Bookkeeping: run1, Version: v1}}); err != nil {
		t.Fatal(err)
	}
	got, _ := sharedRead(t, a, j.ID)
	if !got.Paused || got.LastStatus != cron.StatusPaused || !got.NextRunAt.IsZero() {
		t.Errorf("after the bookkeeping of an older version: enabled %v, last_status %q, next_run_at %v; want the pause's",
			!got.Paused, got.LastStatus, got.NextRunAt)
	}
	// At the current version it lands.
	if err := a.RecordBatch(ctx, []cron.Recorded{{ID: j.ID, Bookkeeping: run1, Version: v2}}); err != nil {
		t.Fatal(err)
	}
	got, _ = sharedRead(t, b, j.ID)
	if diff := cmp.Diff(run1, got.Bookkeeping()); diff != "" {
		t.Errorf("bookkeeping at the current version (-want +got):\n%s", diff)
	}
	// An older run's last-run fields do not replace a later run's;
	// next_run_at is written.
	older := cron.Bookkeeping{LastRunAt: cronTime.Add(-time.Minute), NextRunAt: cronTime.Add(10 * time.Minute), LastStatus: cron.StatusFailed, LastError: "x",
		Failures: 1, LastAlert: cron.AlertFailing}
	if err := b.RecordBatch(ctx, []cron.Recorded{{ID: j.ID, Bookkeeping: older, Version: v2}}); err != nil {
		t.Fatal(err)
	}
	got, _ = sharedRead(t, a, j.ID)
	want := run1
	want.NextRunAt = older.NextRunAt
	if diff := cmp.Diff(want, got.Bookkeeping()); diff != "" {
		t.Errorf("after an older run's bookkeeping (-want +got):\n%s", diff)
	}
	// A LastOnly record of a later run writes the last-run fields only.
	later := cron.Bookkeeping{LastRunAt: cronTime.Add(time.Minute), NextRunAt: cronTime.Add(time.Hour), LastStatus: cron.StatusTimeout, LastError: "slow",
		Failures: 3, LastAlert: cron.AlertFailingStreak}
	if err := b.RecordBatch(ctx, []cron.Recorded{{ID: j.ID, Bookkeeping: later, Version: v2, LastOnly: true}, {ID: "nope", Version: 1}}); err != nil {
		t.Fatal(err)
	}
	got, _ = sharedRead(t, a, j.ID)
	want = later
	want.NextRunAt = older.NextRunAt
	if diff := cmp.Diff(want, got.Bookkeeping()); diff != "" {
		t.Errorf("after a LastOnly record (-want +got):\n%s", diff)
	}
}

func sharedCaseClaims(t *testing.T, a, b cron.SharedStore) {
	ctx := context.Background()
	j := cronJobs()[0]
	sharedWrite(t, a, j, 0)
	slot := func(id string, i int) cron.Run {
		at := cronTime.Add(time.Duration(i) * time.Minute)
		return cron.Run{ID: id, JobID: j.ID, ScheduledAt: at, TriggeredAt: at}
	}
	okA, err := a.ClaimRun(ctx, slot("r-a", 0), true)
	if err != nil {
		t.Fatal(err)
	}
	okB, err := b.ClaimRun(ctx, slot("r-b", 0), true)
	if err != nil {
		t.Fatal(err)
	}
	if !okA || okB {
		t.Errorf("claims of one slot by a then b: %v, %v; want true, false", okA, okB)
	}
	// A run-now is claimed by its id: the same scheduled time is no conflict.
	if ok, err := b.ClaimRun(ctx, slot("r-now", 0), false); err != nil || !ok {
		t.Errorf("claim of a run-now: %v, %v; want true", ok, err)
	}
	won, err := b.ClaimSlots(ctx, []cron.Run{slot("r-b0", 0), slot("r-b1", 1), slot("r-b2", 2)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]bool{false, true, true}, won); diff != "" {
		t.Errorf("ClaimSlots through b (-want +got):\n%s", diff)
	}
	won, err = a.ClaimSlots(ctx, []cron.Run{slot("r-a2", 2), slot("r-a3", 3), {ID: "r-x", JobID: "nope", ScheduledAt: cronTime}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]bool{false, true, false}, won); diff != "" {
		t.Errorf("ClaimSlots through a (-want +got):\n%s", diff)
	}
	// Completing the claimed runs: one run each, the claim's id.
	done := func(r cron.Run, st cron.Status) cron.Run {
		r.FinishedAt, r.Status, r.Attempts = r.ScheduledAt.Add(time.Second), st, 1
		return r
	}
	if err := a.AppendRuns(ctx, []cron.Run{done(slot("r-a", 0), cron.StatusSuccess), done(slot("r-a3", 3), cron.StatusFailed)}); err != nil {
		t.Fatal(err)
	}
	if err := b.AppendRuns(ctx, []cron.Run{done(slot("r-b1", 1), cron.StatusSuccess), done(slot("r-now", 0), cron.StatusSuccess)}); err != nil {
		t.Fatal(err)
	}
	runs, err := b.Runs(ctx, j.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range runs {
		ids = append(ids, fmt.Sprintf("%s %s", r.ID, r.Status))
	}
	// Newest claim first; r-b2 is claimed and not finished: not listed.
	if diff := cmp.Diff([]string{"r-a3 failed", "r-b1 success", "r-now success", "r-a success"}, ids); diff != "" {
		t.Errorf("runs, newest claim first (-want +got):\n%s", diff)
	}
}

func sharedCasePageAndCount(t *testing.T, a, b cron.SharedStore) {
	ctx := context.Background()
	js := cronJobs()
	for _, j := range js {
		sharedWrite(t, a, j, 0)
	}
	on, off, err := b.CountJobs(ctx)
	if err != nil || on != 2 || off != 1 {
		t.Errorf("CountJobs = %d, %d, %v; want 2 enabled, 1 paused", on, off, err)
	}
	page, more, err := b.PageJobs(ctx, cron.JobQuery{Limit: 2})
	if err != nil || !more || len(page) != 2 || page[0].ID != js[0].ID || page[1].ID != js[1].ID {
		t.Errorf("first page of 2: %v, more %v, %v", cronIDs(page), more, err)
	}
	page, more, err = b.PageJobs(ctx, cron.JobQuery{After: js[1].ID, Limit: 2})
	if err != nil || more || len(page) != 1 || page[0].ID != js[2].ID {
		t.Errorf("page after %s: %v, more %v, %v", js[1].ID, cronIDs(page), more, err)
	}
	page, _, err = b.PageJobs(ctx, cron.JobQuery{Keep: func(j *cron.Job) bool { return j.Paused }})
	if err != nil || len(page) != 1 || page[0].ID != "job-once" {
		t.Errorf("page of the paused jobs: %v, %v", cronIDs(page), err)
	}
	// Text matches the id or the name, ignoring case, before Keep.
	page, _, err = b.PageJobs(ctx, cron.JobQuery{Text: "RePo"})
	if err != nil || len(page) != 1 || page[0].ID != "job-cron" {
		t.Errorf("page of the jobs matching %q: %v, %v", "RePo", cronIDs(page), err)
	}
	page, _, err = b.PageJobs(ctx, cron.JobQuery{Text: "JOB-", Keep: func(j *cron.Job) bool { return !j.Paused }, Limit: 1})
	if err != nil || len(page) != 1 || page[0].ID != js[0].ID {
		t.Errorf("first page of 1 of the enabled jobs matching %q: %v, %v", "JOB-", cronIDs(page), err)
	}
	if _, _, err := b.PageJobs(ctx, cron.JobQuery{After: "nope", Limit: 2}); !errors.Is(err, cron.ErrNotFound) {
		t.Errorf("page after an unknown id: %v, want ErrNotFound", err)
	}
	// The counts follow a pause, a resume and a delete, by any runner.
	p := js[0]
	p.Paused = true
	sharedWrite(t, b, p, -1)
	r := js[1]
	r.Paused = false
	sharedWrite(t, a, r, -1)
	if err := b.Delete(ctx, js[2].ID); err != nil {
		t.Fatal(err)
	}
	on, off, err = a.CountJobs(ctx)
	if err != nil || on != 1 || off != 1 {
		t.Errorf("CountJobs after a pause, a resume and a delete = %d, %d, %v; want 1, 1", on, off, err)
	}
}

func sharedCaseLoadHeld(t *testing.T, a, b cron.SharedStore) {
	ctx := context.Background()
	js := cronJobs()
	for _, j := range js {
		sharedWrite(t, b, j, 0)
	}
	v := sharedWrite(t, b, js[1], -1)
	jobs, vers, err := a.LoadHeld(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(vers) != len(jobs) {
		t.Fatalf("LoadHeld: %d jobs, %d versions", len(jobs), len(vers))
	}
	if diff := cmp.Diff(js, jobs); diff != "" {
		t.Errorf("LoadHeld (-want +got):\n%s", diff)
	}
	if vers[1] != v {
		t.Errorf("LoadHeld version of %s = %d, want %d", js[1].ID, vers[1], v)
	}
	for _, j := range js {
		if !a.Owns(j.ID) {
			t.Errorf("Owns(%s) = false on a store that owns every job", j.ID)
		}
	}
}

// sharedCaseLastSlots: LastSlots answers, through either runner, the
// latest row of a slot of each job asked for: a claim not finished yet,
// or a missed record of several slots that was never claimed; a run-now
// at a later time is no slot, and a job with no row has no answer.
func sharedCaseLastSlots(t *testing.T, a, b cron.SharedStore) {
	ctx := context.Background()
	jobs := cronJobs()
	for _, j := range jobs[:3] {
		sharedWrite(t, a, j, 0)
	}
	at := func(i int) time.Time { return cronTime.Add(time.Duration(i) * time.Minute) }
	// Job 0: slots claimed at 1 and 2 (2 not finished), a run-now at 5.
	if won, err := a.ClaimSlots(ctx, []cron.Run{{ID: "s1", JobID: jobs[0].ID, ScheduledAt: at(1), TriggeredAt: at(1)},
		{ID: "s2", JobID: jobs[0].ID, ScheduledAt: at(2), TriggeredAt: at(2)}}); err != nil || !won[0] || !won[1] {
		t.Fatalf("ClaimSlots: %v, %v", won, err)
	}
	if ok, err := b.ClaimRun(ctx, cron.Run{ID: "now", JobID: jobs[0].ID, ScheduledAt: at(5), TriggeredAt: at(5)}, false); err != nil || !ok {
		t.Fatalf("claim of a run-now: %v, %v", ok, err)
	}
	if err := a.AppendRuns(ctx, []cron.Run{{ID: "s1", JobID: jobs[0].ID, ScheduledAt: at(1), TriggeredAt: at(1), FinishedAt: at(1), Status: cron.StatusSuccess, Attempts: 1},
		{ID: "now", JobID: jobs[0].ID, ScheduledAt: at(5), TriggeredAt: at(5), FinishedAt: at(5), Status: cron.StatusSuccess, Attempts: 1}}); err != nil {
		t.Fatal(err)
	}
	// Job 1: a missed slot at 1, then a record of three slots from 2.
	if err := b.AppendRuns(ctx, []cron.Run{
		{ID: "m1", JobID: jobs[1].ID, ScheduledAt: at(1), TriggeredAt: at(1), FinishedAt: at(1), Status: cron.StatusMissed, Reason: cron.ReasonNoHolder},
		{ID: "m2", JobID: jobs[1].ID, ScheduledAt: at(2), TriggeredAt: at(4), FinishedAt: at(4), Status: cron.StatusMissed, Reason: cron.ReasonNoHolder, Slots: 3},
	}); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]cron.SharedStore{"a": a, "b": b} {
		got, err := s.LastSlots(ctx, []string{jobs[0].ID, jobs[1].ID, jobs[2].ID, "nope"})
		if err != nil {
			t.Fatalf("LastSlots through %s: %v", name, err)
		}
		brief := map[string]string{}
		for id, r := range got {
			brief[id] = fmt.Sprintf("%s %s slots=%d", r.ID, r.ScheduledAt.UTC().Format(time.RFC3339), r.Slots)
		}
		want := map[string]string{
			jobs[0].ID: "s2 " + at(2).UTC().Format(time.RFC3339) + " slots=0",
			jobs[1].ID: "m2 " + at(2).UTC().Format(time.RFC3339) + " slots=3",
		}
		if diff := cmp.Diff(want, brief); diff != "" {
			t.Errorf("LastSlots through %s (-want +got):\n%s", name, diff)
		}
	}
}
