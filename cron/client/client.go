package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// ErrUnauthorized is matched by an *[APIError] of status 401: the token is
// missing or wrong.
var ErrUnauthorized = errors.New("client: missing or wrong API token")

// ErrForbidden is matched by an *[APIError] of status 403: the token's
// role is too small for the request ([APIError.Role] names the one needed).
var ErrForbidden = errors.New("client: the token's role does not allow this")

// APIError is an answer of the API other than 2xx.
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Message is the API's message ("error" of its answer), or the status
	// text and the start of the body when the answer was not the API's
	// JSON error.
	Message string
	// Field is the JSON name of the field at fault, dotted
	// ("schedule.every"), or "" when the error is not about one field.
	Field string
	// Role is, on a 403, the role the request needs: viewer, operator or
	// admin.
	Role string
	// Code names the condition when the API names one ("code" of its
	// answer): "run_in_flight" (409), "idempotency_key_reused" (422).
	Code string
	// Method and Path are those of the request.
	Method, Path string
	// invalid: a 400 of a request that writes or checks a job.
	invalid bool
}

// Error returns the status, the field and the message.
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ksana API: %s %s: %d", e.Method, e.Path, e.Status)
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	b.WriteString(": " + e.Message)
	return b.String()
}

// Is reports whether e is of the condition target names: [cron.ErrNotFound]
// (404), [cron.ErrExists] (409 of a create), [cron.ErrInFlight] (409
// run_in_flight of a run-now), [cron.ErrInvalidJob] (400 on a create, a
// patch or a preview), [cron.ErrUnavailable] (503), [ErrUnauthorized] (401),
// [ErrForbidden] (403).
func (e *APIError) Is(target error) bool {
	switch target {
	case cron.ErrNotFound:
		return e.Status == http.StatusNotFound
	case cron.ErrExists:
		return e.Status == http.StatusConflict && e.Code == ""
	case cron.ErrInFlight:
		return e.Status == http.StatusConflict && e.Code == "run_in_flight"
	case cron.ErrInvalidJob:
		return e.Status == http.StatusBadRequest && e.invalid
	case cron.ErrUnavailable:
		return e.Status == http.StatusServiceUnavailable
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	case ErrForbidden:
		return e.Status == http.StatusForbidden
	}
	return false
}

// Client calls the API of one service. Make it with [New].
type Client struct {
	base  *url.URL
	hc    *http.Client
	token string
}

// New returns a client of the API at baseURL (such as
// "http://127.0.0.1:7100", or a URL with a path where the API is mounted),
// calling it with hc (nil: http.DefaultClient) and sending token as
// "Authorization: Bearer <token>" when it is not "".
func New(baseURL string, hc *http.Client, token string) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("client: base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q: want http:// or https:// and a host", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("client: base URL %q: no query or fragment", baseURL)
	}
	if strings.TrimSpace(token) != token {
		return nil, errors.New("client: the token must not start or end with white space")
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: u, hc: hc, token: token}, nil
}

// maxAnswer bounds the answer read: a list of 1000 jobs fits many times.
const maxAnswer = 256 << 20

// do sends a request to path (escaped, relative to the base) with query q
// and body (nil: none; []byte: sent as it is; else encoded as JSON), and
// decodes a 2xx answer into out (nil: discarded). invalid marks a request
// whose 400 is an invalid job. It returns the answer's header.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body any, out any, invalid bool) (http.Header, error) {
	return c.doWith(ctx, method, path, q, body, out, invalid, nil)
}

