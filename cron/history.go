package cron

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxBurstCount bounds the slots a not-called burst counts (the count of a
// cron expression is stepped slot by slot): [Run.Slots] says at most this.
const maxBurstCount = 100_000

// RunQuery selects run records of every job, newest first: ordered by
// ScheduledAt, latest first, and then by run id, greatest first. Its zero
// value asks for the first page of every run.
type RunQuery struct {
	// JobIDs keeps the runs of these jobs only; empty: every job.
	JobIDs []string
	// Statuses keeps the runs with one of these statuses only; empty: any.
	Statuses []Status
	// Since keeps the runs scheduled at or after it; zero: no bound.
	Since time.Time
	// Until keeps the runs scheduled before it; zero: no bound.
	Until time.Time
	// Instance keeps the runs claimed by this runner of a shared store
	// only; empty: any.
	Instance string
	// Limit is the most runs a page holds: 0 means [DefaultRunQueryLimit];
	// it may not be negative nor above [MaxRunQueryLimit].
	Limit int
	// After is where the page starts: the runs that come after this
	// position in the order. The zero value starts at the newest run.
	After RunCursor
}

// RunCursor is a position in the order of a [RunQuery]: the scheduled
// time and the id of the last run of a page.
type RunCursor struct {
	ScheduledAt time.Time
	RunID       string
}

// IsZero reports whether c is the zero cursor (the start).
func (c RunCursor) IsZero() bool { return c.RunID == "" && c.ScheduledAt.IsZero() }

// Cursor returns the position of r in the history's order.
func (r *Run) Cursor() RunCursor { return RunCursor{ScheduledAt: r.ScheduledAt, RunID: r.ID} }

// String encodes c as "<Unix nanoseconds>.<run id>", the form
// [RunCursor.UnmarshalText] reads; the zero cursor is "".
func (c RunCursor) String() string {
	if c.IsZero() {
		return ""
	}
	return strconv.FormatInt(c.ScheduledAt.UnixNano(), 10) + "." + c.RunID
}

// MarshalText returns the cursor's text form, [RunCursor.String].
func (c RunCursor) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText reads a cursor written by [RunCursor.String]; "" is the
// zero cursor. Anything else is an error wrapping [ErrBadCursor], and
// leaves c as it was.
func (c *RunCursor) UnmarshalText(b []byte) error {
	s := string(b)
	if s == "" {
		*c = RunCursor{}
		return nil
	}
	at, id, ok := strings.Cut(s, ".")
	n, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || id == "" || len(id) > 256 {
		return fmt.Errorf("%w: %q is not <nanoseconds>.<run id>", ErrBadCursor, s)
	}
	*c = RunCursor{ScheduledAt: time.Unix(0, n).UTC(), RunID: id}
	return nil
}

// Before reports whether run r comes after the position c in the order
// of a [RunQuery] (newest first): scheduled earlier, or at the same time
// with a smaller run id. Every run comes after the zero cursor.
func (c RunCursor) Before(r *Run) bool {
	if c.IsZero() {
		return true
	}
	if d := r.ScheduledAt.Compare(c.ScheduledAt); d != 0 {
		return d < 0
	}
	return r.ID < c.RunID
}

// Check validates q: a negative or too large limit, a Since not before
// Until, an unknown status or an empty job id is a [*ValidationError]
// naming the field ("limit", "since", "status", "job").
func (q *RunQuery) Check() error {
	if q.Limit < 0 || q.Limit > MaxRunQueryLimit {
		return &ValidationError{Field: "limit", Reason: fmt.Sprintf("must be from 1 to %d, got %d", MaxRunQueryLimit, q.Limit)}
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		return &ValidationError{Field: "since", Reason: "must be before until"}
	}
	for _, st := range q.Statuses {
		if !st.OfRun() {
			return &ValidationError{Field: "status", Reason: fmt.Sprintf("must be success, failed, timeout, skipped or missed, got %q", st)}
		}
	}
	for _, id := range q.JobIDs {
		if id == "" {
			return &ValidationError{Field: "job", Reason: "must be a job id, got an empty one"}
		}
	}
	return nil
}

// OfRun reports whether s is a status a run record can have: success,
// failed, timeout, skipped or missed.
func (s Status) OfRun() bool {
	switch s {
	case StatusSuccess, StatusFailed, StatusTimeout, StatusSkipped, StatusMissed:
		return true
	}
	return false
}

// PageSize is the number of runs a page of q holds: Limit, or
// [DefaultRunQueryLimit] when it is 0.
func (q *RunQuery) PageSize() int {
	if q.Limit <= 0 {
		return DefaultRunQueryLimit
	}
	return q.Limit
}

// Match reports whether run r passes the filters of q (not the cursor).
func (q *RunQuery) Match(r *Run) bool {
	if len(q.JobIDs) > 0 && !slices.Contains(q.JobIDs, r.JobID) {
		return false
	}
	if len(q.Statuses) > 0 && !slices.Contains(q.Statuses, r.Status) {
		return false
	}
	if !q.Since.IsZero() && r.ScheduledAt.Before(q.Since) {
		return false
	}
	if !q.Until.IsZero() && !r.ScheduledAt.Before(q.Until) {
		return false
	}
	return q.Instance == "" || r.Instance == q.Instance
}

// compareRuns orders runs as a [RunQuery] does: newest first (a before b
// is negative).
func compareRuns(a, b *Run) int {
	if d := b.ScheduledAt.Compare(a.ScheduledAt); d != 0 {
		return d
	}
	return cmp.Compare(b.ID, a.ID)
}

// Page returns the page of q from runs, in any order, as a store that
// holds its runs in memory answers [RunStore.QueryRuns]: the runs that
// match q and come after q.After, newest first, up to q's page size, and
// the cursor of the next page (zero when none follows).
func (q RunQuery) Page(runs []Run) ([]Run, RunCursor) {
	out := []Run{}
	for i := range runs {
		if q.Match(&runs[i]) && q.After.Before(&runs[i]) {
			out = append(out, runs[i])
		}
	}
	slices.SortFunc(out, func(a, b Run) int { return compareRuns(&a, &b) })
	if n := q.PageSize(); len(out) > n {
		return out[:n:n], out[n-1].Cursor()
	}
	return out, RunCursor{}
}

// QueryRuns returns a page of the run history of every job: the runs
// that match q, newest first, and the cursor of the next page (zero when
// none follows). A bad q is a [*ValidationError] naming its field. A
// runner without a store answers from the runs it keeps in memory; a
// store that cannot answer gives an error wrapping [ErrUnsupported].
func (r *Runner) QueryRuns(ctx context.Context, q RunQuery) ([]Run, RunCursor, error) {
	if err := q.Check(); err != nil {
		return nil, RunCursor{}, err
	}
	runs, next, err := r.sh.QueryRuns(ctx, q)
	if err != nil && !errors.Is(err, ErrUnsupported) {
		return nil, RunCursor{}, unavailable("query runs", err)
	}
	return runs, next, err
}

// RunByID returns the record of the run with id runID (the id
// [Runner.RunNow] returns, or the run_id of a record), from the store's
// [RunStore], or from the runs the runner keeps when it has no store. A
// run id unknown, no longer kept, or of a run queued or in flight (its
// record is written when it ends) is an error wrapping [ErrNotFound]; a
// store that cannot answer gives an error wrapping [ErrUnsupported].
// Reading a record needs no authorization: front ends allow it to every
// role that reads the history.
func (r *Runner) RunByID(ctx context.Context, runID string) (Run, error) {
	if runID == "" {
		return Run{}, fmt.Errorf("%w: run %q", ErrNotFound, runID)
	}
	run, err := r.sh.RunByID(ctx, runID)
	if errors.Is(err, ErrNotFound) {
		return Run{}, fmt.Errorf("%w: run %q", ErrNotFound, runID)
	}
	if err != nil && !errors.Is(err, ErrUnsupported) {
		return Run{}, unavailable(fmt.Sprintf("run %q", runID), err)
	}
	return run, err
}

// notCalled builds the record, at now, of the job's slots in (after,
// until] not called for reason: false when none falls there.
func notCalled(e *entry, after, until time.Time, st Status, reason string, now time.Time) (Run, bool) {
	s := e.schedule()
	first := s.Next(after)
	if first.IsZero() || first.After(until) {
		return Run{}, false
	}
	n := 1 + countSlots(s, first, until, maxBurstCount-1)
	run := Run{JobID: e.id, ScheduledAt: first.UTC(), TriggeredAt: now.UTC(), FinishedAt: now.UTC(), Status: st, Reason: reason}
	if n > 1 {
		run.Slots = n
	}
	return run, true
}

// endPause records, when e is resumed at now, the slots that passed since
// it was paused at from (its paused_at, Unix ns) up to until (at most
// now) as one skipped run of reason [ReasonPaused]. A pause whose start is
// not known (from 0: the job was paused before paused_at was kept)
// records nothing. mu is held.
func (r *Runner) endPause(e *entry, from, until, now int64) {
	if run, ok := pausedRun(e, from, until, now); ok {
		r.finish(run, false)
	}
}

// pausedRun builds the record, made at now, of the slots of e that passed
// while it was paused, after from (Unix ns) and up to until: false when
// none did, or when from is 0.
func pausedRun(e *entry, from, until, now int64) (Run, bool) {
	if from == 0 || from >= until {
		return Run{}, false
	}
	return notCalled(e, fromNano(from), fromNano(until), StatusSkipped, ReasonPaused, fromNano(now))
}
