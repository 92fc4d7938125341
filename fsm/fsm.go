package fsm

import (
	"errors"
	"fmt"
	"slices"
)

// State is where a job is in its lifecycle. The values are upper-case words
// (CREATED, DISPATCHED, ...) and are what the Redis adapter stores.
type State string

// The states of a job.
const (
	Created    State = "CREATED"    // waiting to be dispatched (first time, or again after a timeout or failover)
	Dispatched State = "DISPATCHED" // sent to a node
	Accepted   State = "ACCEPTED"   // the node received and queued it (job_ack)
	Running    State = "RUNNING"    // the node started it (job_started)
	Finished   State = "FINISHED"   // a result arrived; the node's reservation is to be freed
	Released   State = "RELEASED"   // the reservation is freed: the job is done
	Failed     State = "FAILED"     // it timed out or failed over MaxAttempts times: the job is over
)

// Event is something that happens to a job. The values are what callers
// pass and what the Redis adapter's script receives.
type Event string

// The events of a job.
const (
	Dispatch Event = "dispatch"    // the dispatch plane sent the job to a node (mark_job_dispatched)
	Ack      Event = "job_ack"     // the node received and queued the job
	Start    Event = "job_started" // the node started the job
	Result   Event = "job_result"  // the node sent the job's result
	Release  Event = "release"     // the job's reservation on its node is freed
	Timeout  Event = "timeout"     // the job did not finish in time on its node
	Failover Event = "failover"    // the job's node or owning instance is gone
	Fail     Event = "fail"        // no node took the job while it waited: it ends without an attempt on a node
	// Undelivered: the job was dispatched, but its job_assign could not
	// reach the node (gone, or not connected where the fleet view said): the
	// job waits for a node again in the same attempt, which the node never
	// began.
	Undelivered Event = "undelivered"
)

// DefaultMaxAttempts is the number of attempts a [Machine] with a zero
// MaxAttempts allows.
const DefaultMaxAttempts = 3

// States returns every state, in lifecycle order.
func States() []State {
	return []State{Created, Dispatched, Accepted, Running, Finished, Released, Failed}
}

// Events returns every event, in lifecycle order.
func Events() []Event {
	return []Event{Dispatch, Ack, Start, Result, Release, Timeout, Failover, Fail, Undelivered}
}

// Valid reports whether s is one of [States].
func (s State) Valid() bool {
	switch s {
	case Created, Dispatched, Accepted, Running, Finished, Released, Failed:
		return true
	}
	return false
}

// Valid reports whether e is one of [Events].
func (e Event) Valid() bool {
	switch e {
	case Dispatch, Ack, Start, Result, Release, Timeout, Failover, Fail, Undelivered:
		return true
	}
	return false
}

// Active reports whether a job in s is on a node: [Dispatched], [Accepted]
// or [Running].
func (s State) Active() bool { return s == Dispatched || s == Accepted || s == Running }

// Terminal reports whether no event moves a job in s any more: [Released]
// or [Failed].
func (s State) Terminal() bool { return s == Released || s == Failed }

// ParseState returns the state spelled s, or an error wrapping
// [ErrUnknownState].
func ParseState(s string) (State, error) {
	if st := State(s); st.Valid() {
		return st, nil
	}
	return "", fmt.Errorf("fsm: state %q: %w", s, ErrUnknownState)
}

// ParseEvent returns the event spelled s, or an error wrapping
// [ErrUnknownEvent].
func ParseEvent(s string) (Event, error) {
	if ev := Event(s); ev.Valid() {
		return ev, nil
	}
	return "", fmt.Errorf("fsm: event %q: %w", s, ErrUnknownEvent)
}

// Job is the part of a job that the state machine reads and writes.
type Job struct {
	State State
	// Attempt counts the job's dispatch attempts, starting at 1. A timeout
	// or failover that sends the job back to Created increments it.
	Attempt int
}

// New returns the state of a job just created: [Created], attempt 1.
func New() Job { return Job{State: Created, Attempt: 1} }

// Outcome is what an event did to a job.
type Outcome struct {
	// Job is the job after the event. For a duplicate it is the job as it was.
	Job Job
	// Duplicate is true when the event had already been applied in this
	// attempt: nothing changed.
	Duplicate bool
	// FreeReservation is true when the event moved the job off its node
	// (a result, a timeout or a failover): the caller frees the job's
	// reservation on that node.
	FreeReservation bool
}

