package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// RequestError is a request the API refuses: the HTTP status, a message and,
// when one field is at fault, its JSON name (dotted: "schedule.every").
// It is what the error body {"error": ..., "field": ...} carries.
type RequestError struct {
	Status int
	Field  string
	Msg    string
	// Code names a condition a client may branch on, when there is one
	// ("run_in_flight", "idempotency_key_reused"); it is the error
	// body's "code".
	Code string
}

// Error returns the field and the message.
func (e *RequestError) Error() string {
	if e.Field != "" {
		return e.Field + ": " + e.Msg
	}
	return e.Msg
}

func badField(field, format string, a ...any) *RequestError {
	return &RequestError{Status: 400, Field: field, Msg: fmt.Sprintf(format, a...)}
}

// systemFields are maintained by the runner and refused on input:
// paused_until is set by POST /jobs/{id}/pause?until= alone, paused_at
// by the pause of the job.
var systemFields = map[string]bool{"paused_until": true, "paused_at": true, "last_run_at": true, "next_run_at": true, "last_status": true, "last_error": true,
	"failures": true, "last_alert": true}

// patch is a decoded job body: the fields present, each already parsed.
type patch struct {
	present map[string]bool

	id, name, typ string
	enabled       bool
	http          cron.HTTPConfig
	args          json.RawMessage
	schedule      cron.ScheduleSpec
	timeout       cron.Duration
	maxRetries    int
	keepRuns      int
	retryBackoff  cron.Duration
	misfireGrace  cron.Duration
	alert         *cron.AlertConfig
}

func (p *patch) has(field string) bool { return p.present[field] }

// decodeJobBody parses a job object as sent to POST /jobs or PATCH
// /jobs/{id}. Unknown fields, system fields and values of the wrong type
// are errors naming the field.
func decodeJobBody(body []byte) (*patch, *RequestError) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, &RequestError{Status: 400, Msg: "empty body: a JSON object is required"}
	}
	var raw map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader(body))
	if err := d.Decode(&raw); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, &RequestError{Status: 400, Msg: "body must be a JSON object"}
		}
		return nil, &RequestError{Status: 400, Msg: "malformed JSON: " + err.Error()}
	}
	if raw == nil {
		return nil, &RequestError{Status: 400, Msg: "body must be a JSON object"}
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, &RequestError{Status: 400, Msg: "malformed JSON: data after the object"}
	}
	p := &patch{present: make(map[string]bool, len(raw))}
	// Report fields in a stable order: the order of the job's JSON form.
	for _, field := range fieldOrder(raw) {
		v := raw[field]
		if systemFields[field] {
			return nil, badField(field, "is a system field, maintained by the service; it cannot be set")
		}
		var rerr *RequestError
		switch field {
		case "id":
			rerr = decodeString(field, v, &p.id)
		case "name":
			rerr = decodeString(field, v, &p.name)
		case "type":
			rerr = decodeString(field, v, &p.typ)
		case "enabled":
			if err := json.Unmarshal(v, &p.enabled); err != nil || string(v) == "null" {
				rerr = badField(field, "must be true or false, got %s", short(v))
			}
		case "max_retries":
			if err := json.Unmarshal(v, &p.maxRetries); err != nil || string(v) == "null" {
				rerr = badField(field, "must be an integer, got %s", short(v))
			}
		case "keep_runs":
			if err := json.Unmarshal(v, &p.keepRuns); err != nil || string(v) == "null" {
				rerr = badField(field, "must be an integer, got %s", short(v))
			}
		case "timeout":
			rerr = decodeDuration(field, v, &p.timeout)
		case "retry_backoff":
			rerr = decodeDuration(field, v, &p.retryBackoff)
		case "misfire_grace":
			rerr = decodeDuration(field, v, &p.misfireGrace)
		case "http":
			rerr = decodeHTTP(v, &p.http)
		case "args":
			if string(v) != "null" {
				p.args = v
			}
		case "schedule":
			rerr = decodeSchedule(v, &p.schedule)
		case "alert":
			rerr = decodeAlert(v, &p.alert)
		default:
			return nil, badField(field, "unknown field")
		}
		if rerr != nil {
			return nil, rerr
		}
		p.present[field] = true
	}
	return p, nil
}

var jobFieldOrder = []string{"id", "name", "enabled", "paused_until", "paused_at", "type", "http", "args", "schedule", "timeout", "max_retries",
	"retry_backoff", "misfire_grace", "alert", "keep_runs", "last_run_at", "next_run_at", "last_status", "last_error", "failures", "last_alert"}

