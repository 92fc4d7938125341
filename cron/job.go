package cron

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Status is the outcome of a run, as stored in a job's last_status and in
// run records. The same words appear in the REST API and in the stores.
type Status string

// The statuses a run can end with.
const (
	StatusSuccess Status = "success" // the callback answered 2xx
	StatusFailed  Status = "failed"  // a non-retryable answer, or retries exhausted
	StatusTimeout Status = "timeout" // the last attempt ran out of time
	StatusSkipped Status = "skipped" // a slot came while the previous run was still in flight
	StatusPaused  Status = "paused"  // the job was paused
	StatusMissed  Status = "missed"  // a once job was past due when the runner saw it
)

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string such as "5s" or "1m30s". An empty string reads as zero.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d like time.Duration, without the zero units that
// time.Duration leaves at the end: "1h", "1m", "1h30m", "90s", "1.5s",
// "100ms". It is the one form a Duration takes in JSON, so a duration
// comes back as it was written ("1h" stays "1h"); any such string parses
// back with time.ParseDuration.
func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	// A duration string holds digits, '.', '-' and unit letters ("µs"
	// included): nothing JSON escapes.
	s := d.String()
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), nil
}

// UnmarshalJSON reads a duration string ("" is zero).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"5s\": %s", b)
	}
	if s == "" {
		*d = 0
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q", s)
	}
	*d = Duration(v)
	return nil
}

// HTTPConfig is the callback a job makes.
type HTTPConfig struct {
	// Method is the request's method: GET (the default), POST, PUT, PATCH
	// or DELETE.
	Method string `json:"method"`
	// URL is the callback's address: http or https, with a host.
	URL string `json:"url"`
	// Headers are sent with every attempt; a "Host" header sets the
	// request's host.
	Headers map[string]string `json:"headers,omitempty"`
	// Body is sent with every attempt, its placeholders {{job_id}},
	// {{run_id}}, {{scheduled_at}} and {{triggered_at}} replaced by the
	// run's values (times in RFC 3339 UTC with nanoseconds; values
	// inserted as they are, without quoting).
	Body string `json:"body"`
}

// ScheduleSpec describes when a job runs, as stored and sent over the API.
//
//   - kind "once": RunAt.
//   - kind "every": Every, optional StartAt (default: when the job is
//     created) and optional Jitter (default 0, must be below Every).
//   - kind "cron": Cron, a cron expression (see [ParseCron]), and optional
//     TZ, an IANA zone name (default UTC). Cron may name its zone by a
//     CRON_TZ= or TZ= prefix instead; a prefix that names another zone
//     than TZ is refused (a *[ValidationError] on "schedule.tz"). A job
//     stored with such a conflict before it was refused still loads, and
//     runs as it did: in the zone of the prefix.
type ScheduleSpec struct {
	Kind    string
	RunAt   time.Time
	Every   Duration
	StartAt time.Time
	Jitter  Duration
	Cron    string
	TZ      string
}

// Every returns the spec of a schedule that runs every d, on a grid that
// starts when the job is added (set StartAt and Jitter on the result for
// another start or a jitter).
func Every(d time.Duration) ScheduleSpec { return ScheduleSpec{Kind: KindEvery, Every: Duration(d)} }

// At returns the spec of a schedule that runs once, at t.
func At(t time.Time) ScheduleSpec { return ScheduleSpec{Kind: KindOnce, RunAt: t} }

// Cron returns the spec of a schedule given by a cron expression (see
// [ParseCron]), in UTC unless the expression starts with CRON_TZ= (set TZ
// on the result for another zone).
func Cron(expr string) ScheduleSpec { return ScheduleSpec{Kind: KindCron, Cron: expr} }

type scheduleWire struct {
	Kind    string   `json:"kind"`
	RunAt   string   `json:"run_at,omitempty"`
	Every   Duration `json:"every,omitempty"`
	StartAt *string  `json:"start_at,omitempty"`
	Jitter  Duration `json:"jitter,omitempty"`
	Cron    string   `json:"cron,omitempty"`
	TZ      string   `json:"tz,omitempty"`
}

