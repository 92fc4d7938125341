package jsonstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// File names inside the data directory.
const (
	JobsFile = "jobs.json"     // the jobs, in the format of FormatVersion
	RunsFile = "runs.jsonl"    // run history: one JSON run per line, appended
	BadFile  = "jobs.bad.json" // where a jobs.json that cannot be read is moved
)

// FormatVersion is the value of the top-level "version" field of jobs.json
// that this package reads and writes.
const FormatVersion = 1

// fileJob mirrors a job of jobs.json with plain strings for times and
// durations, so that a bad value is reported with the field it sits in.
// Its fields are cron.Job's JSON form; FuzzCodecs fails when a field of
// cron.Job is missing here, in appendJob or in the fast decoder.
type fileJob struct {
	ID           string            `json:"id"`
	Name         string            `json:"name"`
	Enabled      bool              `json:"enabled"`
	PausedUntil  string            `json:"paused_until"`
	PausedAt     string            `json:"paused_at"`
	Type         string            `json:"type"`
	HTTP         fileHTTP          `json:"http"`
	Args         json.RawMessage   `json:"args"`
	Schedule     fileSchedule      `json:"schedule"`
	Timeout      string            `json:"timeout"`
	MaxRetries   int               `json:"max_retries"`
	RetryBackoff string            `json:"retry_backoff"`
	MisfireGrace string            `json:"misfire_grace"`
	Alert        *cron.AlertConfig `json:"alert"`
	KeepRuns     int               `json:"keep_runs"`
	LastRunAt    string            `json:"last_run_at"`
	NextRunAt    string            `json:"next_run_at"`
	LastStatus   string            `json:"last_status"`
	LastError    string            `json:"last_error"`
	Failures     int               `json:"failures"`
	LastAlert    string            `json:"last_alert"`
}

type fileHTTP struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

type fileSchedule struct {
	Kind    string `json:"kind"`
	RunAt   string `json:"run_at"`
	Every   string `json:"every"`
	StartAt string `json:"start_at"`
	Jitter  string `json:"jitter"`
	Cron    string `json:"cron"`
	TZ      string `json:"tz"`
}

// EntryError reports a job of jobs.json that was skipped at load: the id
// (empty when the entry had none), its position in the file, and why.
type EntryError struct {
	Index int    // position in the "jobs" array, from 0
	ID    string // the entry's id, "" when it has none
	Field string // the JSON field at fault, dotted ("schedule.every"), "" when unknown
	Err   error
}

// Error names the entry, the field and the reason.
func (e *EntryError) Error() string {
	id := e.ID
	if id == "" {
		id = "#" + strconv.Itoa(e.Index)
	}
	if e.Field != "" {
		return fmt.Sprintf("jsonstore: job %s skipped: field %s: %v", id, e.Field, e.Err)
	}
	return fmt.Sprintf("jsonstore: job %s skipped: %v", id, e.Err)
}

// Unwrap returns the underlying error.
func (e *EntryError) Unwrap() error { return e.Err }

// decodeFile reads the contents of jobs.json. A file that does not parse or
// has an unknown version returns an error (and no jobs); entries that parse
// but are invalid are returned as EntryErrors beside the good jobs.
func decodeFile(data []byte) ([]cron.Job, []*EntryError, error) {
	var parts [2][]cron.Job
	good, bad, err := decodeFileTo(data, func(part, k int, j cron.Job, ok bool) string {
		if k == len(parts[part]) {
			parts[part] = append(parts[part], cron.Job{})
		}
		parts[part][k] = j
		return j.ID
	}, newSeenSet)
	if err != nil {
		return nil, nil, err
	}
	out := make([]cron.Job, len(good))
	for i, g := range good {
		out[i] = parts[g.part][g.k]
	}
	return out, bad, nil
}

// jobPos is where decodeFileTo put a job: the k-th of part 0 or 1.
type jobPos struct{ part, k int }