func fieldOrder(raw map[string]json.RawMessage) []string {
	out := make([]string, 0, len(raw))
	known := make(map[string]bool, len(jobFieldOrder))
	for _, f := range jobFieldOrder {
		known[f] = true
		if _, ok := raw[f]; ok {
			out = append(out, f)
		}
	}
	var unknown []string
	for f := range raw {
		if !known[f] {
			unknown = append(unknown, f)
		}
	}
	// Unknown fields first: they are the likelier mistake (a typo).
	slices.Sort(unknown)
	return append(unknown, out...)
}

func short(v json.RawMessage) string {
	s := string(v)
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return s
}

func decodeString(field string, v json.RawMessage, dst *string) *RequestError {
	if err := json.Unmarshal(v, dst); err != nil || string(v) == "null" {
		return badField(field, "must be a string, got %s", short(v))
	}
	return nil
}

func decodeDuration(field string, v json.RawMessage, dst *cron.Duration) *RequestError {
	var s string
	if err := json.Unmarshal(v, &s); err != nil || string(v) == "null" {
		return badField(field, "must be a duration string such as \"5s\", got %s", short(v))
	}
	if s == "" {
		*dst = 0
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return badField(field, "must be a duration such as \"5s\" or \"1m30s\", got %q", s)
	}
	*dst = cron.Duration(d)
	return nil
}

func decodeTime(field string, s string, dst *time.Time) *RequestError {
	if s == "" {
		*dst = time.Time{}
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return badField(field, "must be an RFC3339 time such as \"2026-01-02T15:04:05Z\", got %q", s)
	}
	*dst = t.UTC()
	return nil
}

// strictObject decodes an object into dst, refusing unknown fields, and
// names the field at fault with prefix.
func strictObject(prefix string, v json.RawMessage, dst any) *RequestError {
	if string(bytes.TrimSpace(v)) == "null" || len(v) == 0 || v[0] != '{' {
		return badField(prefix, "must be an object, got %s", short(v))
	}
	d := json.NewDecoder(bytes.NewReader(v))
	d.DisallowUnknownFields()
	if err := d.Decode(dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return badField(prefix+"."+te.Field, "must be a %s", jsonKind(te.Type.Kind().String()))
		}
		const p = `json: unknown field "`
		if s := err.Error(); strings.HasPrefix(s, p) {
			return badField(prefix+"."+strings.TrimSuffix(s[len(p):], `"`), "unknown field")
		}
		return badField(prefix, "%v", err)
	}
	return nil
}

func jsonKind(k string) string {
	switch k {
	case "map", "struct":
		return "object"
	case "int", "int64":
		return "number"
	}
	return k
}

// httpBody is the http object of a job body.
type httpBody struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

// scheduleBody is the schedule object of a job body.
type scheduleBody struct {
	Kind    string `json:"kind"`
	RunAt   string `json:"run_at"`
	Every   string `json:"every"`
	StartAt string `json:"start_at"`
	Jitter  string `json:"jitter"`
	Cron    string `json:"cron"`
	TZ      string `json:"tz"`
}

func decodeHTTP(v json.RawMessage, dst *cron.HTTPConfig) *RequestError {
	var h httpBody
	if err := strictObject("http", v, &h); err != nil {
		return err
	}
	*dst = cron.HTTPConfig{Method: h.Method, URL: h.URL, Headers: h.Headers, Body: h.Body}
	return nil
}

// alertBody is the alert object of a job body.
type alertBody struct {
	URL        string `json:"url"`
	Secret     string `json:"secret"`
	After      int    `json:"after"`
	PauseAfter int    `json:"pause_after"`
	// MissedEvery is a duration such as "5m"; negative: no missed alerts.
	MissedEvery string `json:"missed_every"`
	Notify      string `json:"notify"`
}

// decodeAlert reads the alert object; null is no alert of the job's own.
func decodeAlert(v json.RawMessage, dst **cron.AlertConfig) *RequestError {
	if string(bytes.TrimSpace(v)) == "null" {
		*dst = nil
		return nil
	}
	var a alertBody
	if err := strictObject("alert", v, &a); err != nil {
		return err
	}
	*dst = &cron.AlertConfig{URL: a.URL, Secret: a.Secret, After: a.After, PauseAfter: a.PauseAfter, Notify: a.Notify}
	if a.MissedEvery != "" {
		d, err := time.ParseDuration(a.MissedEvery)
		if err != nil {
			return badField("alert.missed_every", "must be a duration such as \"5m\" (negative: no missed alerts), got %q", a.MissedEvery)
		}
		(*dst).MissedEvery = cron.Duration(d)
	}
	return nil
}

