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
	var shared shapes // one for all cases: they share shapes where they can
	for name, change := range cases {
		j := base
		change(&j)
		var e entry
		e.set(&j, &shared)
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

// TestEntriesShareShapes checks that jobs made from one template share
// one shape (and so one copy of their URL, body and headers), that a
// job differing in any of its values gets its own, and that setting one
// job again leaves the others' values as they were.
func TestEntriesShareShapes(t *testing.T) {
	var c shapes
	base := testJob(jobID(1))
	base.HTTP.Headers = map[string]string{"X-Token": "abc"}
	mk := func(change func(j *cron.Job)) (*entry, cron.Job) {
		j := base
		j.HTTP.Headers = map[string]string{"X-Token": "abc"} // equal, not the same map
		j.HTTP.URL = string([]byte(base.HTTP.URL))           // equal, not the same string
		if change != nil {
			change(&j)
		}
		e := new(entry)
		e.set(&j, &c)
		return e, j
	}
	a, _ := mk(nil)
	b, jb := mk(func(j *cron.Job) { j.ID, j.Name = jobID(2), "other" })
	if a.sh != b.sh {
		t.Fatal("two jobs of one template have a shape each")
	}
	if got := b.job(); !reflect.DeepEqual(got, jb) {
		t.Fatalf("entry gave\n%+v\nwant\n%+v", got, jb)
	}
	// Other types share a shape (the type is in x), and keep their own type.
	r1, j1 := mk(func(j *cron.Job) { j.Type = "report" })
	r2, j2 := mk(func(j *cron.Job) { j.Type = "digest" })
	if r1.job().Type != j1.Type || r2.job().Type != j2.Type {
		t.Fatalf("types %q and %q, want %q and %q", r1.job().Type, r2.job().Type, j1.Type, j2.Type)
	}
	for name, change := range map[string]func(j *cron.Job){
		"url":      func(j *cron.Job) { j.HTTP.URL += "x" },
		"body":     func(j *cron.Job) { j.HTTP.Body = "{}" },
		"header":   func(j *cron.Job) { j.HTTP.Headers["X-Token"] = "abd" },
		"headers":  func(j *cron.Job) { j.HTTP.Headers["X-Other"] = "1" },
		"none":     func(j *cron.Job) { j.HTTP.Headers = nil },
		"empty":    func(j *cron.Job) { j.HTTP.Headers = map[string]string{} },
		"every":    func(j *cron.Job) { j.Schedule.Every += cron.Duration(time.Second) },
		"timeout":  func(j *cron.Job) { j.Timeout += cron.Duration(time.Second) },
		"backoff":  func(j *cron.Job) { j.RetryBackoff += cron.Duration(time.Second) },
		"retries":  func(j *cron.Job) { j.MaxRetries++ },
		"method":   func(j *cron.Job) { j.HTTP.Method = "PUT" },
		"kind":     func(j *cron.Job) { j.Schedule.Kind = cron.KindCron; j.Schedule.Cron = "* * * * *" },
		"function": func(j *cron.Job) { j.Type = "" },
	} {
		e, j := mk(change)
		if e.sh == a.sh {
			t.Errorf("%s: a job that differs shares the template's shape", name)
		}
		if got := e.job(); !reflect.DeepEqual(got, j) {
			t.Errorf("%s: entry gave\n%+v\nwant\n%+v", name, got, j)
		}
		if got := a.job(); !reflect.DeepEqual(got, base) {
			t.Fatalf("%s: the template's job changed to\n%+v", name, got)
		}
	}
	// A job set again takes another shape; the others keep theirs.
	jb.HTTP.Body = "changed"
	b.set(&jb, &c)
	if got := a.job(); !reflect.DeepEqual(got, base) {
		t.Fatalf("after a change of another job, the template's job is\n%+v", got)
	}
	if got := b.job(); !reflect.DeepEqual(got, jb) {
		t.Fatalf("changed job gave\n%+v\nwant\n%+v", got, jb)
	}
}
