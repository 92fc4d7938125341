package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ksana-dev/ksana/fsm"
)

// Errors of the job, reservation, request and turn stores.
var (
	// ErrJobNotFound: no job has the id (or its record expired).
	ErrJobNotFound = errors.New("job not found")
	// ErrJobCorrupt: the stored job record does not decode (an unknown
	// state, a bad attempt). The record is left as it is.
	ErrJobCorrupt = errors.New("corrupt job record")
	// ErrInvalidArgument: an argument is empty or out of range; the
	// [*ArgumentError] names it.
	ErrInvalidArgument = errors.New("invalid argument")
)

// ArgumentError names an argument that a store refused. Nothing was
// stored.
type ArgumentError struct {
	Name   string // the argument, such as "job_id" or "capacity"
	Reason string // what is wrong with it
}

// Error names the argument and what is wrong with it.
func (e *ArgumentError) Error() string { return e.Name + ": " + e.Reason }

// Unwrap returns [ErrInvalidArgument].
func (e *ArgumentError) Unwrap() error { return ErrInvalidArgument }

func argErr(name, reason string) error { return &ArgumentError{Name: name, Reason: reason} }

// checkID refuses an empty id.
func checkID(name, id string) error {
	if id == "" {
		return argErr(name, "empty")
	}
	return nil
}

// JobRecord is a job's lifecycle state: in Redis the fields state,
// attempt, node_id, created_at_ms, updated_at_ms, dispatched_at_ms and
// queued_at_ms of the job's hash {prefix}:v1:jobs:{due:<n>}:{job:<job_id>}:fsm.
type JobRecord struct {
	ID string
	fsm.Job
	// NodeID is the node of the job's current attempt, set by
	// [fsm.Dispatch]; "" while the job waits in [fsm.Created].
	NodeID    string
	CreatedAt time.Time // when the job was created
	UpdatedAt time.Time // when an event last changed it
	// DispatchedAt is when the job was last dispatched (zero before its
	// first dispatch): its current attempt's start while it is on a node.
	DispatchedAt time.Time
	// QueuedAt is when the job began to wait for a node in its current
	// attempt: its creation, or the step that ended its previous attempt.
	// A job_assign that could not reach its node ([fsm.Undelivered]) does
	// not move it: the wait goes on. [JobStore.Job] returns it; the
	// transitions of a store may leave it zero, which means UpdatedAt.
	QueuedAt time.Time
}

// WaitingSince returns when the job began to wait for a node in its
// current attempt: QueuedAt, or UpdatedAt when QueuedAt is zero.
func (r JobRecord) WaitingSince() time.Time {
	if r.QueuedAt.IsZero() {
		return r.UpdatedAt
	}
	return r.QueuedAt
}

// JobTransition is what [JobStore.ApplyJob] did.
type JobTransition struct {
	// Job is the record after the event (unchanged for a duplicate).
	Job JobRecord
	// Duplicate is true when the event had already been applied in this
	// attempt (see [fsm.Machine.Apply]).
	Duplicate bool
	// FreeNode is the node whose reservation for the job the caller must
	// free ([ReservationStore.Release]): set when the event took the job off
	// its node (a result, a timeout, a failover), "" otherwise. A duplicate
	// of such an event names the node again, so that a caller replaying it
	// after a crash between the step and Release frees the slot then.
	FreeNode string
}