// MarshalJSON writes the fields of the schedule's kind; times are RFC3339 UTC.
func (s ScheduleSpec) MarshalJSON() ([]byte, error) {
	w := scheduleWire{Kind: s.Kind, RunAt: formatTime(s.RunAt), Every: s.Every, Jitter: s.Jitter, Cron: s.Cron, TZ: s.TZ}
	if s.Kind == KindEvery {
		st := formatTime(s.StartAt)
		w.StartAt = &st
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads a schedule object; unknown fields are an error.
func (s *ScheduleSpec) UnmarshalJSON(b []byte) error {
	var w scheduleWire
	if err := strictUnmarshal(b, &w); err != nil {
		return err
	}
	runAt, err := parseTime("schedule.run_at", w.RunAt)
	if err != nil {
		return err
	}
	var startAt time.Time
	if w.StartAt != nil {
		if startAt, err = parseTime("schedule.start_at", *w.StartAt); err != nil {
			return err
		}
	}
	*s = ScheduleSpec{Kind: w.Kind, RunAt: runAt, Every: w.Every, StartAt: startAt, Jitter: w.Jitter, Cron: w.Cron, TZ: w.TZ}
	return nil
}

// Job is a timed job and its bookkeeping: an HTTP callback (Type "http",
// the default, described by HTTP) or a Go function registered on the
// runner under the name in Type (see [Runner.Handle]), called with Args.
// Its JSON form is the one of the jobs.json file, of the SQL stores and of
// the REST API: times are RFC3339 in UTC, an unset time is "", durations
// are strings such as "5s"; http is written for HTTP jobs only, args when
// set.
//
// LastRunAt, NextRunAt, LastStatus and LastError are system fields: the
// runner maintains them; PausedUntil is set by [Runner.Pause] and
// PausedAt by the pause of the job.
type Job struct {
	// ID names the job. [Runner.Add] gives an empty one 128 random bits
	// in hex, and holds a given one to 1 to [MaxIDLen] ASCII letters,
	// digits, '-', '_', '.' and ':', and not "." or "..", so that an id
	// is always one segment of a URL path and of a file name (a
	// *[ValidationError] on "id" otherwise). Jobs loaded from a store are
	// not held to it: an id stored before it applied stays usable.
	ID string `json:"id"`
	// Name is free text for people.
	Name string `json:"name"`
	// Paused keeps the job from firing (its JSON form says
	// "enabled": false). The zero value is a job that runs.
	Paused bool `json:"-"`
	// PausedUntil, on a paused job, is when the runner resumes it by
	// itself (the until of [Runner.Pause]); zero for a pause with no end.
	// It is a system field of the pause: [Job.Prepare] clears it on a job that
	// is not paused, a [Runner.Pause] with a zero until and [Runner.Resume]
	// clear it. Its JSON form is "paused_until", left out when zero.
	PausedUntil time.Time `json:"-"`
	// PausedAt, on a paused job, is when it was paused: set when the job
	// goes from running to paused ([Runner.Pause], an update that
	// disables it), kept while it stays paused (a new
	// paused_until leaves it as it is), cleared when it is resumed. Whoever
	// resumes the job, the runner that paused it or not, after a restart
	// or on another runner of a [SharedStore], records the slots passed
	// since as one skipped run of reason [ReasonPaused]; zero (a job
	// paused before it was kept) records none. It is a system field:
	// [Job.Prepare] clears it on a job that is not paused, and the runner
	// keeps it whatever [Runner.Add] (which stores none) or the change of
	// [Runner.Update] gives. Its JSON form is "paused_at", left out when
	// zero.
	PausedAt time.Time `json:"-"`
	// Type is "http" (the default when empty) or the name of a Go function
	// registered with [Runner.Handle] or [Config.Handlers].
	Type string `json:"type"`
	// HTTP is the callback of an HTTP job; it must be empty for other
	// types.
	HTTP HTTPConfig `json:"http"`
	// Args are the arguments of a Go function job: any JSON value (an
	// object, usually), handed to its handler as they are stored
	// ([Call.Job], [Typed]). They are kept in compact form; JSON null is
	// no args. An HTTP job has none: its request carries http.body.
	Args         json.RawMessage `json:"args,omitempty"`
	Schedule     ScheduleSpec    `json:"schedule"`
	Timeout      Duration        `json:"timeout"`
	MaxRetries   int             `json:"max_retries"`
	RetryBackoff Duration        `json:"retry_backoff"`
	// MisfireGrace, when positive, lets a slot missed by less than this
	// still run once (see Misfires in the package doc). Zero keeps the default rule: a missed
	// slot is skipped, with no catch-up.
	MisfireGrace Duration `json:"misfire_grace,omitempty"`
	// Alert, when set, names the webhook told of changes of the job's
	// health (see [AlertConfig]). Nil: the runner's [Config.Alert], if
	// any.
	Alert *AlertConfig `json:"alert,omitempty"`
	// KeepRuns is how many of the job's runs its history keeps, the
	// newest, from 1 to 100000. Zero keeps the store's number (50 unless
	// it was told otherwise, as by KSANA_RUN_HISTORY in cmd/ksana).
	// Lowering it drops the oldest runs beyond it at the job's next run.
	KeepRuns int `json:"keep_runs,omitempty"`

	LastRunAt time.Time `json:"last_run_at"`
	NextRunAt time.Time `json:"next_run_at"`
	// LastStatus is what happened last: the status of the job's last run
	// (or skipped or missed slot); paused while the job is paused. When
	// the job is resumed it says again what happened before the pause:
	// the status of the newest run in its history that is not the record
	// of the pause itself, or "" when the history holds none. LastError
	// goes with it (a pause leaves it as it was).
	LastStatus Status `json:"last_status"`
	LastError  string `json:"last_error"`
	// Failures is the number of runs in a row that failed (failed or
	// timeout), 0 after a success; LastAlert is the last transition
	// alerted (see [AlertConfig]). System fields, as those above.
	Failures  int    `json:"failures,omitempty"`
	LastAlert string `json:"last_alert,omitempty"`
}

// jobWire is the JSON form of a Job: the one definition of its fields,
// their names and their order. store/jsonstore's codec and cron/httpapi's
// decoder are held to it by fuzz tests that fill every field of a Job.
type jobWire struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Enabled      bool            `json:"enabled"`
	PausedUntil  string          `json:"paused_until,omitempty"`
	PausedAt     string          `json:"paused_at,omitempty"`
	Type         string          `json:"type"`
	HTTP         *HTTPConfig     `json:"http,omitempty"`
	Args         json.RawMessage `json:"args,omitempty"`
	Schedule     ScheduleSpec    `json:"schedule"`
	Timeout      Duration        `json:"timeout"`
	MaxRetries   int             `json:"max_retries"`
	RetryBackoff Duration        `json:"retry_backoff"`
	MisfireGrace Duration        `json:"misfire_grace,omitempty"`
	Alert        *AlertConfig    `json:"alert,omitempty"`
	KeepRuns     int             `json:"keep_runs,omitempty"`
	LastRunAt    string          `json:"last_run_at"`
	NextRunAt    string          `json:"next_run_at"`
	LastStatus   Status          `json:"last_status"`
	LastError    string          `json:"last_error"`
	Failures     int             `json:"failures,omitempty"`
	LastAlert    string          `json:"last_alert,omitempty"`
}

// MarshalJSON writes the job with the snake_case field names of the REST
// API and the JSON store (next_run_at, max_retries, ...). The http object
// is written unless the job has another type and an empty HTTP.
func (j Job) MarshalJSON() ([]byte, error) {
	var h *HTTPConfig
	if j.WritesHTTP() {
		h = &j.HTTP
	}
	return json.Marshal(jobWire{
		ID: j.ID, Name: j.Name, Enabled: !j.Paused, PausedUntil: formatTime(j.PausedUntil), PausedAt: formatTime(j.PausedAt), Type: j.Type, HTTP: h, Args: j.Args, Schedule: j.Schedule,
		Timeout: j.Timeout, MaxRetries: j.MaxRetries, RetryBackoff: j.RetryBackoff, MisfireGrace: j.MisfireGrace, Alert: j.Alert,
		KeepRuns: j.KeepRuns, LastRunAt: formatTime(j.LastRunAt), NextRunAt: formatTime(j.NextRunAt), LastStatus: j.LastStatus, LastError: j.LastError,
		Failures: j.Failures, LastAlert: j.LastAlert,
	})
}

// UnmarshalJSON reads a job; unknown fields are an error.
func (j *Job) UnmarshalJSON(b []byte) error {
	var w jobWire
	if err := strictUnmarshal(b, &w); err != nil {
		return err
	}
	last, err := parseTime("last_run_at", w.LastRunAt)
	if err != nil {
		return err
	}
	next, err := parseTime("next_run_at", w.NextRunAt)
	if err != nil {
		return err
	}
	until, err := parseTime("paused_until", w.PausedUntil)
	if err != nil {
		return err
	}
	pausedAt, err := parseTime("paused_at", w.PausedAt)
	if err != nil {
		return err
	}
	var h HTTPConfig
	if w.HTTP != nil {
		h = *w.HTTP
	}
	if string(w.Args) == "null" {
		w.Args = nil
	}
	*j = Job{
		ID: w.ID, Name: w.Name, Paused: !w.Enabled, PausedUntil: until, PausedAt: pausedAt, Type: w.Type, HTTP: h, Args: w.Args, Schedule: w.Schedule,
		Timeout: w.Timeout, MaxRetries: w.MaxRetries, RetryBackoff: w.RetryBackoff, MisfireGrace: w.MisfireGrace, Alert: w.Alert,
		KeepRuns: w.KeepRuns, LastRunAt: last, NextRunAt: next, LastStatus: w.LastStatus, LastError: w.LastError,
		Failures: w.Failures, LastAlert: w.LastAlert,
	}
	return nil
}

// maxKeepRuns is the most runs a job's keep_runs may ask to keep.
const maxKeepRuns = 100000

// IsHTTP reports whether j is an HTTP callback job: its type is "http" or
// empty.
func (j *Job) IsHTTP() bool { return j.Type == "" || j.Type == JobTypeHTTP }

// WritesHTTP reports whether the JSON form of j holds its http object: for
// an HTTP job, and for any job whose HTTP is not empty (which [Job.Prepare]
// refuses on another type).
func (j *Job) WritesHTTP() bool {
	return j.IsHTTP() || j.HTTP.Method != "" || j.HTTP.URL != "" || j.HTTP.Headers != nil || j.HTTP.Body != ""
}

// Rules are the settings of a runner that [Job.Prepare] applies: the values
// it gives to the unset fields of a job whose zero value means "the
// default", and the shortest interval it accepts. The zero value is the
// documented defaults.
type Rules struct {
	// Timeout is given to a job whose timeout is 0. Default (0)
	// [DefaultTimeout].
	Timeout time.Duration
	// RetryBackoff is given to a job whose retry_backoff is 0. Default (0)
	// [DefaultRetryBackoff].
	RetryBackoff time.Duration
	// MinInterval is the shortest every interval (and @every of a cron
	// expression) accepted. Default (0) [DefaultMinInterval], 1s; a
	// negative value sets no minimum.
	MinInterval time.Duration
}

// minInterval returns the minimum interval the rules set, 0 for none.
func (d Rules) minInterval() time.Duration {
	switch {
	case d.MinInterval < 0:
		return 0
	case d.MinInterval == 0:
		return DefaultMinInterval
	}
	return d.MinInterval
}

// Prepare is the one way a job's configuration is made ready to run; the
// [Runner] calls it for every job it adds, updates or loads. It fills the
// defaults of j's unset fields: type "http", method GET for an HTTP job (a
// method is upper cased), timeout and retry_backoff from d, and for an
// every schedule without start_at, start_at = now; it turns every time to
// UTC. Then it checks every field and returns a *[ValidationError] naming
// the first bad one. For an HTTP job: no args, the method, the callback
// URL (http or https, with a host and a port from 1 to 65535 if any), the
// request headers (see below), the body's placeholders (only {{job_id}},
// {{run_id}}, {{scheduled_at}} and {{triggered_at}}).
// For a job of another type: the type's name (validType), an empty
// http, and args that are JSON (compacted here). Whether a handler is
// registered for the type is the runner's check, not Prepare's. Then, for
// every job: timeout > 0, max_retries between 0
// and 65535, retry_backoff and misfire_grace >= 0, keep_runs between 0
// and 100000, the schedule
// ([ScheduleSpec.Validate]) and an interval no shorter than the rules'
// minimum (1s by default); an alert's url (http or https with a host;
// empty: the runner's), secret (at most [MaxAlertSecretLen] bytes), after
// and pause_after (>= 0). On success it returns the job's schedule, built
// once: a cron expression is parsed here and nowhere else. The system
// fields are not looked at, but for paused_until and paused_at, which are
// cleared on a job that is not paused and must lie between the years 1679
// and 2261.
// MaxRetries has no default here: 0 means no retry.
//
// A header name must be a token (letters, digits and !#$%&'*+-.^_`|~), a
// value must hold no control character but tab, and Content-Length and
// Transfer-Encoding are refused: the HTTP client sets them from the body.
// Host is allowed: it names the virtual host the request asks for, while
// the connection still goes to the URL's host.
func (j *Job) Prepare(now time.Time, d Rules) (Schedule, error) {
	c, err := prepare(j, now, d, nil, nil)
	if err != nil {
		return nil, err
	}
	switch j.Schedule.Kind {
	case KindOnce:
		return onceSchedule{At: j.Schedule.RunAt}, nil
	case KindEvery:
		return everySchedule{Interval: j.Schedule.Every.D(), Start: j.Schedule.StartAt, Jitter: j.Schedule.Jitter.D(), Seed: seedFor(j.ID)}, nil
	}
	return c, nil
}

// prepare is Prepare without building the once and every schedules (the
// runner keeps those as plain numbers); it returns the parsed cron
// expression of a cron job. Two hints spare a bulk add of similar jobs
// the same work for each: known is a configuration that passed before,
// so that a URL or body equal to its own is not checked again, and parsed
// is the parse of the job's cron expression in its time zone, which is not
// parsed again. Either may be nil.
func prepare(j *Job, now time.Time, d Rules, known *jobConfig, parsed *CronSchedule) (*CronSchedule, error) {
	isHTTP := j.IsHTTP()
	if isHTTP {
		j.Type = JobTypeHTTP
		switch j.HTTP.Method {
		case "":
			j.HTTP.Method = "GET"
		case "GET", "POST", "PUT", "PATCH", "DELETE":
		default:
			j.HTTP.Method = strings.ToUpper(j.HTTP.Method)
		}
	}
	if j.Timeout == 0 {
		j.Timeout = Duration(cmp.Or(d.Timeout, DefaultTimeout))
	}
	if j.RetryBackoff == 0 {
		j.RetryBackoff = Duration(cmp.Or(d.RetryBackoff, DefaultRetryBackoff))
	}
	j.Schedule.RunAt = utc(j.Schedule.RunAt)
	j.Schedule.StartAt = utc(j.Schedule.StartAt)
	if j.Schedule.Kind == KindEvery && j.Schedule.StartAt.IsZero() {
		j.Schedule.StartAt = now.UTC()
	}
	j.LastRunAt = utc(j.LastRunAt)
	j.NextRunAt = utc(j.NextRunAt)
	j.PausedUntil = utc(j.PausedUntil)
	if !j.Paused {
		j.PausedUntil = time.Time{}
	} else if !j.PausedUntil.IsZero() && !inNanoRange(j.PausedUntil) {
		return nil, invalid("paused_until", "must be between the years 1679 and 2261, got %s", j.PausedUntil.Format(time.RFC3339))
	}
	j.PausedAt = utc(j.PausedAt)
	if !j.Paused {
		j.PausedAt = time.Time{}
	} else if !j.PausedAt.IsZero() && !inNanoRange(j.PausedAt) {
		return nil, invalid("paused_at", "must be between the years 1679 and 2261, got %s", j.PausedAt.Format(time.RFC3339))
	}

	if isHTTP {
		if err := checkHTTP(j, known); err != nil {
			return nil, err
		}
	} else if err := checkTyped(j); err != nil {
		return nil, err
	}
	if j.Timeout <= 0 {
		return nil, invalid("timeout", "must be > 0, got %s", j.Timeout)
	}
	if j.MaxRetries < 0 {
		return nil, invalid("max_retries", "must be >= 0, got %d", j.MaxRetries)
	}
	if j.MaxRetries > math.MaxUint16 {
		return nil, invalid("max_retries", "must be at most %d, got %d", math.MaxUint16, j.MaxRetries)
	}
	if j.RetryBackoff < 0 {
		return nil, invalid("retry_backoff", "must be >= 0, got %s", j.RetryBackoff)
	}
	if j.MisfireGrace < 0 {
		return nil, invalid("misfire_grace", "must be >= 0, got %s", j.MisfireGrace)
	}
	if j.KeepRuns < 0 || j.KeepRuns > maxKeepRuns {
		return nil, invalid("keep_runs", "must be from 1 to %d (0: the store's number), got %d", maxKeepRuns, j.KeepRuns)
	}
	if j.Alert != nil {
		if err := j.Alert.validate("alert", true); err != nil {
			return nil, err
		}
	}
	c, err := j.Schedule.check(parsed)
	if err != nil {
		return nil, err
	}
	if err := d.checkInterval(&j.Schedule, c); err != nil {
		return nil, err
	}
	return c, nil
}

// checkHTTP checks the fields of an HTTP job; a URL or body equal to that
// of known (a configuration that passed before; may be nil) is not checked
// again.
func checkHTTP(j *Job, known *jobConfig) error {
	if len(j.Args) > 0 {
		return invalid("args", "is for jobs that run a Go function; an HTTP job sends http.body")
	}
	if !allowedMethods[j.HTTP.Method] {
		return invalid("http.method", "must be one of GET, POST, PUT, PATCH, DELETE, got %q", j.HTTP.Method)
	}
	if known == nil || known.url != j.HTTP.URL {
		if err := validateURL("http.url", j.HTTP.URL); err != nil {
			return err
		}
	}
	// Headers are always checked: a map, unlike a string, can change.
	if err := validateHeaders(j.HTTP.Headers); err != nil {
		return err
	}
	if known == nil || known.body != j.HTTP.Body {
		return validateBody(j.HTTP.Body)
	}
	return nil
}

// checkTyped checks the fields of a job that runs a Go function, and
// compacts its args.
func checkTyped(j *Job) error {
	if err := validType(j.Type); err != nil {
		return err
	}
	if j.WritesHTTP() {
		return invalid("http", "is for jobs of type http; a job of type %q takes args", j.Type)
	}
	if len(j.Args) == 0 {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, j.Args); err != nil {
		return invalid("args", "must be a JSON value: %v", err)
	}
	if b.Len() == 4 && b.String() == "null" {
		j.Args = nil
	} else if !bytes.Equal(b.Bytes(), j.Args) {
		j.Args = b.Bytes()
	}
	return nil
}

// validType checks the name of a job type other than "http": 1 to
// [MaxTypeLen] characters among ASCII letters, digits, '-', '_', '.' and
// ':'. It returns a *ValidationError on "type".
func validType(name string) error {
	if name == "" || len(name) > MaxTypeLen {
		return invalid("type", "must be 1 to %d characters long, got %d", MaxTypeLen, len(name))
	}
	if i := badNameChar(name); i >= 0 {
		return invalid("type", "may hold only letters, digits, '-', '_', '.' and ':', got %q at offset %d", name[i:i+1], i)
	}
	return nil
}

// ValidationError names the field of a job that is wrong and why.
// Field uses the JSON names, dotted: "schedule.every", "http.url".
type ValidationError struct {
	Field  string
	Reason string
}

// Error returns "cron: invalid job: <field>: <reason>".
func (e *ValidationError) Error() string { return "cron: invalid job: " + e.Field + ": " + e.Reason }

// Is reports whether target is ErrInvalidJob.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalidJob }

func invalid(field, format string, a ...any) error {
	return &ValidationError{Field: field, Reason: fmt.Sprintf(format, a...)}
}

var allowedMethods = map[string]bool{"GET": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true}

// Validate reports whether [Job.Prepare] would accept the job under rules
// that set no minimum interval (the minimum is a runner's setting): it
// checks a copy of j with the defaults filled, and returns a
// *ValidationError naming the first bad field. It does not modify j, and
// does not look at the system fields.
func (j *Job) Validate() error {
	c := *j
	known := validated.Load()
	_, err := prepare(&c, validateNow, Rules{MinInterval: -1}, known, nil)
	if err == nil && c.IsHTTP() && (known == nil || known.url != c.HTTP.URL || known.body != c.HTTP.Body) {
		validated.Store(&jobConfig{url: c.HTTP.URL, body: c.HTTP.Body})
	}
	return err
}

// validated holds the URL and body of the last HTTP job Validate passed:
// a job with the same ones (jobs made from one template, as a store
// checks them at its start) is not checked for them again. Whether a URL
// or a body passes depends on it alone.
var validated atomic.Pointer[jobConfig]

// validateNow stands for the current time in Validate: it is only the
// start_at an every schedule would get.
var validateNow = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// validID checks a job id chosen by a caller of [Runner.Add]: 1 to
// [MaxIDLen] characters among ASCII letters, digits, '-', '_', '.' and ':',
// and not "." or "..", so that an id is always one segment of a URL path
// and of a file name. It returns a *ValidationError on "id". Jobs loaded
// from a store are not held to it: an id stored before it applied stays
// usable.
func validID(id string) error {
	if id == "" || len(id) > MaxIDLen {
		return invalid("id", "must be 1 to %d characters long, got %d", MaxIDLen, len(id))
	}
	if id == "." || id == ".." {
		return invalid("id", "must not be %q", id)
	}
	if i := badNameChar(id); i >= 0 {
		return invalid("id", "may hold only letters, digits, '-', '_', '.' and ':', got %q at offset %d", id[i:i+1], i)
	}
	return nil
}

// badNameChar returns the offset of the first byte of s that is not an
// ASCII letter, a digit, '-', '_', '.' or ':', or -1.
func badNameChar(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return i
		}
	}
	return -1
}