// doWith is do with the request headers hdr added.
func (c *Client) doWith(ctx context.Context, method, path string, q url.Values, body any, out any, invalid bool, hdr http.Header) (http.Header, error) {
	var rd io.Reader
	if body != nil {
		b, ok := body.([]byte)
		if !ok {
			var err error
			if b, err = json.Marshal(body); err != nil {
				return nil, fmt.Errorf("client: encoding the request: %w", err)
			}
		}
		rd = bytes.NewReader(b)
	}
	u := *c.base
	u.RawPath = c.base.Path + path
	u.Path, _ = url.PathUnescape(u.RawPath)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if method != http.MethodGet && method != http.MethodHead {
		// The API takes writes as JSON only, with or without a body.
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	for k, v := range hdr {
		req.Header[k] = v
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, apiError(method, path, resp, data, invalid)
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.Unmarshal(data, out); err != nil {
			return nil, fmt.Errorf("client: %s %s: decoding the answer: %w", method, path, err)
		}
	}
	return resp.Header, nil
}

func apiError(method, path string, resp *http.Response, data []byte, invalid bool) *APIError {
	e := &APIError{Status: resp.StatusCode, Method: method, Path: path, invalid: invalid}
	var body struct {
		Error string `json:"error"`
		Field string `json:"field"`
		Role  string `json:"role"`
		Code  string `json:"code"`
	}
	if json.Unmarshal(data, &body) == nil && body.Error != "" {
		e.Message, e.Field, e.Role, e.Code = body.Error, body.Field, body.Role, body.Code
		return e
	}
	e.Message = http.StatusText(resp.StatusCode)
	if s := strings.TrimSpace(string(data)); s != "" {
		if len(s) > 200 {
			s = s[:200] + "..."
		}
		e.Message += ": " + s
	}
	return e
}

func jobPath(id string, action string) string {
	p := "/jobs/" + url.PathEscape(id)
	if action != "" {
		p += "/" + action
	}
	return p
}

// ListOptions are the filters and the page of [Client.List]. The zero
// value lists every job.
type ListOptions struct {
	// Limit, when positive, asks for a page of at most Limit jobs (the
	// API takes 1 to 1000). Default 0: every job.
	Limit int
	// After is the id of the last job of the previous page
	// ([Page.Next]). Default "": from the first job.
	After string
	// Enabled, when not nil, keeps the jobs enabled (true) or paused
	// (false).
	Enabled *bool
	// Kind keeps the jobs of a schedule kind (once, every, cron).
	Kind string
	// LastStatus keeps the jobs whose last run had this status.
	LastStatus cron.Status
	// NeverRun keeps the jobs that never ran (last_status empty); it
	// cannot be combined with LastStatus.
	NeverRun bool
	// Name keeps the jobs of this exact name.
	Name string
	// Type keeps the jobs of this type ("http", or a Go function's).
	Type string
}

// Page is one answer of [Client.List].
type Page struct {
	// Jobs are the jobs of the page, in creation order.
	Jobs []cron.Job
	// Next is the After of the next page, "" when this page is the last.
	Next string
}

// List returns the jobs that pass opts' filters, in creation order: all
// of them, or a page when opts.Limit is set (a page may come back short,
// or empty, when filters skip jobs: go on while Next is not "").
func (c *Client) List(ctx context.Context, opts ListOptions) (Page, error) {
	q := url.Values{}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.After != "" {
		q.Set("after", opts.After)
	}
	if opts.Enabled != nil {
		q.Set("enabled", strconv.FormatBool(*opts.Enabled))
	}
	if opts.Kind != "" {
		q.Set("kind", opts.Kind)
	}
	if opts.LastStatus != "" && opts.NeverRun {
		return Page{}, errors.New("client: ListOptions: LastStatus and NeverRun both set")
	}
	if opts.LastStatus != "" || opts.NeverRun {
		q.Set("last_status", string(opts.LastStatus))
	}
	if opts.Name != "" {
		q.Set("name", opts.Name)
	}
	if opts.Type != "" {
		q.Set("type", opts.Type)
	}
	var p Page
	h, err := c.do(ctx, http.MethodGet, "/jobs", q, nil, &p.Jobs, false)
	if err != nil {
		return Page{}, err
	}
	if next := nextAfter(h.Get("Link")); next != "" && len(p.Jobs) > 0 {
		p.Next = next
	}
	return p, nil
}

// nextAfter reads the after parameter of a Link header's rel="next".
func nextAfter(link string) string {
	for _, part := range strings.Split(link, ",") {
		ref, params, ok := strings.Cut(strings.TrimSpace(part), ";")
		if !ok || !strings.Contains(params, `rel="next"`) {
			continue
		}
		ref = strings.Trim(strings.TrimSpace(ref), "<>")
		u, err := url.Parse(ref)
		if err != nil {
			continue
		}
		return u.Query().Get("after")
	}
	return ""
}

// Get returns job id.
func (c *Client) Get(ctx context.Context, id string) (cron.Job, error) {
	var j cron.Job
	_, err := c.do(ctx, http.MethodGet, jobPath(id, ""), nil, nil, &j, false)
	return j, err
}

// systemFields are the fields of a job the service maintains.
var systemFields = []string{"last_run_at", "next_run_at", "last_status", "last_error"}

// Create adds j and returns it as stored (its id generated when j.ID is
// "", its defaults filled). j is sent whole, less its system fields: its
// MaxRetries is sent as it is (0: no retries), not left to the service's
// default; use [Client.CreateJSON] to leave fields out.
func (c *Client) Create(ctx context.Context, j cron.Job) (cron.Job, error) {
	b, err := j.MarshalJSON()
	if err != nil {
		return cron.Job{}, fmt.Errorf("client: encoding the job: %w", err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		return cron.Job{}, fmt.Errorf("client: encoding the job: %w", err)
	}
	for _, f := range systemFields {
		delete(doc, f)
	}
	if j.ID == "" {
		delete(doc, "id")
	}
	return c.create(ctx, doc)
}

// CreateJSON adds the job of the JSON object body, as POST /jobs takes it
// (fields left out take the service's defaults), and returns it as
// stored.
func (c *Client) CreateJSON(ctx context.Context, body []byte) (cron.Job, error) {
	return c.create(ctx, bytes.Clone(body))
}

func (c *Client) create(ctx context.Context, body any) (cron.Job, error) {
	var out cron.Job
	_, err := c.do(ctx, http.MethodPost, "/jobs", nil, body, &out, true)
	return out, err
}

// JobPatch is a change of a job for [Client.Patch]: each field that is
// not nil is set, the others are left as they are. To remove a field (so
// that it takes its default), send null for it with [Client.PatchJSON].
type JobPatch struct {
	Name *string `json:"name,omitempty"`
	// Enabled false pauses the job, true resumes it.
	Enabled *bool `json:"enabled,omitempty"`
	// Type changes the job's type ("http" or a type with a handler).
	Type *string `json:"type,omitempty"`
	// HTTP changes the fields it sets of the callback of an HTTP job.
	HTTP *HTTPPatch `json:"http,omitempty"`
	// Args replace the args of a Go function job (any JSON value).
	Args json.RawMessage `json:"args,omitempty"`
	// Schedule changes the schedule: the fields it sets when its kind is
	// the job's; a schedule of another kind replaces the job's whole.
	Schedule     *cron.ScheduleSpec `json:"schedule,omitempty"`
	Timeout      *cron.Duration     `json:"timeout,omitempty"`
	MaxRetries   *int               `json:"max_retries,omitempty"`
	RetryBackoff *cron.Duration     `json:"retry_backoff,omitempty"`
	MisfireGrace *cron.Duration     `json:"misfire_grace,omitempty"`
	// Alert replaces the job's alert webhook.
	Alert *cron.AlertConfig `json:"alert,omitempty"`
	// KeepRuns sets how many runs the job's history keeps (0: the
	// service's number).
	KeepRuns *int `json:"keep_runs,omitempty"`
}

// HTTPPatch changes the callback of an HTTP job in a [JobPatch]: each
// field that is not nil is set. Headers are set over the job's (the
// other headers stay).
type HTTPPatch struct {
	Method  *string           `json:"method,omitempty"`
	URL     *string           `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    *string           `json:"body,omitempty"`
}

// Patch changes the fields of job id that p sets and returns the job as
// stored. An invalid result is an error matching [cron.ErrInvalidJob]
// whose Field names the field at fault.
func (c *Client) Patch(ctx context.Context, id string, p JobPatch) (cron.Job, error) {
	var out cron.Job
	_, err := c.do(ctx, http.MethodPatch, jobPath(id, ""), nil, p, &out, true)
	return out, err
}

// PatchJSON changes job id by a JSON merge patch (RFC 7396) of its JSON
// form, sent as it is: only the fields present change, null removes a
// field (it takes its default). It returns the job as stored.
func (c *Client) PatchJSON(ctx context.Context, id string, patch []byte) (cron.Job, error) {
	var out cron.Job
	_, err := c.do(ctx, http.MethodPatch, jobPath(id, ""), nil, bytes.Clone(patch), &out, true)
	return out, err
}

// Delete removes job id.
func (c *Client) Delete(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, jobPath(id, ""), nil, nil, nil, false)
	return err
}

// RunNow queues a run of job id at once and returns its run id. A job
// with a run in flight on the instance that answers (or, on a shared
// database, running on another instance) is an error matching
// [cron.ErrInFlight]: see [Client.RunNowWith] to force it.
func (c *Client) RunNow(ctx context.Context, id string) (runID string, err error) {
	return c.RunNowWith(ctx, id, RunNowOptions{})
}

// RunNowOptions change one run queued by [Client.RunNowWith]. The zero
// value is a plain run-now.
type RunNowOptions struct {
	// Body, when not nil, replaces the http.body of an HTTP job for this
	// run (an empty, non-nil Body sends an empty body). Default nil: the
	// job's.
	Body []byte
	// Headers are set over the job's http.headers for this run.
	Headers map[string]string
	// Args replace the args of a Go function job for this run.
	Args json.RawMessage
	// Force runs the job even with a run of it in flight.
	Force bool
	// IdempotencyKey, when set, is sent as the Idempotency-Key header:
	// the same key for the same job within 24 hours gives back the first
	// request's run id without a second run; with other options, an
	// error of Code "idempotency_key_reused" (422). The service keeps the
	// keys in its store: on a shared database they hold across every
	// instance of it (any instance may answer the retry); with the JSON
	// file, on the one process that has it.
	IdempotencyKey string
}

// runNowBody is the JSON body of a run-now with options.
type runNowBody struct {
	Body    *string           `json:"body,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Args    json.RawMessage   `json:"args,omitempty"`
	Force   bool              `json:"force,omitempty"`
}

// RunNowWith queues a run of job id at once, changed by opts for that
// run, and returns its run id (with an IdempotencyKey seen before, the
// first run's). Overrides that do not fit the job are an error matching
// [cron.ErrInvalidJob] whose Field names them (body, headers, args).
func (c *Client) RunNowWith(ctx context.Context, id string, opts RunNowOptions) (runID string, err error) {
	var out struct {
		RunID string `json:"run_id"`
	}
	var body any
	if opts.Body != nil || opts.Headers != nil || len(opts.Args) > 0 || opts.Force {
		b := runNowBody{Headers: opts.Headers, Args: opts.Args, Force: opts.Force}
		if opts.Body != nil {
			s := string(opts.Body)
			b.Body = &s
		}
		body = b
	}
	var hdr http.Header
	if opts.IdempotencyKey != "" {
		hdr = http.Header{"Idempotency-Key": {opts.IdempotencyKey}}
	}
	_, err = c.doWith(ctx, http.MethodPost, jobPath(id, "run-now"), nil, body, &out, true, hdr)
	return out.RunID, err
}

// Pause stops job id from firing (enabled false) and returns it.
func (c *Client) Pause(ctx context.Context, id string) (cron.Job, error) {
	var out cron.Job
	_, err := c.do(ctx, http.MethodPost, jobPath(id, "pause"), nil, nil, &out, false)
	return out, err
}

// PauseUntil pauses job id until the time until, when the service resumes
// it by itself (its PausedUntil), and returns it. A zero until is a plain
// [Client.Pause]. An until not in the future is an *APIError naming
// "until".
func (c *Client) PauseUntil(ctx context.Context, id string, until time.Time) (cron.Job, error) {
	if until.IsZero() {
		return c.Pause(ctx, id)
	}
	q := url.Values{"until": {until.UTC().Format(time.RFC3339Nano)}}
	var out cron.Job
	_, err := c.do(ctx, http.MethodPost, jobPath(id, "pause"), q, nil, &out, true)
	return out, err
}

// PauseAll pauses the whole service (maintenance): no job fires, without
// a change to any job, until [Client.ResumeAll] or until (zero: no end).
// reason is shown by GET /health. It needs the admin role. It returns the
// pause now in force.
func (c *Client) PauseAll(ctx context.Context, until time.Time, reason string) (cron.PauseState, error) {
	body := struct {
		Until  string `json:"until,omitempty"`
		Reason string `json:"reason,omitempty"`
	}{Reason: reason}
	if !until.IsZero() {
		body.Until = until.UTC().Format(time.RFC3339Nano)
	}
	var out cron.PauseState
	_, err := c.do(ctx, http.MethodPost, "/pause", nil, body, &out, true)
	return out, err
}

// ResumeAll ends the service pause of [Client.PauseAll]. It needs the
// admin role.
func (c *Client) ResumeAll(ctx context.Context) (cron.PauseState, error) {
	var out cron.PauseState
	_, err := c.do(ctx, http.MethodPost, "/resume", nil, nil, &out, false)
	return out, err
}

// Resume lets job id fire again, from now, and returns it.
func (c *Client) Resume(ctx context.Context, id string) (cron.Job, error) {
	var out cron.Job
	_, err := c.do(ctx, http.MethodPost, jobPath(id, "resume"), nil, nil, &out, false)
	return out, err
}

// RunsOptions select the runs of [Client.Runs]. The zero value is the
// API's default: the newest 50 runs of any status.
type RunsOptions struct {
	// Limit is the most runs returned. Default 0: the API's, 50.
	Limit int
	// Status keeps the runs of this status. Default "": any.
	Status cron.Status
}

// Runs returns the newest runs of job id, newest first.
func (c *Client) Runs(ctx context.Context, id string, opts RunsOptions) ([]cron.Run, error) {
	q := url.Values{}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Status != "" {
		q.Set("status", string(opts.Status))
	}
	var out []cron.Run
	_, err := c.do(ctx, http.MethodGet, jobPath(id, "runs"), q, nil, &out, false)
	return out, err
}

// Next is the answer of [Client.Next]: the next run times of a job.
type Next struct {
	JobID string `json:"job_id"`
	// Paused says the job is paused: it fires none of Times until resumed.
	Paused bool `json:"paused"`
	// Kind and TZ are the job's schedule kind and, for cron, time zone.
	Kind string `json:"kind"`
	TZ   string `json:"tz,omitempty"`
	// Times are the run times, in UTC; empty when the schedule has ended.
	Times []time.Time `json:"next"`
}

// Next returns the next n run times of job id (n 0: the API's default,
// 10; at most 1000).
func (c *Client) Next(ctx context.Context, id string, n int) (Next, error) {
	q := url.Values{}
	if n != 0 {
		q.Set("n", strconv.Itoa(n))
	}
	var out Next
	_, err := c.do(ctx, http.MethodGet, jobPath(id, "next"), q, nil, &out, false)
	return out, err
}

// Preview checks spec as a create would (an *APIError naming the field
// when it is refused) and returns its next n run times (n 0: the API's
// default, 10), without creating a job. id, when not "", is the id of the
// job the schedule is meant for: an every schedule's jitter is spread as
// that job's would be.
func (c *Client) Preview(ctx context.Context, spec cron.ScheduleSpec, n int, id string) ([]time.Time, error) {
	body := struct {
		Schedule cron.ScheduleSpec `json:"schedule"`
		N        int               `json:"n,omitempty"`
		ID       string            `json:"id,omitempty"`
	}{spec, n, id}
	var out struct {
		Next []time.Time `json:"next"`
	}
	_, err := c.do(ctx, http.MethodPost, "/schedules/preview", nil, body, &out, true)
	return out.Next, err
}

// Health returns the answer of GET /health: {"status": "ok"} and the
// notes the service adds (numbers are float64).
func (c *Client) Health(ctx context.Context) (map[string]any, error) {
	var out map[string]any
	_, err := c.do(ctx, http.MethodGet, "/health", nil, nil, &out, false)
	return out, err
}

// AuditEntry is one change recorded in the service's audit log: every
// change made through the service, by the API, the console, the service
// itself (who "runner": a pause after failures, the end of a timed
// pause) or Go code of an embedding service (who "local").
type AuditEntry struct {
	// ID numbers the entries in order: the After of the next page.
	ID int64 `json:"id"`
	// Time is when the change was made.
	Time time.Time `json:"time"`
	// Who names the actor ("admin" for the single token of
	// KSANA_API_TOKEN, "anonymous" without authentication); Role is its
	// role.
	Who  string `json:"who"`
	Role string `json:"role"`
	// Action is what was done: create, update, delete, pause, resume,
	// run-now, pause-all or resume-all; JobID the job ("" for the
	// service).
	Action cron.Action `json:"action"`
	JobID  string      `json:"job_id"`
	// RunID is the run a run-now queued; Replay marks a run-now sent
	// again with an earlier one's Idempotency-Key (no run queued).
	RunID  string `json:"run_id,omitempty"`
	Replay bool   `json:"replay,omitempty"`
	// Overrides are a run-now's options, their values hidden.
	Overrides json.RawMessage `json:"overrides,omitempty"`
	// Before and After are the job before and after the change, its
	// secrets hidden (nil before a create and after a delete, and for
	// the service pause).
	Before *cron.Job `json:"before"`
	After  *cron.Job `json:"after"`
	// PauseBefore and PauseAfter are the service pause before and after
	// a pause-all or resume-all (nil for the other changes).
	PauseBefore *cron.PauseState `json:"pause_before,omitempty"`
	PauseAfter  *cron.PauseState `json:"pause_after,omitempty"`
}

// UnmarshalJSON reads an entry of GET /audit: the before and after of a
// POST /pause or /resume go to PauseBefore and PauseAfter, those of the
// other writes to Before and After.
func (e *AuditEntry) UnmarshalJSON(b []byte) error {
	type fields AuditEntry
	var w struct {
		fields
		Before json.RawMessage `json:"before"`
		After  json.RawMessage `json:"after"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*e = AuditEntry(w.fields)
	e.Before, e.After = nil, nil
	svc := e.Action == cron.ActionPauseAll || e.Action == cron.ActionResumeAll
	for _, f := range []struct {
		raw json.RawMessage
		job **cron.Job
		p   **cron.PauseState
	}{{w.Before, &e.Before, &e.PauseBefore}, {w.After, &e.After, &e.PauseAfter}} {
		if len(f.raw) == 0 || string(f.raw) == "null" {
			continue
		}
		if svc {
			*f.p = new(cron.PauseState)
			if err := json.Unmarshal(f.raw, *f.p); err != nil {
				return err
			}
			continue
		}
		*f.job = new(cron.Job)
		if err := json.Unmarshal(f.raw, *f.job); err != nil {
			return err
		}
	}
	return nil
}

// AuditOptions select the entries of [Client.Audit]. The zero value asks
// for the oldest entries kept, a page of the API's default size (100).
type AuditOptions struct {
	// JobID keeps one job's entries. Default "": every job's.
	JobID string
	// Who keeps the entries of one token name. Default "": everyone's.
	Who string
	// Since keeps the entries made at or after it. Default zero: any.
	Since time.Time
	// After keeps the entries whose ID is above it ([AuditPage.Next]).
	After int64
	// Limit is the page size (1 to 1000). Default 0: the API's, 100.
	Limit int
}

// AuditPage is one answer of [Client.Audit].
type AuditPage struct {
	// Entries are the entries, oldest first.
	Entries []AuditEntry
	// Next is the After of the next page, 0 when this page is the last.
	Next int64
}

// Audit returns a page of the service's audit log of writes.
func (c *Client) Audit(ctx context.Context, opts AuditOptions) (AuditPage, error) {
	q := url.Values{}
	if opts.JobID != "" {
		q.Set("job_id", opts.JobID)
	}
	if opts.Who != "" {
		q.Set("who", opts.Who)
	}
	if !opts.Since.IsZero() {
		q.Set("since", opts.Since.UTC().Format(time.RFC3339Nano))
	}
	if opts.After != 0 {
		q.Set("after", strconv.FormatInt(opts.After, 10))
	}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	var p AuditPage
	h, err := c.do(ctx, http.MethodGet, "/audit", q, nil, &p.Entries, false)
	if err != nil {
		return AuditPage{}, err
	}
	if next := nextAfter(h.Get("Link")); next != "" && len(p.Entries) > 0 {
		p.Next, _ = strconv.ParseInt(next, 10, 64)
	}
	return p, nil
}

// Alerts is the service's alert outbox, as GET /alerts answers it: the
// counts of pending and dead alerts, when the oldest of each was raised,
// and the oldest alerts of the state asked for.
type Alerts struct {
	Pending       int                  `json:"pending"`
	Dead          int                  `json:"dead"`
	OldestPending *time.Time           `json:"oldest_pending,omitempty"`
	OldestDead    *time.Time           `json:"oldest_dead,omitempty"`
	Alerts        []cron.AlertDelivery `json:"alerts"`
}

// Alerts returns the alert outbox: up to limit (0: the API's default,
// 100) of the oldest pending alerts, or of the dead ones when dead is
// set, with the counts of both.
func (c *Client) Alerts(ctx context.Context, dead bool, limit int) (Alerts, error) {
	q := url.Values{}
	if dead {
		q.Set("state", "dead")
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var a Alerts
	if _, err := c.do(ctx, http.MethodGet, "/alerts", q, nil, &a, false); err != nil {
		return Alerts{}, err
	}
	return a, nil
}
