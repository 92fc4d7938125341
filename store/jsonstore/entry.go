package jsonstore

import (
	"hash/maphash"
	"maps"
	"math"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// entry is the store's record of one job: the fields of [cron.Job] in a
// compact form, less the ones most jobs leave empty (behind x), and where
// its runs are in runs.jsonl. It holds no copy of the job's JSON: a
// rewrite of jobs.json encodes it again. Entries live in slabs (no object
// per job for the garbage collector); their strings are those the decoder
// or the caller gave, which a runner loading from the store shares.
//
// The compact form keeps a million jobs small: what jobs made from one
// template have in common (the callback, timeouts, retries, interval) is
// one shape that they share (see shapes); the times are nanoseconds since
// 1970 (a time in another location than UTC, with a monotonic reading or
// beyond the range, goes to x as it is), and the job type, method,
// schedule kind and status are codes into the usual values (any other
// goes to x).
type entry struct {
	id, name            string
	sh                  *shape // never nil once set; shared, never modified
	startAt, last, next int64  // schedule.start_at, last_run_at, next_run_at: see packTime

	// The job's lines in runs.jsonl (of this incarnation of its id),
	// guarded by Store.mu; offsets are the line's offset + 1, 0 = none.
	rhead  int64  // the newest line
	rfirst int64  // the oldest line
	rcount uint32 // lines from rfirst on

	status  uint8 // code: see the tables below; codeExt = in x
	enabled bool
	deleted bool // guarded by Store.mu

	x *entryExt // nil when all its fields are empty
}

// shape is the part of a job that jobs made from one template share: 72
// bytes held once for all of them instead of once a job. A shape is never
// modified: an entry whose job changes takes another one.
type shape struct {
	url, body               string
	headers                 map[string]string
	every, timeout, backoff cron.Duration
	retries                 int32
	typ, method, kind       uint8 // codes: see the tables below; codeExt = in the entry's x
}

// same reports whether a and b hold the same values.
func (a *shape) same(b *shape) bool {
	return a.url == b.url && a.body == b.body && a.every == b.every && a.timeout == b.timeout && a.backoff == b.backoff &&
		a.retries == b.retries && a.typ == b.typ && a.method == b.method && a.kind == b.kind &&
		len(a.headers) == len(b.headers) && (a.headers == nil) == (b.headers == nil) && maps.Equal(a.headers, b.headers)
}

// shapes hands out shared shapes: it keeps the last shape made for each
// of 64 hashes of their values, and an entry whose shape equals the one
// kept takes it (and the copy it was given, its strings and headers map
// included, is left to the garbage collector). Jobs made from up to a few
// dozen templates share a shape each; any other job has its own. Not
// safe for concurrent use: the decoder's parts have one each, the store
// one under mu.
type shapes struct {
	seed  maphash.Seed
	slots [64]*shape
}

// get returns the shape kept that equals v, else a new copy of v, kept.
func (c *shapes) get(v *shape) *shape {
	if c.seed == (maphash.Seed{}) {
		c.seed = maphash.MakeSeed()
	}
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.WriteString(v.url)
	h.WriteString(v.body)
	k := (h.Sum64() ^ uint64(v.every) ^ uint64(v.timeout)<<1 ^ uint64(v.backoff)<<2 ^ uint64(v.retries)<<3 ^
		uint64(v.typ)<<8 ^ uint64(v.method)<<16 ^ uint64(v.kind)<<24 ^ uint64(len(v.headers))<<32) % uint64(len(c.slots))
	if p := c.slots[k]; p != nil && p.same(v) {
		return p
	}
	p := new(shape)
	*p = *v
	c.slots[k] = p
	return p
}

// entryExt holds the fields of a job that most jobs leave empty, and the
// values the compact form of entry cannot hold.
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

	// The fields whose entry code or time is codeExt or timeExt.
	typ, method, kind string
	status            cron.Status
	startAt, last     time.Time
	next              time.Time
}

// codeExt is the code of a value kept in entryExt.
const codeExt = math.MaxUint8