// validateURL checks the URL of a callback or a webhook, named field in
// the error: http or https, with a host and a port from 1 to 65535 if any.
func validateURL(field, raw string) error {
	if raw == "" {
		return invalid(field, "is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return invalid(field, "cannot be parsed: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return invalid(field, "scheme must be http or https, got %q", u.Scheme)
	}
	if u.Hostname() == "" {
		return invalid(field, "has no host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return invalid(field, "port must be a number from 1 to 65535, got %q", p)
		}
	}
	return nil
}

// validateHeaders checks a job's request headers: each name a token of
// RFC 9110 (letters, digits and !#$%&'*+-.^_`|~), each value free of
// control characters but tab; Content-Length and Transfer-Encoding, which
// the HTTP client sets from the body, are refused. Host is allowed: it
// names the virtual host the request asks for (the connection still goes
// to the URL's host).
func validateHeaders(h map[string]string) error {
	if len(h) == 0 {
		return nil // no iterator to set up
	}
	for k, v := range h {
		if k == "" {
			return invalid("http.headers", "a header name is empty")
		}
		for i := 0; i < len(k); i++ {
			if !isTokenChar(k[i]) {
				return invalid("http.headers", "header name %q holds %q, which a header name cannot", k, k[i:i+1])
			}
		}
		if strings.EqualFold(k, "content-length") || strings.EqualFold(k, "transfer-encoding") {
			return invalid("http.headers", "header %q is set by the client from the body; remove it", k)
		}
		for i := 0; i < len(v); i++ {
			if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
				return invalid("http.headers", "the value of header %q holds the control character %q", k, v[i:i+1])
			}
		}
	}
	return nil
}

func isTokenChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// placeholders are the names a body may use as {{name}} (see expandBody).
var placeholders = []string{"job_id", "run_id", "scheduled_at", "triggered_at"}

// validateBody refuses a {{name}} in a body template whose name is not a
// placeholder: it would be sent as it is. Only {{ followed by letters,
// digits or '_' and }} counts; other braces are left alone.
func validateBody(body string) error {
	for rest := body; ; {
		i := strings.Index(rest, "{{")
		if i < 0 {
			return nil
		}
		rest = rest[i+2:]
		n := 0
		for n < len(rest) && (rest[n] == '_' || 'a' <= rest[n] && rest[n] <= 'z' || 'A' <= rest[n] && rest[n] <= 'Z' || '0' <= rest[n] && rest[n] <= '9') {
			n++
		}
		if n == 0 || !strings.HasPrefix(rest[n:], "}}") {
			continue
		}
		if name := rest[:n]; !slices.Contains(placeholders, name) {
			return invalid("http.body", "unknown placeholder {{%s}}; the placeholders are {{job_id}}, {{run_id}}, {{scheduled_at}} and {{triggered_at}}", name)
		}
	}
}

// Validate checks the schedule and returns a *ValidationError naming the
// first bad field ("schedule.kind", "schedule.every", ...). A field the
// kind does not use (tz on an every schedule) is an error. Times must lie
// between the years 1679 and 2261. An every schedule with no start_at is
// valid ([Job.Prepare] gives it one).
func (s *ScheduleSpec) Validate() error {
	_, err := s.check(nil)
	return err
}

