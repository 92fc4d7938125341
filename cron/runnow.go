package cron

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
)

// RunOptions change one run started by [Runner.RunNow]. The zero value
// runs the job as it is stored, unless a run of it is in flight.
type RunOptions struct {
	// Body, when not nil, replaces the http.body of an HTTP job for this
	// run; its placeholders are expanded as the stored body's are.
	Body *string
	// Headers are set on the request of an HTTP job for this run, over
	// the stored headers of the same names (compared without regard to
	// case).
	Headers map[string]string
	// Args, when set, replace the args of a Go function job for this run:
	// any JSON value.
	Args json.RawMessage
	// Force runs the job even when a run of it is queued or running on
	// this runner. Without it such a run-now is [ErrInFlight]: the same
	// rule that makes a slot that comes during a run skipped.
	Force bool
	// IdempotencyKey, when set, makes the run-now idempotent: a run-now of
	// the same job with the same key and the same options within
	// [IdempotencyWindow] queues no second run and answers the first
	// one's run id, with [RunTicket.Replayed] set (a repeat that comes
	// while the first is still being answered waits for it, up to 10s,
	// then is [ErrIdempotencyPending]); the same key with other options
	// is [ErrIdempotencyKeyReused]. Keys are per job, kept by
	// [Config.Idempotency]: in the database shared by every runner of
	// store/sqlstore (and so across its processes and restarts), in the
	// memory of this runner otherwise. At most [MaxIdempotencyKeyLen]
	// printable ASCII characters.
	IdempotencyKey string
}

// RunTicket is the answer of [Runner.RunNow].
type RunTicket struct {
	// RunID is the run queued, or the one a replay answers.
	RunID string
	// Replayed reports a run-now answered by the run of an earlier one
	// with the same [RunOptions.IdempotencyKey]: nothing was queued.
	Replayed bool
}

// hopHeaders are the headers a run-now may not set: they belong to the
// connection or the target, not to the request a job makes.
var hopHeaders = []string{"Host", "Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length"}

// check validates o for a job that is an HTTP job or not (isHTTP), and
// returns a *ValidationError naming the bad field: body, headers or args.
func (o *RunOptions) check(isHTTP bool) error {
	if isHTTP {
		if len(o.Args) > 0 {
			return invalid("args", "is for jobs that run a Go function; an HTTP job takes body and headers")
		}
		if o.Body != nil {
			if err := validateBody(*o.Body); err != nil {
				return rename(err, "body")
			}
		}
		if err := validateHeaders(o.Headers); err != nil {
			return rename(err, "headers")
		}
		for k := range o.Headers {
			for _, h := range hopHeaders {
				if strings.EqualFold(k, h) {
					return invalid("headers", "%s cannot be set by a run-now: it belongs to the connection or the target host, not to the job's request", h)
				}
			}
		}
		return nil
	}
	if o.Body != nil || o.Headers != nil {
		field := "body"
		if o.Body == nil {
			field = "headers"
		}
		return invalid(field, "is for HTTP jobs; a job that runs a Go function takes args")
	}
	if len(o.Args) > 0 {
		var b bytes.Buffer
		if err := json.Compact(&b, o.Args); err != nil {
			return invalid("args", "must be a JSON value: %v", err)
		}
		o.Args = b.Bytes()
	}
	return nil
}

// inFlightElsewhere is the [ErrInFlight] of a job with n runs claimed and
// not finished in a shared store.
func inFlightElsewhere(id string, n int) error {
	return fmt.Errorf("%w: job %q has %d run(s) running on the instances that share the store", ErrInFlight, id, n)
}

func rename(err error, field string) error {
	var ve *ValidationError
	if errors.As(err, &ve) {
		return &ValidationError{Field: field, Reason: ve.Reason}
	}
	return err
}

// overrides reports whether o changes what the run calls.
func (o *RunOptions) overrides() bool { return o.Body != nil || o.Headers != nil || len(o.Args) > 0 }

// apply changes j, a copy of the job for one run, by o.
func (o *RunOptions) apply(j *Job) {
	if o.Body != nil {
		j.HTTP.Body = *o.Body
	}
	if len(o.Headers) > 0 {
		h := make(map[string]string, len(j.HTTP.Headers)+len(o.Headers))
		for k, v := range j.HTTP.Headers {
			if !hasFold(o.Headers, k) {
				h[k] = v
			}
		}
		maps.Copy(h, o.Headers)
		j.HTTP.Headers = h
	}
	if len(o.Args) > 0 {
		j.Args = o.Args
	}
}

func hasFold(m map[string]string, key string) bool {
	for k := range m {
		if len(k) == len(key) && bytes.EqualFold([]byte(k), []byte(key)) {
			return true
		}
	}
	return false
}