var (
	typCodes    = [...]string{"", "http"}
	methodCodes = [...]string{"", "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}
	kindCodes   = [...]string{"", cron.KindEvery, cron.KindCron, cron.KindOnce}
	statusCodes = [...]cron.Status{"", cron.StatusSuccess, cron.StatusFailed, cron.StatusTimeout,
		cron.StatusSkipped, cron.StatusPaused, cron.StatusMissed}
)

// code returns the index of v in table, or codeExt.
func code[T ~string](table []T, v T) uint8 {
	for i, s := range table {
		if s == v {
			return uint8(i)
		}
	}
	return codeExt
}

// The int64 of a zero time and of a time kept in entryExt.
const (
	timeZero = math.MinInt64
	timeExt  = math.MinInt64 + 1
)

// packTime returns the compact form of t: timeZero, its nanoseconds since
// 1970 when unpackTime gives t back exactly, else timeExt.
func packTime(t time.Time) int64 {
	if t.IsZero() && t == (time.Time{}) {
		return timeZero
	}
	if t.Location() != time.UTC || t != t.Round(0) || t.Year() < 1700 || t.Year() > 2200 {
		return timeExt
	}
	n := t.UnixNano()
	if unpackTime(n) != t {
		return timeExt
	}
	return n
}

// unpackTime reverses packTime (timeExt is the caller's).
func unpackTime(n int64) time.Time {
	if n == timeZero {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// ext returns e.x, making it when nil.
func (e *entry) ext() *entryExt {
	if e.x == nil {
		e.x = &entryExt{}
	}
	return e.x
}

// setTimes sets the compact times of e, the ones that do not fit in e.x.
func (e *entry) setTime(dst *int64, t time.Time, ext func(*entryExt) *time.Time) {
	*dst = packTime(t)
	if *dst == timeExt {
		*ext(e.ext()) = t
	} else if e.x != nil {
		*ext(e.x) = time.Time{}
	}
}

func extStartAt(x *entryExt) *time.Time { return &x.startAt }
func extLast(x *entryExt) *time.Time    { return &x.last }
func extNext(x *entryExt) *time.Time    { return &x.next }

// setStatus sets e's status.
func (e *entry) setStatus(s cron.Status) {
	e.status = code(statusCodes[:], s)
	if e.status == codeExt {
		e.ext().status = s
	} else if e.x != nil {
		e.x.status = ""
	}
}

// set makes e hold j (the run fields stay), its shape from c.
func (e *entry) set(j *cron.Job, c *shapes) {
	sh := shape{url: j.HTTP.URL, body: j.HTTP.Body, headers: j.HTTP.Headers,
		every: j.Schedule.Every, timeout: j.Timeout, backoff: j.RetryBackoff, retries: int32(j.MaxRetries)}
	e.id, e.name = j.ID, j.Name
	e.enabled = !j.Paused
	e.x = nil
	if !j.Schedule.RunAt.IsZero() || !j.PausedUntil.IsZero() || !j.PausedAt.IsZero() || j.Schedule.Jitter != 0 || j.MisfireGrace != 0 || j.Schedule.Cron != "" ||
		j.Schedule.TZ != "" || j.LastError != "" || int(sh.retries) != j.MaxRetries || len(j.Args) > 0 ||
		j.Alert != nil || j.Failures != 0 || j.LastAlert != "" || j.KeepRuns != 0 {
		x := &entryExt{runAt: j.Schedule.RunAt, pausedUntil: j.PausedUntil, pausedAt: j.PausedAt, jitter: j.Schedule.Jitter, misfireGrace: j.MisfireGrace,
			cron: j.Schedule.Cron, tz: j.Schedule.TZ, lastError: j.LastError, args: string(j.Args),
			failures: j.Failures, lastAlert: j.LastAlert, keepRuns: j.KeepRuns}
		if j.Alert != nil {
			a := *j.Alert
			x.alert = &a
		}
		if int(sh.retries) != j.MaxRetries {
			x.retries = j.MaxRetries
		}
		e.x = x
	}
	if sh.typ = code(typCodes[:], j.Type); sh.typ == codeExt {
		e.ext().typ = j.Type
	}
	if sh.method = code(methodCodes[:], j.HTTP.Method); sh.method == codeExt {
		e.ext().method = j.HTTP.Method
	}
	if sh.kind = code(kindCodes[:], j.Schedule.Kind); sh.kind == codeExt {
		e.ext().kind = j.Schedule.Kind
	}
	e.sh = c.get(&sh)
	e.setStatus(j.LastStatus)
	e.setTime(&e.startAt, j.Schedule.StartAt, extStartAt)
	e.setTime(&e.last, j.LastRunAt, extLast)
	e.setTime(&e.next, j.NextRunAt, extNext)
}

// time returns the time of compact n, or of the field of e.x.
func (e *entry) time(n int64, ext func(*entryExt) *time.Time) time.Time {
	if n == timeExt {
		return *ext(e.x)
	}
	return unpackTime(n)
}

// job returns the job e holds. Its headers map is e's: callers that hand
// it out copy it.
func (e *entry) job() cron.Job {
	sh := e.sh
	j := cron.Job{
		ID: e.id, Name: e.name, Paused: !e.enabled,
		HTTP:     cron.HTTPConfig{URL: sh.url, Headers: sh.headers, Body: sh.body},
		Schedule: cron.ScheduleSpec{Every: sh.every, StartAt: e.time(e.startAt, extStartAt)},
		Timeout:  sh.timeout, MaxRetries: int(sh.retries), RetryBackoff: sh.backoff,
		LastRunAt: e.time(e.last, extLast), NextRunAt: e.time(e.next, extNext),
	}
	if sh.typ != codeExt {
		j.Type = typCodes[sh.typ]
	}
	if sh.method != codeExt {
		j.HTTP.Method = methodCodes[sh.method]
	}
	if sh.kind != codeExt {
		j.Schedule.Kind = kindCodes[sh.kind]
	}
	if e.status != codeExt {
		j.LastStatus = statusCodes[e.status]
	}
	if x := e.x; x != nil {
		if sh.typ == codeExt {
			j.Type = x.typ
		}
		if sh.method == codeExt {
			j.HTTP.Method = x.method
		}
		if sh.kind == codeExt {
			j.Schedule.Kind = x.kind
		}
		if e.status == codeExt {
			j.LastStatus = x.status
		}
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
	e.setTime(&e.last, b.LastRunAt, extLast)
	e.setTime(&e.next, b.NextRunAt, extNext)
	e.setStatus(b.LastStatus)
	if e.x == nil && b.LastError == "" && b.Failures == 0 && b.LastAlert == "" {
		return
	}
	x := e.ext()
	x.lastError, x.failures, x.lastAlert = b.LastError, b.Failures, b.LastAlert
	if *x == (entryExt{}) {
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
