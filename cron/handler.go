package cron

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// A Handler runs the jobs of one type: Go code that a job names by its
// Type instead of an HTTP callback. The runner calls Run once per attempt,
// from a worker, with a context that ends when the attempt's timeout (the
// job's timeout) expires or the runner cancels its runs at shutdown; Run
// must return soon after ctx ends. Several runs, of one job or of several,
// may call Run at the same time.
//
// A nil error is a success. Any other error fails the attempt, which is
// retried as the job says (max_retries, retry_backoff), unless it is
// [Permanent]. An attempt that returns an error after its timeout expired
// is a timeout. A panic fails the attempt, with the panic's value as the
// reason; it is logged with its stack.
type Handler interface {
	Run(ctx context.Context, c *Call) error
}

// HandlerFunc adapts a function to [Handler].
type HandlerFunc func(ctx context.Context, c *Call) error

// Run calls f(ctx, c).
func (f HandlerFunc) Run(ctx context.Context, c *Call) error { return f(ctx, c) }

// Call is one attempt of a run of a Go function job, as its [Handler]
// gets it.
type Call struct {
	// Job is the job as it stood when the run started; its Args are the
	// handler's arguments.
	Job Job
	// RunInfo identifies the run: RunID (the same across the attempts of
	// a run, a key for idempotence), JobID, ScheduledAt, TriggeredAt.
	RunInfo
	// Attempt is 1 for the first attempt, 2 for the first retry, up to
	// 1 + Job.MaxRetries.
	Attempt int
}

// Func returns a Handler that calls f, for jobs that need nothing but a
// context: the plain func(ctx) error of robfig/cron or gocron.
func Func(f func(ctx context.Context) error) Handler {
	return HandlerFunc(func(ctx context.Context, _ *Call) error { return f(ctx) })
}

// Typed returns a Handler that decodes each job's args into a new T (no
// args leave it the zero T) and calls f with them. Args that do not decode
// into a T, or hold a field T does not have, fail the run at once, without
// retry.
func Typed[T any](f func(ctx context.Context, args T, c *Call) error) Handler {
	return HandlerFunc(func(ctx context.Context, c *Call) error {
		var args T
		if len(c.Job.Args) > 0 {
			d := json.NewDecoder(bytes.NewReader(c.Job.Args))
			d.DisallowUnknownFields()
			if err := d.Decode(&args); err != nil {
				return Permanent(fmt.Errorf("args do not fit %T: %w", args, err))
			}
		}
		return f(ctx, args, c)
	})
}

// Permanent marks err as an error that another attempt would not fix: a
// handler that returns it fails the run without retry. Permanent(nil) is
// nil. errors.Is and errors.As see through it to err.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// maxHandlerError bounds the reason a handler's error leaves in a run
// record and in last_error.
const maxHandlerError = 512

// checkHandlers checks the handlers of a Config and returns a copy.
func checkHandlers(hs map[string]Handler) (map[string]Handler, error) {
	out := make(map[string]Handler, len(hs))
	for _, typ := range slices.Sorted(maps.Keys(hs)) {
		if err := checkHandler(typ, hs[typ]); err != nil {
			return nil, fmt.Errorf("cron: New: Config.Handlers: %w", err)
		}
		out[typ] = hs[typ]
	}
	return out, nil
}

func checkHandler(typ string, h Handler) error {
	if typ == JobTypeHTTP {
		return fmt.Errorf("type %q is the HTTP callback's: name Go functions otherwise", typ)
	}
	if err := validType(typ); err != nil {
		var ve *ValidationError
		errors.As(err, &ve)
		return fmt.Errorf("type %q %s", typ, ve.Reason)
	}
	if h == nil {
		return fmt.Errorf("type %q: the handler is nil", typ)
	}
	return nil
}

// Handle registers h to run the jobs of type typ, at any time, before or
// after [Runner.Run]: runs of such a job start calling h from then on. A
// job whose type has no handler cannot be added (nor an existing job be
// given that type), and a stored one still loads and may be changed
// ([Runner.Update], a pause, a resume): its runs fail until its handler
// is registered (see [Runner.Unhandled]). Handle panics, as http.ServeMux does for a bad
// pattern, when typ is "http", empty or not a valid type name (see
// validType), when h is nil, or when typ already has a handler.
func (r *Runner) Handle(typ string, h Handler) {
	if err := checkHandler(typ, h); err != nil {
		panic("cron: Handle: " + err.Error())
	}
	r.hmu.Lock()
	defer r.hmu.Unlock()
	if _, dup := r.handlers[typ]; dup {
		panic(fmt.Sprintf("cron: Handle: type %q already has a handler", typ))
	}
	if r.handlers == nil {
		r.handlers = make(map[string]Handler)
	}
	r.handlers[typ] = h
}