// check is Validate; for a cron schedule it returns the parsed expression:
// parsed when it is not nil (the parse of s.Cron in s.TZ), else parsed here.
func (s *ScheduleSpec) check(parsed *CronSchedule) (*CronSchedule, error) {
	if f := s.unused(); len(f) > 0 && (s.Kind == KindOnce || s.Kind == KindEvery || s.Kind == KindCron) {
		return nil, invalid("schedule."+f[0], "is not used by kind %s (%s takes %s)", s.Kind, s.Kind, kindFields[s.Kind])
	}
	switch s.Kind {
	case KindOnce:
		if s.RunAt.IsZero() {
			return nil, invalid("schedule.run_at", "is required for kind once")
		}
		if !inNanoRange(s.RunAt) {
			return nil, invalid("schedule.run_at", "must lie between the years 1679 and 2261, got %s", s.RunAt.Format(time.RFC3339))
		}
	case KindEvery:
		if s.Every <= 0 {
			return nil, invalid("schedule.every", "must be > 0, got %s", s.Every)
		}
		if s.Jitter < 0 {
			return nil, invalid("schedule.jitter", "must be >= 0, got %s", s.Jitter)
		}
		if s.Jitter >= s.Every {
			return nil, invalid("schedule.jitter", "must be less than every (%s), got %s", s.Every, s.Jitter)
		}
		if !s.StartAt.IsZero() && !inNanoRange(s.StartAt) {
			return nil, invalid("schedule.start_at", "must lie between the years 1679 and 2261, got %s", s.StartAt.Format(time.RFC3339))
		}
	case KindCron:
		if s.Cron == "" {
			return nil, invalid("schedule.cron", "is required for kind cron")
		}
		if z := s.zoneConflict(); z != "" {
			return nil, invalid("schedule.tz", "is %q but schedule.cron starts with the zone %q: give the zone once, in tz or in the expression", s.TZ, z)
		}
		if parsed != nil {
			return parsed, nil
		}
		c, err := s.parseCron()
		if err != nil {
			var ve *ValidationError
			if errors.As(err, &ve) {
				return nil, err
			}
			return nil, invalid("schedule.cron", "%s", strings.TrimPrefix(err.Error(), "cron: "))
		}
		return c, nil
	case "":
		return nil, invalid("schedule.kind", "is required: once, every or cron")
	default:
		return nil, invalid("schedule.kind", "must be once, every or cron, got %q", s.Kind)
	}
	return nil, nil
}

