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

// JobRecord is a job's stored lifecycle state: in Redis the hash
// {prefix}:v1:jobs:{job:<job_id>}:fsm with the fields state, attempt,
// node_id, created_at_ms and updated_at_ms.
type JobRecord struct {
	ID string
	fsm.Job
	// NodeID is the node of the job's current attempt, set by
	// [fsm.Dispatch]; "" while the job waits in [fsm.Created].
	NodeID    string
	CreatedAt time.Time // when the job was created
	UpdatedAt time.Time // when an event last changed it
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
	// after a crash between ApplyJob and Release frees the slot then.
	FreeNode string
}

// JobStore keeps each job's lifecycle and applies [fsm] events to it
// atomically, so that concurrent instances agree on every job's state.
// Implementations: [MemJobs]; store/redisstore.Jobs. Each passes
// store/storetest.TestJobStore.
//
// Finishing a job takes three calls, because the job and its node's
// reservations live in different keys (different Redis Cluster slots):
// ApplyJob([fsm.Result]) returns FreeNode, [ReservationStore.Release] frees
// the slot there, and ApplyJob([fsm.Release]) records it. A timeout or
// failover takes two: ApplyJob, then Release on FreeNode. A crash in
// between leaves the reservation to its expiry.
type JobStore interface {
	// CreateJob stores a new job in [fsm.New]'s state. When the job exists
	// already it returns the stored record and created false (create_job
	// is idempotent).
	CreateJob(ctx context.Context, jobID string) (rec JobRecord, created bool, err error)
	// Job returns the job's record, or [ErrJobNotFound].
	Job(ctx context.Context, jobID string) (JobRecord, error)
	// ApplyJob applies ev, carrying attempt, atomically, following
	// [fsm.Machine.Apply] with the store's MaxAttempts. For [fsm.Dispatch],
	// nodeID is the node the job goes to (required). For any other event a
	// non-empty nodeID is the node reporting it: unless the job is on that
	// node, the event is refused with [ErrWrongNode] (after the attempt
	// checks), so a node can move only its own jobs. A refused event
	// returns the [*fsm.TransitionError] of [fsm.Machine.Apply] and changes
	// nothing; an unknown job is [ErrJobNotFound]; a record that does not
	// decode is [ErrJobCorrupt].
	ApplyJob(ctx context.Context, jobID string, ev fsm.Event, attempt int, nodeID string) (JobTransition, error)
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