// decodeFileTo is decodeFile handing each entry to put instead of
// returning them: put(part, k, j, ok) stores job j as the k-th of part 0
// or 1 (called for k = 0, 1, 2... in order within a part, the two parts
// concurrently), or drops it again when ok is false (a repeated id), and
// returns its id. It returns the positions of the good jobs, in file
// order: part 0's, then part 1's.
//
// The first of the jobs of one id is kept: once every entry is decoded,
// seen(n) gives the set that tells, for each good job in file order,
// whether its id is new (n is how many there are at most).
//
// The file is read by a decoder without reflection when it can
// (fastDecodeEach, on two goroutines for a large file, each converting
// the jobs it reads); else the top level is read as a token stream that
// only splits the jobs array into its entries, which are then decoded
// strictly (unknown fields are errors).
func decodeFileTo(data []byte, put func(part, k int, j cron.Job, ok bool) string, seen func(n int) firstSet) ([]jobPos, []*EntryError, error) {
	var ids [2][]string
	var errs [2][]*EntryError
	// Room for the jobs of each half of the file, if a job takes 256
	// bytes or more: the lists do not grow by copies (at a million jobs
	// those copies took a tenth of a start).
	for part := range ids {
		ids[part] = make([]string, 0, len(data)/2/256+16)
		errs[part] = make([]*EntryError, 0, cap(ids[part]))
	}
	version, n, ok := fastDecodeEach(data, func(part, k int, fj *fileJob) {
		j, ee := convertJob(k, fj)
		if ee != nil {
			put(part, k, cron.Job{}, false)
			ids[part] = append(ids[part], "")
		} else {
			ids[part] = append(ids[part], put(part, k, j, true))
		}
		errs[part] = append(errs[part], ee)
	})
	if ok {
		if version != FormatVersion {
			return nil, nil, fmt.Errorf("jsonstore: unknown version %d (want %d)", version, FormatVersion)
		}
		for _, ee := range errs[1][:n[1]] {
			if ee != nil {
				ee.Index += n[0]
			}
		}
		good, bad := dropRepeated(n, ids, errs, put, seen(n[0]+n[1]))
		return good, bad, nil
	}
	version, raws, err := splitFile(data)
	if err != nil {
		return nil, nil, fmt.Errorf("jsonstore: %s does not parse: %w", JobsFile, err)
	}
	if version != FormatVersion {
		return nil, nil, fmt.Errorf("jsonstore: unknown version %d (want %d)", version, FormatVersion)
	}
	ids, errs = [2][]string{}, [2][]*EntryError{}
	for i := range raws {
		j, ee := decodeEntry(i, raws[i])
		if ee != nil {
			put(0, i, cron.Job{}, false)
			ids[0] = append(ids[0], "")
		} else {
			ids[0] = append(ids[0], put(0, i, j, true))
		}
		errs[0] = append(errs[0], ee)
	}
	good, bad := dropRepeated([2]int{len(raws), 0}, ids, errs, put, seen(len(raws)))
	return good, bad, nil
}

// firstSet records the ids of the jobs kept: first reports whether id,
// that of the k-th job of part, is new, and records it.
type firstSet interface {
	first(part, k int, id string) bool
}

// seenSet is a firstSet of its own.
type seenSet map[string]struct{}

func newSeenSet(n int) firstSet { return make(seenSet, n) }

func (m seenSet) first(_, _ int, id string) bool {
	if _, dup := m[id]; dup {
		return false
	}
	m[id] = struct{}{}
	return true
}