// JobStore keeps one record per job: its lifecycle, its spec, the nodes
// it was tried on, the sessions waiting for it and its outcome. Every
// method is one atomic step on that record, so concurrent instances agree
// on every job, and no step leaves the record half written: a job is
// never in [fsm.Finished] or [fsm.Failed] without its outcome. In Redis
// the record is the hash {prefix}:v1:jobs:{due:<n>}:{job:<job_id>}:fsm and each
// step one script call. Implementations: [MemJobs]; store/redisstore.Jobs.
// Each passes store/storetest.TestJobStore and store/storetest.TestJobBook.
//
// A node's reservations live elsewhere (in another Redis Cluster slot): a
// step that takes a job off its node names the node in
// [JobTransition.FreeNode] and the caller frees the slot there with
// [ReservationStore.Release]. A crash in between leaves the reservation to
// its expiry.
type JobStore interface {
	// Open stores a new job in [fsm.New]'s state with spec as its spec
	// and spec.SessionID as its first waiter, unless the job exists. With
	// a nodeID, the job it creates is dispatched to that node in the same
	// step, as [fsm.Dispatch] of the first attempt would (the node joins
	// its tried nodes). It returns the stored record and book either way,
	// and whether this call created the job: of any number of concurrent
	// Opens of one job id exactly one gets true.
	//
	// Open also makes due the job's deadline in the plane's [DueIndex]
	// unless it has one (whether or not this call creates the job), in
	// the same atomic step or before the job is stored: a job that a
	// sweeper may find is never without a deadline.
	Open(ctx context.Context, jobID string, spec JobSpec, nodeID string, due time.Time) (JobRecord, BookEntry, bool, error)
	// Job returns the job's lifecycle, or [ErrJobNotFound].
	Job(ctx context.Context, jobID string) (JobRecord, error)
	// Entry returns the job's book, or [ErrJobNotFound].
	Entry(ctx context.Context, jobID string) (BookEntry, error)
	// Watch adds sessionID to the job's waiters, unless the job has an
	// outcome already: then it returns the outcome and true, and adds
	// nothing. Exactly one of Watch and [JobStore.Finish] sees a session
	// that races with the job's end: Watch returns the outcome, or Finish
	// lists the session.
	Watch(ctx context.Context, jobID, sessionID string) (Outcome, bool, error)
	// ApplyJob applies ev, carrying attempt, atomically, following
	// [fsm.Machine.Apply] with the store's MaxAttempts. For [fsm.Dispatch],
	// nodeID is the node the job goes to (required), and it joins the
	// job's tried nodes in the same step. For any other event a non-empty
	// nodeID is the node reporting it: unless the job is on that node, the
	// event is refused with [ErrWrongNode] (after the attempt checks), so
	// a node can move only its own jobs. A refused event returns the
	// [*fsm.TransitionError] of [fsm.Machine.Apply] and changes nothing; an
	// unknown job is [ErrJobNotFound]; a record that does not decode is
	// [ErrJobCorrupt].
	ApplyJob(ctx context.Context, jobID string, ev fsm.Event, attempt int, nodeID string) (JobTransition, error)
	// Finish is ApplyJob that also stores out as the job's outcome when
	// the step (or its duplicate) leaves the job in [fsm.Finished] or
	// [fsm.Failed] and no outcome is stored yet, in the same atomic step.
	// It returns the job's book after the step: its spec without its
	// payload (which the job's end needs no more, and which may be large),
	// its waiters and its outcome (nil while the job is not over).
	Finish(ctx context.Context, jobID string, ev fsm.Event, attempt int, nodeID string, out Outcome) (JobTransition, BookEntry, error)
	// ReleaseJobs applies [fsm.Release] to each job, carrying its attempt,
	// as ApplyJob would, all in one call (in Redis one pipeline): a job's
	// transition and error are at its index.
	ReleaseJobs(ctx context.Context, jobs []JobAttempt) ([]JobTransition, []error)
}

// SlotOpener is an optional capability of a [JobStore] that also keeps
// the plane's node reservations (store/redisstore's Jobs does): the
// Dispatcher opens a new job dispatched to its node in one step with the
// slot it takes there, where it would otherwise call
// [ReservationStore.Reserve] and then [JobStore.Open].
type SlotOpener interface {
	// OpenOnSlot is [JobStore.Open] with a node, for a job that takes one
	// of nodeID's capacity slots (for ttl, as [ReservationStore.Reserve]
	// takes it): a job it creates holds the slot, a node whose capacity
	// is taken refuses with [ErrNodeFull] and nothing is stored, and a
	// job that exists is returned as Open returns it, with no slot taken.
	OpenOnSlot(ctx context.Context, jobID string, spec JobSpec, nodeID string, capacity int, ttl time.Duration, due time.Time) (JobRecord, BookEntry, bool, error)
}

// AttemptLimit is an optional capability of a [JobStore] whose steps
// enforce a number of attempts of their own ([MemJobs] and
// store/redisstore's Jobs do: they apply [fsm.Machine] with the
// MaxAttempts they were built with). [NewDispatcher] refuses a store whose
// limit differs from its Config.Dispatch.MaxAttempts, instead of letting
// the store's silently win.
type AttemptLimit interface {
	// MaxAttempts returns the attempts a job gets, defaults applied
	// ([fsm.Machine.Max]).
	MaxAttempts() int
}

// JobAttempt names one attempt of a job.
type JobAttempt struct {
	ID      string
	Attempt int
}

// CheckJobEvent validates the arguments of [JobStore.ApplyJob] that the
// state machine does not check (the job id, the node of a dispatch), for
// implementations to call first.
func CheckJobEvent(jobID string, ev fsm.Event, nodeID string) error {
	if err := checkID("job_id", jobID); err != nil {
		return err
	}
	if ev == fsm.Dispatch && nodeID == "" {
		return argErr("node_id", fmt.Sprintf("empty for %s", ev))
	}
	return nil
}