// kindFields lists the fields each kind takes, for error messages.
var kindFields = map[string]string{
	KindOnce:  "run_at",
	KindEvery: "every, and optionally start_at and jitter",
	KindCron:  "cron, and optionally tz",
}

// unused returns the JSON names of the fields set in s that its kind does
// not use, in the order of the JSON form.
func (s *ScheduleSpec) unused() []string {
	var out []string
	once, every, cron := s.Kind == KindOnce, s.Kind == KindEvery, s.Kind == KindCron
	if !s.RunAt.IsZero() && !once {
		out = append(out, "run_at")
	}
	if s.Every != 0 && !every {
		out = append(out, "every")
	}
	if !s.StartAt.IsZero() && !every {
		out = append(out, "start_at")
	}
	if s.Jitter != 0 && !every {
		out = append(out, "jitter")
	}
	if s.Cron != "" && !cron {
		out = append(out, "cron")
	}
	if s.TZ != "" && !cron {
		out = append(out, "tz")
	}
	return out
}

// ClearUnused clears the fields of s that its kind does not use (a tz on
// an every schedule, a run_at on a cron one) and returns their JSON names.
// [Job.Prepare] refuses such fields; a store or loader may call ClearUnused
// first, so that a job stored before that rule still loads, as it ran:
// with those fields ignored. An unknown kind is left alone.
func (s *ScheduleSpec) ClearUnused() []string {
	if s.Kind != KindOnce && s.Kind != KindEvery && s.Kind != KindCron {
		return nil
	}
	f := s.unused()
	for _, name := range f {
		switch name {
		case "run_at":
			s.RunAt = time.Time{}
		case "every":
			s.Every = 0
		case "start_at":
			s.StartAt = time.Time{}
		case "jitter":
			s.Jitter = 0
		case "cron":
			s.Cron = ""
		case "tz":
			s.TZ = ""
		}
	}
	return f
}