// dropRepeated returns the positions of the good jobs and the errors of
// the bad ones, in file order, dropping (through put) a job whose id an
// earlier one has.
func dropRepeated(n [2]int, ids [2][]string, errs [2][]*EntryError, put func(part, k int, j cron.Job, ok bool) string, seen firstSet) ([]jobPos, []*EntryError) {
	var bad []*EntryError
	good := make([]jobPos, 0, n[0]+n[1])
	for part := range 2 {
		for k := range n[part] {
			ee := errs[part][k]
			id := ids[part][k]
			if ee == nil && !seen.first(part, k, id) {
				ee = &EntryError{Index: k + part*n[0], ID: id, Field: "id", Err: errors.New("appears twice; the first entry is kept")}
				put(part, k, cron.Job{}, false)
			}
			if ee != nil {
				bad = append(bad, ee)
				continue
			}
			good = append(good, jobPos{part, k})
		}
	}
	return good, bad
}

// splitFile reads the top-level object: the version and the raw entries of
// "jobs". Other top-level fields are ignored.
func splitFile(data []byte) (int, []json.RawMessage, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	expect := func(want json.Delim) error {
		tok, err := d.Token()
		if err != nil {
			return err
		}
		if tok != want {
			return fmt.Errorf("want %q, got %v", want, tok)
		}
		return nil
	}
	if err := expect('{'); err != nil {
		return 0, nil, err
	}
	version := 0
	var raws []json.RawMessage
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return 0, nil, err
		}
		switch tok {
		case "version":
			if err := d.Decode(&version); err != nil {
				return 0, nil, fmt.Errorf("version: %w", err)
			}
		case "jobs":
			if err := expect('['); err != nil {
				return 0, nil, fmt.Errorf("jobs: %w", err)
			}
			for d.More() {
				var raw json.RawMessage
				if err := d.Decode(&raw); err != nil {
					return 0, nil, fmt.Errorf("jobs[%d]: %w", len(raws), err)
				}
				raws = append(raws, raw)
			}
			if err := expect(']'); err != nil {
				return 0, nil, err
			}
		default:
			var skip json.RawMessage
			if err := d.Decode(&skip); err != nil {
				return 0, nil, err
			}
		}
	}
	if err := expect('}'); err != nil {
		return 0, nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return 0, nil, errors.New("data after the top-level object")
	}
	return version, raws, nil
}

// decodeEntry decodes and validates one entry of the jobs array.
func decodeEntry(i int, raw []byte) (cron.Job, *EntryError) {
	fj, err := strictFileJob(raw)
	if err != nil {
		var idOnly struct {
			ID any `json:"id"`
		}
		_ = json.Unmarshal(raw, &idOnly)
		id, _ := idOnly.ID.(string)
		return cron.Job{}, &EntryError{Index: i, ID: id, Field: jsonErrorField(err), Err: err}
	}
	return convertJob(i, &fj)
}

// strictFileJob decodes one entry of the jobs array; unknown fields are
// errors.
func strictFileJob(raw []byte) (fileJob, error) {
	var fj fileJob
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	err := d.Decode(&fj)
	return fj, err
}

// jsonErrorField names the field an encoding/json error is about, if any.
func jsonErrorField(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return te.Field
	}
	const p = `json: unknown field "`
	if s := err.Error(); len(s) > len(p) && s[:len(p)] == p {
		return s[len(p) : len(s)-1]
	}
	return ""
}

func convertJob(i int, f *fileJob) (cron.Job, *EntryError) {
	fail := func(field string, err error) (cron.Job, *EntryError) {
		return cron.Job{}, &EntryError{Index: i, ID: f.ID, Field: field, Err: err}
	}
	if f.ID == "" {
		return fail("id", errors.New("is empty"))
	}
	j, field, err := f.job()
	if err != nil {
		return fail(field, err)
	}
	// A schedule field its kind does not use was ignored before the rule
	// that refuses it: such a job loads as it ran.
	j.Schedule.ClearUnused()
	if err := j.Validate(); err != nil {
		var ve *cron.ValidationError
		if errors.As(err, &ve) {
			return fail(ve.Field, errors.New(ve.Reason))
		}
		return fail("", err)
	}
	switch j.LastStatus {
	case "", cron.StatusSuccess, cron.StatusFailed, cron.StatusTimeout, cron.StatusSkipped, cron.StatusPaused, cron.StatusMissed:
	default:
		return fail("last_status", fmt.Errorf("unknown status %q", j.LastStatus))
	}
	return j, nil
}

