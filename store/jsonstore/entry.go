package jsonstore

import (
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// entry is the store's record of one job: the fields of [cron.Job], less
// the ones most jobs leave empty (behind x), and where its runs are in
// runs.jsonl. It holds no copy of the job's JSON: a rewrite of jobs.json
// encodes it again. Entries live in slabs (no object per job for the
// garbage collector); their strings are those the decoder or the caller
// gave, which a runner loading from the store shares.
type entry struct {
	id, name, typ, method, url, body, kind string
	headers                                map[string]string
	every, timeout, backoff                cron.Duration
	startAt                                time.Time // schedule.start_at
	last, next                             time.Time // last_run_at, next_run_at
	status                                 cron.Status
	retries                                int32
	enabled                                bool
	deleted                                bool // guarded by Store.mu

	// The job's lines in runs.jsonl (of this incarnation of its id),
	// guarded by Store.mu; offsets are the line's offset + 1, 0 = none.
	rcount uint32 // lines from rfirst on
	rhead  int64  // the newest line
	rfirst int64  // the oldest line

	x *entryExt // nil when all its fields are empty
}

// entryExt holds the fields of a job that most jobs leave empty.
type entryExt struct {
	runAt        time.Time
	pausedUntil  time.Time
	pausedAt     time.Time
	jitter       cron.Duration
	misfireGrace cron.Duration
	cron, tz     string
	lastError    string
	args         string // a Go function job's args (JSON)
	// A MaxRetries beyond int32 (never valid, but kept as given).
	retries int
	alert   *cron.AlertConfig // never modified
	// The alert bookkeeping.
	failures  int
	lastAlert string
	keepRuns  int
}

// set makes e hold j (the run fields stay).
func (e *entry) set(j *cron.Job) {
	e.id, e.name, e.typ, e.method, e.url, e.body, e.kind = j.ID, j.Name, j.Type, j.HTTP.Method, j.HTTP.URL, j.HTTP.Body, j.Schedule.Kind
	e.headers = j.HTTP.Headers
	e.every, e.timeout, e.backoff = j.Schedule.Every, j.Timeout, j.RetryBackoff
	e.startAt, e.last, e.next = j.Schedule.StartAt, j.LastRunAt, j.NextRunAt
	e.status, e.enabled = j.LastStatus, !j.Paused
	e.retries = int32(j.MaxRetries)
	e.x = nil
	if !j.Schedule.RunAt.IsZero() || !j.PausedUntil.IsZero() || !j.PausedAt.IsZero() || j.Schedule.Jitter != 0 || j.MisfireGrace != 0 || j.Schedule.Cron != "" ||
		j.Schedule.TZ != "" || j.LastError != "" || int(e.retries) != j.MaxRetries || len(j.Args) > 0 ||
		j.Alert != nil || j.Failures != 0 || j.LastAlert != "" || j.KeepRuns != 0 {
		x := &entryExt{runAt: j.Schedule.RunAt, pausedUntil: j.PausedUntil, pausedAt: j.PausedAt, jitter: j.Schedule.Jitter, misfireGrace: j.MisfireGrace,
			cron: j.Schedule.Cron, tz: j.Schedule.TZ, lastError: j.LastError, args: string(j.Args),
			failures: j.Failures, lastAlert: j.LastAlert, keepRuns: j.KeepRuns}
		if j.Alert != nil {
			a := *j.Alert
			x.alert = &a
		}
		if int(e.retries) != j.MaxRetries {
			x.retries = j.MaxRetries
		}
		e.x = x
	}
}

// job returns the job e holds. Its headers map is e's: callers that hand
// it out copy it.
func (e *entry) job() cron.Job {
	j := cron.Job{
		ID: e.id, Name: e.name, Paused: !e.enabled, Type: e.typ,
		HTTP:     cron.HTTPConfig{Method: e.method, URL: e.url, Headers: e.headers, Body: e.body},
		Schedule: cron.ScheduleSpec{Kind: e.kind, Every: e.every, StartAt: e.startAt},
		Timeout:  e.timeout, MaxRetries: int(e.retries), RetryBackoff: e.backoff,
		LastRunAt: e.last, NextRunAt: e.next, LastStatus: e.status,
	}
	if x := e.x; x != nil {
		j.Schedule.RunAt, j.Schedule.Jitter, j.MisfireGrace = x.runAt, x.jitter, x.misfireGrace
		j.PausedUntil, j.PausedAt = x.pausedUntil, x.pausedAt
		j.KeepRuns = x.keepRuns
		j.Schedule.Cron, j.Schedule.TZ, j.LastError = x.cron, x.tz, x.lastError
		if x.args != "" {
			j.Args = []byte(x.args)
		}
		if x.retries != 0 {
			j.MaxRetries = x.retries
		}
		if x.alert != nil {
			a := *x.alert
			j.Alert = &a
		}
		j.Failures, j.LastAlert = x.failures, x.lastAlert
	}
	return j
}

// apply copies bookkeeping b into e.
func (e *entry) apply(b *cron.Bookkeeping) {
	e.last, e.next, e.status = b.LastRunAt, b.NextRunAt, b.LastStatus
	if e.x == nil && b.LastError == "" && b.Failures == 0 && b.LastAlert == "" {
		return
	}
	if e.x == nil {
		e.x = &entryExt{}
	}
	e.x.lastError, e.x.failures, e.x.lastAlert = b.LastError, b.Failures, b.LastAlert
	if *e.x == (entryExt{}) {
		e.x = nil
	}
}

// keepRuns returns the job's keep_runs, 0 for none.
func (e *entry) keepRuns() int {
	if e.x == nil {
		return 0
	}
	return e.x.keepRuns
}
