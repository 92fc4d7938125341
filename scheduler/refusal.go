package scheduler

import (
	"errors"

	"github.com/ksana-dev/ksana/fsm"
)

// Refusal codes: why the plane refused a message. They are the reason
// label of the rejected-events metric and the code of cmd/dispatcher's
// error frames.
const (
	RefusedBadMessage   = "bad_message"        // a field is missing or wrong ([*MessageError])
	RefusedWrongNode    = "wrong_node"         // the job is not on the node that reported it ([ErrWrongNode])
	RefusedStaleAttempt = "stale_attempt"      // an event of an attempt that is over ([fsm.ErrStaleAttempt])
	RefusedTransition   = "invalid_transition" // any other move the job's lifecycle refuses ([*fsm.TransitionError])
	RefusedJobNotFound  = "job_not_found"      // no such job, or its record expired ([ErrJobNotFound])
	RefusedStopping     = "stopping"           // the Dispatcher has stopped ([ErrStopped])
)

// Refusal classifies an error of the Dispatcher: the refusal code of a
// message the plane refused on purpose (nothing changed, and sending it
// again changes nothing), or "" for any other error (a store that failed,
// worth a retry or a log line).
func Refusal(err error) string {
	var te *fsm.TransitionError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrBadMessage):
		return RefusedBadMessage
	case errors.Is(err, ErrWrongNode):
		return RefusedWrongNode
	case errors.Is(err, fsm.ErrStaleAttempt):
		return RefusedStaleAttempt
	case errors.As(err, &te):
		return RefusedTransition
	case errors.Is(err, ErrJobNotFound):
		return RefusedJobNotFound
	case errors.Is(err, ErrStopped):
		return RefusedStopping
	}
	return ""
}