// job parses the times and durations of f into a job, or names the first
// field that does not parse. It checks nothing else (convertJob does).
func (f *fileJob) job() (j cron.Job, field string, err error) {
	j = cron.Job{
		ID: f.ID, Name: f.Name, Paused: !f.Enabled, Type: f.Type,
		HTTP:       cron.HTTPConfig{Method: f.HTTP.Method, URL: f.HTTP.URL, Headers: f.HTTP.Headers, Body: f.HTTP.Body},
		MaxRetries: f.MaxRetries, KeepRuns: f.KeepRuns, LastStatus: cron.Status(f.LastStatus), LastError: f.LastError,
		Alert: f.Alert, Failures: f.Failures, LastAlert: f.LastAlert,
	}
	if len(f.Args) > 0 && string(f.Args) != "null" {
		j.Args = f.Args
	}
	j.Schedule.Kind, j.Schedule.Cron, j.Schedule.TZ = f.Schedule.Kind, f.Schedule.Cron, f.Schedule.TZ
	// Field by field, with no pointer into j: j stays on the stack.
	var ok bool
	if j.Schedule.RunAt, ok = parseTimeField(f.Schedule.RunAt); !ok {
		field = "schedule.run_at"
	} else if j.Schedule.StartAt, ok = parseTimeField(f.Schedule.StartAt); !ok {
		field = "schedule.start_at"
	} else if j.LastRunAt, ok = parseTimeField(f.LastRunAt); !ok {
		field = "last_run_at"
	} else if j.NextRunAt, ok = parseTimeField(f.NextRunAt); !ok {
		field = "next_run_at"
	} else if j.PausedUntil, ok = parseTimeField(f.PausedUntil); !ok {
		field = "paused_until"
	} else if j.PausedAt, ok = parseTimeField(f.PausedAt); !ok {
		field = "paused_at"
	}
	if field != "" {
		return cron.Job{}, field, fmt.Errorf("must be an RFC3339 time, got %q", timeFieldValue(f, field))
	}
	if j.Schedule.Every, ok = parseDurationField(f.Schedule.Every); !ok {
		field = "schedule.every"
	} else if j.Schedule.Jitter, ok = parseDurationField(f.Schedule.Jitter); !ok {
		field = "schedule.jitter"
	} else if j.Timeout, ok = parseDurationField(f.Timeout); !ok {
		field = "timeout"
	} else if j.RetryBackoff, ok = parseDurationField(f.RetryBackoff); !ok {
		field = "retry_backoff"
	} else if j.MisfireGrace, ok = parseDurationField(f.MisfireGrace); !ok {
		field = "misfire_grace"
	}
	if field != "" {
		return cron.Job{}, field, fmt.Errorf("must be a duration such as \"5s\", got %q", durationFieldValue(f, field))
	}
	return j, "", nil
}