// handler returns the handler of typ, or nil.
func (r *Runner) handler(typ string) Handler {
	r.hmu.RLock()
	defer r.hmu.RUnlock()
	return r.handlers[typ]
}

// Types returns the job types the runner runs, sorted: "http" and each
// type with a handler.
func (r *Runner) Types() []string {
	r.hmu.RLock()
	defer r.hmu.RUnlock()
	return slices.Sorted(func(yield func(string) bool) {
		if !yield(JobTypeHTTP) {
			return
		}
		for t := range r.handlers {
			if !yield(t) {
				return
			}
		}
	})
}

// Unhandled returns, for each type of the jobs the runner holds that has no
// handler, how many jobs have it: jobs loaded from the store with a type
// that no handler was registered for. Their runs fail with the reason
// "no handler for type ..." until one is. It returns nil when every job
// has its handler.
func (r *Runner) Unhandled() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hmu.RLock()
	defer r.hmu.RUnlock()
	var out map[string]int
	for typ, n := range r.typed {
		if _, ok := r.handlers[typ]; !ok && n > 0 {
			if out == nil {
				out = make(map[string]int)
			}
			out[typ] = n
		}
	}
	return out
}

// countType adds d to the count of held jobs of e's type, when it is not
// http. mu is held.
func (r *Runner) countType(e *entry, d int) {
	fn := e.fn()
	if fn == nil {
		return
	}
	if r.typed == nil {
		r.typed = make(map[string]int)
	}
	r.typed[fn.typ] += d
	if r.typed[fn.typ] == 0 {
		delete(r.typed, fn.typ)
	}
}

// checkRetyped refuses a change of a job of type was to a type without a
// handler. A job whose type has no handler may still be changed otherwise:
// the handler is needed to run it, not to store it.
func (r *Runner) checkRetyped(j *Job, was string) error {
	if j.Type == was {
		return nil
	}
	return r.checkHandled(j)
}

// checkHandled refuses a new job of a type without a handler.
func (r *Runner) checkHandled(j *Job) error {
	if j.IsHTTP() || r.handler(j.Type) != nil {
		return nil
	}
	types := r.Types()
	return invalid("type", "no handler is registered for type %q; the runner runs %s", j.Type, strings.Join(types, ", "))
}

// runHandler runs a Go function job through its handler, attempt by
// attempt, as the HTTP executor runs a callback.
func (r *Runner) runHandler(ctx context.Context, j *Job, info RunInfo) Result {
	h := r.handler(j.Type)
	if h == nil {
		return Result{Status: StatusFailed, Error: fmt.Sprintf("no handler for type %q: register one with Runner.Handle", j.Type)}
	}
	timeout := j.Timeout.D()
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	backoff := j.RetryBackoff.D()
	if backoff <= 0 {
		backoff = DefaultRetryBackoff
	}
	c := &Call{Job: *j, RunInfo: info}
	var res Result
	var first Attempt
	for n := 1; ; n++ {
		c.Attempt = n
		start := time.Now()
		a := r.attemptHandler(ctx, h, c, timeout)
		res.logAttempt(n, a, start, &first)
		if a.status == StatusSuccess || !a.retry || n > j.MaxRetries || ctx.Err() != nil {
			return res
		}
		r.log.Warn("cron: attempt failed, retrying", "job_id", j.ID, "type", j.Type, "run_id", info.RunID, "attempt", n,
			"status", string(a.status), "error", a.err, "wait", backoff)
		if err := sleep(ctx, backoff); err != nil {
			return res
		}
	}
}

// attemptHandler makes one attempt: h.Run under the attempt's timeout, its
// error (or panic) turned into an attempt's outcome.
func (r *Runner) attemptHandler(ctx context.Context, h Handler, c *Call, timeout time.Duration) attempt {
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := r.safeRun(actx, h, c)
	switch {
	case err == nil:
		return attempt{status: StatusSuccess}
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return attempt{status: StatusTimeout, err: "run deadline exceeded"}
	case ctx.Err() != nil:
		return attempt{status: StatusFailed, err: "run cancelled"}
	case actx.Err() != nil:
		return attempt{status: StatusTimeout, err: fmt.Sprintf("timeout after %s", timeout), retry: true}
	}
	var pe *permanentError
	return attempt{status: StatusFailed, err: cut(err.Error(), maxHandlerError), retry: !errors.As(err, &pe)}
}

// safeRun calls h.Run, turning a panic into an error.
func (r *Runner) safeRun(ctx context.Context, h Handler, c *Call) (err error) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("cron: handler panicked", "job_id", c.JobID, "type", c.Job.Type, "run_id", c.RunID, "attempt", c.Attempt,
				"panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("handler panicked: %v", p)
		}
	}()
	return h.Run(ctx, c)
}

// cut shortens s to at most n bytes, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
