package jsonstore

import (
	"reflect"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// TestEntryKeepsEveryValue checks that an entry gives back the job it was
// set to, exactly, also for the values its compact form cannot hold:
// times in another location, with a monotonic reading or far away, and a
// type, method, kind or status out of the usual ones; and that bookkeeping
// applied to it reads back the same way.
func TestEntryKeepsEveryValue(t *testing.T) {
	paris := time.FixedZone("CET", 3600)
	base := testJob(jobID(1))
	cases := map[string]func(j *cron.Job){
		"plain":           func(j *cron.Job) {},
		"zone":            func(j *cron.Job) { j.Schedule.StartAt = j.Schedule.StartAt.In(paris) },
		"monotonic":       func(j *cron.Job) { j.NextRunAt = time.Now() },
		"local zero":      func(j *cron.Job) { j.LastRunAt = time.Time{}.In(paris) },
		"far":             func(j *cron.Job) { j.NextRunAt = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC) },
		"before 1700":     func(j *cron.Job) { j.LastRunAt = time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC) },
		"other type":      func(j *cron.Job) { j.Type = "report" },
		"other method":    func(j *cron.Job) { j.HTTP.Method = "PROPFIND" },
		"other kind":      func(j *cron.Job) { j.Schedule.Kind = "weekly" },
		"other status":    func(j *cron.Job) { j.LastStatus = "odd" },
		"status and rare": func(j *cron.Job) { j.LastStatus = "odd"; j.LastError = "boom"; j.KeepRuns = 3 },
	}
	for name, change := range cases {
		j := base
		change(&j)
		var e entry
		e.set(&j)
		if got := e.job(); !reflect.DeepEqual(got, j) {
			t.Errorf("%s: entry gave\n%+v\nwant\n%+v", name, got, j)
		}
		b := j.Bookkeeping()
		b.LastRunAt, b.NextRunAt, b.LastStatus, b.LastError = time.Time{}, t0.Add(time.Hour), cron.StatusSuccess, ""
		e.apply(&b)
		back := e.job()
		if got := back.Bookkeeping(); !reflect.DeepEqual(got, b) {
			t.Errorf("%s: after apply, bookkeeping %+v, want %+v", name, got, b)
		}
		if name == "plain" && e.x != nil {
			t.Errorf("%s: a plain job keeps an extension", name)
		}
	}
}