func decodeSchedule(v json.RawMessage, dst *cron.ScheduleSpec) *RequestError {
	var s scheduleBody
	if err := strictObject("schedule", v, &s); err != nil {
		return err
	}
	out := cron.ScheduleSpec{Kind: s.Kind, Cron: s.Cron, TZ: s.TZ}
	if err := decodeTime("schedule.run_at", s.RunAt, &out.RunAt); err != nil {
		return err
	}
	if err := decodeTime("schedule.start_at", s.StartAt, &out.StartAt); err != nil {
		return err
	}
	for _, d := range []struct {
		field string
		s     string
		dst   *cron.Duration
	}{{"schedule.every", s.Every, &out.Every}, {"schedule.jitter", s.Jitter, &out.Jitter}} {
		if d.s == "" {
			continue
		}
		x, err := time.ParseDuration(d.s)
		if err != nil {
			return badField(d.field, "must be a duration such as \"5m\", got %q", d.s)
		}
		*d.dst = cron.Duration(x)
	}
	*dst = out
	return nil
}

// apply copies the present fields of p onto j. schedule and http replace
// the job's whole objects.
func (p *patch) apply(j *cron.Job) {
	if p.has("name") {
		j.Name = p.name
	}
	if p.has("enabled") {
		j.Paused = !p.enabled
	}
	if p.has("type") {
		j.Type = p.typ
	}
	if p.has("http") {
		j.HTTP = p.http
	}
	if p.has("args") {
		j.Args = p.args
	}
	if p.has("schedule") {
		j.Schedule = p.schedule
	}
	if p.has("timeout") {
		j.Timeout = p.timeout
	}
	if p.has("max_retries") {
		j.MaxRetries = p.maxRetries
	}
	if p.has("retry_backoff") {
		j.RetryBackoff = p.retryBackoff
	}
	if p.has("misfire_grace") {
		j.MisfireGrace = p.misfireGrace
	}
	if p.has("alert") {
		j.Alert = p.alert
	}
	if p.has("keep_runs") {
		j.KeepRuns = p.keepRuns
	}
}

// decodeMergePatch reads a PATCH body: a JSON merge patch (RFC 7396) of
// the job's JSON form. Its own fields are checked here (an unknown or
// system field, an id other than the path's); the values are checked once
// merged, as a create body is.
func decodeMergePatch(body []byte, id string) (map[string]any, *RequestError) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, &RequestError{Status: 400, Msg: "empty body: a JSON object is required"}
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var patch map[string]any
	if err := d.Decode(&patch); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, &RequestError{Status: 400, Msg: "body must be a JSON object"}
		}
		return nil, &RequestError{Status: 400, Msg: "malformed JSON: " + err.Error()}
	}
	if patch == nil {
		return nil, &RequestError{Status: 400, Msg: "body must be a JSON object"}
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, &RequestError{Status: 400, Msg: "malformed JSON: data after the object"}
	}
	known := make(map[string]bool, len(jobFieldOrder))
	for _, f := range jobFieldOrder {
		known[f] = true
	}
	raw := make(map[string]json.RawMessage, len(patch))
	for k := range patch {
		raw[k] = nil
	}
	for _, field := range fieldOrder(raw) {
		switch {
		case !known[field]:
			return nil, badField(field, "unknown field")
		case systemFields[field]:
			return nil, badField(field, "is a system field, maintained by the service; it cannot be set")
		case field == "id" && patch[field] != id:
			return nil, badField("id", "cannot be changed (the path names job %q)", id)
		}
	}
	return patch, nil
}

// mergeJob applies a merge patch to the JSON form of j, without its system
// fields, and returns the merged document. A schedule in the patch whose
// kind differs from the job's replaces the job's schedule whole: the old
// kind's fields (every, run_at, cron, ...) mean nothing to the new kind.
func mergeJob(j *cron.Job, patch map[string]any) ([]byte, *RequestError) {
	cur, err := j.MarshalJSON()
	if err != nil {
		return nil, &RequestError{Status: 500, Msg: "encoding the job: " + err.Error()}
	}
	d := json.NewDecoder(bytes.NewReader(cur))
	d.UseNumber()
	var doc map[string]any
	if err := d.Decode(&doc); err != nil {
		return nil, &RequestError{Status: 500, Msg: "decoding the job: " + err.Error()}
	}
	for f := range systemFields {
		delete(doc, f)
	}
	if sp, ok := patch["schedule"].(map[string]any); ok {
		if kind, ok := sp["kind"].(string); ok && kind != j.Schedule.Kind {
			delete(doc, "schedule")
		}
	}
	merged, err := json.Marshal(mergePatch(doc, patch))
	if err != nil {
		return nil, &RequestError{Status: 500, Msg: "encoding the merged job: " + err.Error()}
	}
	return merged, nil
}

// mergePatch applies patch to target as RFC 7396 says: an object patch
// merges into an object field by field, at every depth; null removes a
// field; any other value replaces the target.
func mergePatch(target any, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = mergePatch(t[k], v)
	}
	return t
}