// Errors returned by [Apply], wrapped in a [*TransitionError].
var (
	// ErrUnknownState: the job's state is not one of [States].
	ErrUnknownState = errors.New("unknown state")
	// ErrUnknownEvent: the event is not one of [Events].
	ErrUnknownEvent = errors.New("unknown event")
	// ErrInvalidAttempt: an attempt below 1, on the event or the job.
	ErrInvalidAttempt = errors.New("invalid attempt")
	// ErrStaleAttempt: the event belongs to an attempt older than the job's:
	// it was superseded by a timeout or failover and must be dropped.
	ErrStaleAttempt = errors.New("stale attempt")
	// ErrFutureAttempt: the event carries an attempt the job has not
	// reached. Attempts are only ever started by this machine, so such an
	// event is forged or belongs to another job.
	ErrFutureAttempt = errors.New("future attempt")
	// ErrInvalidTransition: the table has no move for the event from the
	// job's state, and the event was not already applied in this attempt.
	ErrInvalidTransition = errors.New("invalid transition")
)

// TransitionError is the error of an event that [Apply] refused. Err is one
// of the package's sentinels; errors.Is sees through it.
type TransitionError struct {
	Job     Job   // the job as it was (unchanged)
	Event   Event // the event refused
	Attempt int   // the attempt the event carried
	Err     error // the reason: ErrUnknownState, ErrStaleAttempt, ...
}

// Error describes the refused event and the job.
func (e *TransitionError) Error() string {
	return fmt.Sprintf("fsm: %s (attempt %d) on job %s (attempt %d): %v",
		e.Event, e.Attempt, e.Job.State, e.Job.Attempt, e.Err)
}

// Unwrap returns the sentinel.
func (e *TransitionError) Unwrap() error { return e.Err }

// Machine applies the transition table with a limit on attempts. The zero
// value is ready to use.
type Machine struct {
	// MaxAttempts is the number of attempts a job gets: a timeout or
	// failover in attempt MaxAttempts ends the job in [Failed] instead of
	// starting another attempt. Values below 1 mean [DefaultMaxAttempts].
	MaxAttempts int
}

// Max returns the effective MaxAttempts.
func (m Machine) Max() int {
	if m.MaxAttempts < 1 {
		return DefaultMaxAttempts
	}
	return m.MaxAttempts
}

// Apply applies ev, carrying attempt, to job, with [DefaultMaxAttempts].
// See [Machine.Apply].
func Apply(job Job, ev Event, attempt int) (Outcome, error) { return Machine{}.Apply(job, ev, attempt) }

// Apply returns what ev, sent for the given attempt, does to job. It is
// pure. The checks run in this order, and the first that fails returns a
// [*TransitionError] wrapping the sentinel named:
//
//  1. job.State is one of [States] ([ErrUnknownState]);
//  2. ev is one of [Events] ([ErrUnknownEvent]);
//  3. attempt and job.Attempt are at least 1 ([ErrInvalidAttempt]);
//  4. attempt is not below job.Attempt ([ErrStaleAttempt]);
//  5. attempt is not above job.Attempt ([ErrFutureAttempt]);
//  6. the table has a move for (job.State, ev): the job takes it; a move
//     marked Retry goes to [Created] with the attempt incremented while the
//     job has had fewer than MaxAttempts attempts, and to [Failed], attempt
//     unchanged, once it has had MaxAttempts;
//  7. the table marks (job.State, ev) as a duplicate: the job comes back
//     unchanged with Outcome.Duplicate set and no error;
//  8. otherwise [ErrInvalidTransition].
func (m Machine) Apply(job Job, ev Event, attempt int) (Outcome, error) {
	fail := func(err error) (Outcome, error) {
		return Outcome{Job: job}, &TransitionError{Job: job, Event: ev, Attempt: attempt, Err: err}
	}
	switch {
	case !job.State.Valid():
		return fail(ErrUnknownState)
	case !ev.Valid():
		return fail(ErrUnknownEvent)
	case attempt < 1 || job.Attempt < 1:
		return fail(ErrInvalidAttempt)
	case attempt < job.Attempt:
		return fail(ErrStaleAttempt)
	case attempt > job.Attempt:
		return fail(ErrFutureAttempt)
	}
	if t, ok := lookup(job.State, ev); ok {
		out := Outcome{Job: Job{State: t.To, Attempt: job.Attempt}, FreeReservation: t.FreeReservation}
		if t.Retry {
			if job.Attempt < m.Max() {
				out.Job.Attempt++
			} else {
				out.Job.State = Failed
			}
		}
		return out, nil
	}
	if slices.Contains(duplicates[job.State], ev) {
		return Outcome{Job: job, Duplicate: true}, nil
	}
	return fail(ErrInvalidTransition)
}

func lookup(s State, ev Event) (Transition, bool) {
	for _, t := range table {
		if t.From == s && t.Event == ev {
			return t, true
		}
	}
	return Transition{}, false
}