// parseTimeField parses an RFC3339 time of jobs.json ("" is the zero time).
func parseTimeField(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, true
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// parseDurationField parses a duration of jobs.json ("" is 0).
func parseDurationField(s string) (cron.Duration, bool) {
	if s == "" {
		return 0, true
	}
	d, err := time.ParseDuration(s)
	return cron.Duration(d), err == nil
}

func timeFieldValue(f *fileJob, field string) string {
	switch field {
	case "schedule.run_at":
		return f.Schedule.RunAt
	case "schedule.start_at":
		return f.Schedule.StartAt
	case "last_run_at":
		return f.LastRunAt
	case "paused_until":
		return f.PausedUntil
	case "paused_at":
		return f.PausedAt
	}
	return f.NextRunAt
}

func durationFieldValue(f *fileJob, field string) string {
	switch field {
	case "schedule.every":
		return f.Schedule.Every
	case "schedule.jitter":
		return f.Schedule.Jitter
	case "timeout":
		return f.Timeout
	case "retry_backoff":
		return f.RetryBackoff
	}
	return f.MisfireGrace
}

// appendHeader appends the start of jobs.json, up to the jobs array.
func appendHeader(b []byte, now time.Time) []byte {
	b = append(b, "{\n  \"version\": "...)
	b = strconv.AppendInt(b, FormatVersion, 10)
	b = append(b, ",\n  \"updated_at\": "...)
	b = appendTime(b, now)
	return append(b, ",\n  \"jobs\": "...)
}

// appendFooter appends the end of jobs.json after jobs entries written as
// "[\n    {job}" and ",\n    {job}".
func appendFooter(b []byte, jobs int) []byte {
	if jobs == 0 {
		return append(b, "[]\n}\n"...)
	}
	return append(b, "\n  ]\n}\n"...)
}

// appendDocument appends the whole jobs.json document to b: the header, one
// already-encoded job per line, the footer.
func appendDocument(b []byte, now time.Time, jobs [][]byte) []byte {
	b = append(b, "{\n  \"version\": "...)
	b = strconv.AppendInt(b, FormatVersion, 10)
	b = append(b, ",\n  \"updated_at\": "...)
	b = appendTime(b, now)
	if len(jobs) == 0 {
		return append(b, ",\n  \"jobs\": []\n}\n"...)
	}
	b = append(b, ",\n  \"jobs\": [\n"...)
	for i, enc := range jobs {
		b = append(b, "    "...)
		b = append(b, enc...)
		if i < len(jobs)-1 {
			b = append(b, ',')
		}
		b = append(b, '\n')
	}
	return append(b, "  ]\n}\n"...)
}

func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil // directories cannot be synced there; the rename is durable as NTFS makes it
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	// Some systems cannot sync a directory; the rename is then as durable
	// as the system makes it.
	if err != nil && (errors.Is(err, os.ErrInvalid) || errors.Is(err, errors.ErrUnsupported)) {
		return nil
	}
	return err
}

// backupName returns a path in dir for a backup of jobs.json that does not
// exist yet: jobs.bad.json first, then jobs.bad-<UTC timestamp>.json, then
// the same with -2, -3, ... appended.
func backupName(dir string, now time.Time, allowPlain bool) string {
	if allowPlain {
		p := filepath.Join(dir, BadFile)
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			return p
		}
	}
	stamp := now.UTC().Format("20060102T150405Z")
	for n := 1; ; n++ {
		name := "jobs.bad-" + stamp + ".json"
		if n > 1 {
			name = "jobs.bad-" + stamp + "-" + strconv.Itoa(n) + ".json"
		}
		p := filepath.Join(dir, name)
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			return p
		}
	}
}

// moveAside renames jobs.json to a fresh backup name and returns it. It uses
// a hard link and then removes the original, so an existing backup is never
// replaced even by a concurrent one; where links are not supported it
// falls back to a rename after checking the name is free.
func moveAside(dir string, now time.Time) (string, error) {
	src := filepath.Join(dir, JobsFile)
	for range 100 {
		dst := backupName(dir, now, true)
		err := os.Link(src, dst)
		if err == nil {
			if err := os.Remove(src); err != nil {
				return dst, err
			}
			return dst, syncDir(dir)
		}
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err := os.Rename(src, dst); err != nil {
			return "", err
		}
		return dst, syncDir(dir)
	}
	return "", errors.New("jsonstore: no free backup name")
}

// copyAside writes data to a fresh jobs.bad-<timestamp>.json (created
// exclusively, 0600, synced) and returns its path.
func copyAside(dir string, now time.Time, data []byte) (string, error) {
	for range 100 {
		dst := backupName(dir, now, false)
		f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		if _, err = f.Write(data); err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", err
		}
		return dst, syncDir(dir)
	}
	return "", errors.New("jsonstore: no free backup name")
}
