package scheduler

import (
	"fmt"
	"slices"
)

// JobSpec is what a job is about: the request it was made for and what a
// node needs to run it. It is written once, when the job is opened, and
// read by whichever instance dispatches the job again after a failover.
type JobSpec struct {
	RequestID string `json:"request_id"`
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id,omitempty"`
	Pool      string `json:"pool,omitempty"`
	Model     string `json:"model,omitempty"`
	// Reason is the finalize reason: manual and timeout end the turn,
	// max_duration (or none) keeps it going.
	Reason  string `json:"reason,omitempty"`
	Payload []byte `json:"payload,omitempty"`
	// Instance is the instance the request came through: where the
	// answer goes when the session's owner binding is missing.
	Instance string `json:"instance,omitempty"`
}

// Outcome statuses.
const (
	OutcomeResult = "result" // the node sent a result
	OutcomeFailed = "failed" // the job failed; Error says why
)

// Outcome is how a job ended: written once, and returned to every session
// that asks for the job afterwards.
type Outcome struct {
	Status  string `json:"status"` // OutcomeResult or OutcomeFailed
	NodeID  string `json:"node_id,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	Payload []byte `json:"payload,omitempty"`
	Error   string `json:"error,omitempty"`
}

// BookEntry is what a [JobStore] keeps about a job beside its lifecycle.
type BookEntry struct {
	Spec JobSpec
	// Tried lists the nodes the job was dispatched to, oldest first.
	Tried []string
	// Waiters are the sessions to answer, the opener first.
	Waiters []string
	// Outcome is set once the job ended.
	Outcome *Outcome
}

// CheckSpec validates a job spec for [JobStore.Open].
func CheckSpec(jobID string, spec JobSpec) error {
	if err := checkID("job_id", jobID); err != nil {
		return err
	}
	if err := checkID("request_id", spec.RequestID); err != nil {
		return err
	}
	return checkID("session_id", spec.SessionID)
}

// CheckOutcome validates an outcome for [JobStore.Finish].
func CheckOutcome(out Outcome) error {
	if out.Status != OutcomeResult && out.Status != OutcomeFailed {
		return argErr("status", fmt.Sprintf("%q (result|failed)", out.Status))
	}
	return nil
}

func cloneEntry(e BookEntry) BookEntry {
	e.Tried = slices.Clone(e.Tried)
	e.Waiters = slices.Clone(e.Waiters)
	e.Spec.Payload = slices.Clone(e.Spec.Payload)
	if e.Outcome != nil {
		o := *e.Outcome
		o.Payload = slices.Clone(o.Payload)
		e.Outcome = &o
	}
	return e
}