// zoneConflict returns the zone of a CRON_TZ= or TZ= prefix of s.Cron
// when s.TZ names another one; "" when they agree or either is absent.
func (s *ScheduleSpec) zoneConflict() string {
	if s.TZ == "" {
		return ""
	}
	z := cronPrefixZone(s.Cron)
	if z == "" || z == s.TZ {
		return ""
	}
	return z
}

// parseCron parses the expression of a cron spec in its time zone.
func (s *ScheduleSpec) parseCron() (*CronSchedule, error) {
	var loc *time.Location
	if s.TZ != "" {
		l, err := time.LoadLocation(s.TZ)
		if err != nil {
			return nil, invalid("schedule.tz", "unknown time zone %q", s.TZ)
		}
		loc = l
	}
	return parseCronIn(s.Cron, loc)
}

// Build turns the spec into a Schedule. seed spreads the jitter of an every
// schedule (see seedFor). An every spec with no StartAt gets its grid from
// the zero time: set StartAt (the runner sets it to the creation time) first.
func (s *ScheduleSpec) Build(seed uint64) (Schedule, error) {
	switch s.Kind {
	case KindOnce:
		return onceSchedule{At: s.RunAt}, nil
	case KindEvery:
		return everySchedule{Interval: s.Every.D(), Start: s.StartAt, Jitter: s.Jitter.D(), Seed: seed}, nil
	case KindCron:
		return s.parseCron()
	}
	return nil, invalid("schedule.kind", "must be once, every or cron, got %q", s.Kind)
}

func strictUnmarshal(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, invalid(field, "must be an RFC3339 time, got %q", s)
	}
	return t.UTC(), nil
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}