// RunNow queues a run of job id for the worker pool at once, whatever
// its schedule or enabled flag, changed by opts for this run only, and
// returns its ticket, with the run's id (the zero RunOptions is a plain
// run of the job as it is, refused while a run of it is in flight; set
// Force to run it all the same). next_run_at does not change. A run queued when
// Run's context ends is dropped. While the service is paused
// ([Runner.PauseAll]) it returns [ErrServicePaused].
//
// A job with a run queued or running on this runner is [ErrInFlight]
// unless opts.Force is set; over a [SharedStore] that is a [RunCounter],
// so is a job with a run claimed and not finished on any runner of the
// store (a run queued on another runner is seen once a worker claims it,
// and two run-nows at the same moment on two runners may both run). Overrides that do
// not fit the job (a body for a Go function job, args for an HTTP job, a
// bad header or placeholder) are a *[ValidationError] naming body,
// headers or args. An unknown id is [ErrNotFound]; after Run has
// returned, [ErrClosed]. A job of a shared store that the runner does not
// hold is read from the store and run by this runner all the same,
// claimed by its run id (see [SharedStore.ClaimRun]); the runner writes
// that run's last-run fields.
//
// The run-now is authorized for the actor of ctx ([WithActor]) and
// audited ([ActionRunNow], with its options, their values hidden, and a
// replay marked as such); headers that replace one the job sets also need
// [ActionReplaceHeader] (the admin role under [RoleRules]), and Host and
// the hop-by-hop headers (Connection, Transfer-Encoding, ...) are a
// *ValidationError naming headers.
func (r *Runner) RunNow(ctx context.Context, id string, opts RunOptions) (RunTicket, error) {
	a, err := r.authorize(ctx, ActionRunNow, id)
	if err != nil {
		return RunTicket{}, err
	}
	if len(opts.Headers) > 0 {
		if err := r.checkReplace(ctx, a, id, opts.Headers); err != nil {
			return RunTicket{}, err
		}
	}
	if k := opts.IdempotencyKey; len(k) > MaxIdempotencyKeyLen || !printable(k) {
		return RunTicket{}, invalid("idempotency_key", "must be 1 to %d printable ASCII characters", MaxIdempotencyKeyLen)
	}
	var t RunTicket
	if opts.IdempotencyKey != "" {
		t, err = r.runNowOnce(ctx, id, opts)
	} else {
		t.RunID, err = r.runNow(ctx, id, opts)
	}
	if err != nil {
		return RunTicket{}, err
	}
	if r.auditOn() {
		r.audit(ctx, change{actor: a, action: ActionRunNow, jobID: id, runID: t.RunID, replay: t.Replayed, overrides: overridesJSON(&opts)})
	}
	return t, nil
}

// checkReplace asks for [ActionReplaceHeader] when headers replace one
// that job id sets.
func (r *Runner) checkReplace(ctx context.Context, a Actor, id string, headers map[string]string) error {
	j, err := r.Get(ctx, id)
	if err != nil {
		return nil // the run-now itself says what is wrong
	}
	for k := range headers {
		if hasFold(j.HTTP.Headers, k) {
			if err := r.authz.Authorize(ctx, a, ActionReplaceHeader, id); err != nil {
				return fmt.Errorf("header %s replaces one the job sets: %w", k, err)
			}
			return nil
		}
	}
	return nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// runNow queues the run of a run-now.
func (r *Runner) runNow(ctx context.Context, id string, opts RunOptions) (string, error) {
	var over *RunOptions
	if opts.overrides() {
		o := opts
		if o.Headers != nil {
			o.Headers = maps.Clone(o.Headers)
		}
		over = &o
	}
	runID := newID()
	by := ActorFrom(ctx).Name
	now := toNano(r.now())
	elsewhere := 0 // runs in flight on every runner of a shared store
	if r.fly != nil && !opts.Force {
		ctx, cancel := context.WithTimeout(ctx, storeTimeout)
		n, err := r.fly.RunsInFlight(ctx, id, fromNano(now))
		cancel()
		if err != nil {
			return "", unavailable("runs in flight", err)
		}
		elsewhere = n
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state >= stateStopping {
		return "", ErrClosed
	}
	if r.servicePaused(now) {
		return "", ErrServicePaused
	}
	_, e, ok := r.lookup(id)
	if !ok {
		if err := r.runStored(id, runID, by, now, over, opts.Force, elsewhere); err != nil {
			return "", err
		}
		return runID, nil
	}
	if over != nil {
		if err := over.check(e.fn() == nil); err != nil {
			return "", err
		}
	}
	if e.inflight > 0 && !opts.Force {
		return "", fmt.Errorf("%w: job %q has %d run(s) queued or running", ErrInFlight, id, e.inflight)
	}
	if elsewhere > 0 && !opts.Force {
		return "", inFlightElsewhere(id, elsewhere)
	}
	if e.inflight >= maxInflight {
		return "", fmt.Errorf("cron: run-now %q: %d runs already queued or running", id, e.inflight)
	}
	r.enqueue(e, task{runID: runID, scheduled: now, over: over, by: by})
	return runID, nil
}
