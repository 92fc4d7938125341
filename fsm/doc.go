// Package fsm is the lifecycle of a dispatched job: its states, the events
// that move it, one transition table, and a pure [Apply].
//
// # States and events
//
// A job is created in [Created] with attempt 1 ([New]). The dispatch plane
// sends it to a node ([Dispatch]: [Dispatched]); the node acknowledges it
// ([Ack], job_ack: [Accepted]), starts it ([Start], job_started: [Running],
// from [Dispatched] or [Accepted]) and sends its result ([Result],
// job_result: [Finished], from any of the three active states). Once the
// job's reservation on its node is freed, [Release] records it
// ([Released]). "A job result finishes and releases the job" is thus two
// events: the reservation lives in another key (another Redis
// Cluster slot) than the job, so freeing it cannot be atomic with the
// result, and [Finished] is the honest name of the moment in between. A job
// left in [Finished] by a crash still has its reservation freed by the
// reservation's expiry.
//
// # Attempts, timeouts and failover
//
// Every event carries the attempt it belongs to: the dispatch plane
// dispatches with the job's current attempt, and nodes echo the attempt of
// the dispatch they received. A [Timeout] or [Failover] of an active job
// ends its current attempt: the job goes back to [Created] with the attempt
// incremented, to be dispatched again, or, when it has had
// [Machine].MaxAttempts attempts (default [DefaultMaxAttempts]), ends in
// [Failed]. An [Undelivered] job (dispatched, but its job_assign never
// reached the node) goes back to [Created] in the same attempt: the node
// never began it, so it costs no attempt. [Outcome].FreeReservation tells
// the caller when an event took the job off its node.
//
// An event is checked against the job's attempt before the table is
// consulted: an older attempt is [ErrStaleAttempt] (a late message from a
// superseded dispatch, including a replay of the timeout that superseded
// it: drop it), a newer one [ErrFutureAttempt]. With the job's own attempt,
// an event that the job has already seen in this attempt is a duplicate:
// [Apply] returns the job unchanged with [Outcome].Duplicate set and no
// error, so replays and redeliveries are harmless. A job_ack that arrives
// after job_started counts as seen. Anything else the table does not allow
// is [ErrInvalidTransition]. Errors are [*TransitionError] values wrapping
// the sentinel; the job they carry is unchanged.
//
// A job that no node takes while it waits in [Created] ends with [Fail]
// in [Failed], without an attempt on a node.
//
// # The table
//
// [Table] and [Duplicates] expose the rules; the Redis adapter
// (store/redisstore) generates its Lua script from them, so the rules
// exist once. [Mermaid] renders the moves (testdata/fsm.mmd holds the
// current rendering):
//
//	stateDiagram-v2
//	    [*] --> CREATED
//	    CREATED --> DISPATCHED : dispatch
//	    DISPATCHED --> ACCEPTED : job_ack
//	    DISPATCHED --> RUNNING : job_started
//	    ACCEPTED --> RUNNING : job_started
//	    DISPATCHED --> FINISHED : job_result
//	    ACCEPTED --> FINISHED : job_result
//	    RUNNING --> FINISHED : job_result
//	    FINISHED --> RELEASED : release
//	    DISPATCHED --> CREATED : timeout (attempt < max, attempt+1)
//	    DISPATCHED --> FAILED : timeout (attempt = max)
//	    ACCEPTED --> CREATED : timeout (attempt < max, attempt+1)
//	    ACCEPTED --> FAILED : timeout (attempt = max)
//	    RUNNING --> CREATED : timeout (attempt < max, attempt+1)
//	    RUNNING --> FAILED : timeout (attempt = max)
//	    DISPATCHED --> CREATED : failover (attempt < max, attempt+1)
//	    DISPATCHED --> FAILED : failover (attempt = max)
//	    ACCEPTED --> CREATED : failover (attempt < max, attempt+1)
//	    ACCEPTED --> FAILED : failover (attempt = max)
//	    RUNNING --> CREATED : failover (attempt < max, attempt+1)
//	    RUNNING --> FAILED : failover (attempt = max)
//	    CREATED --> FAILED : fail
//	    DISPATCHED --> CREATED : undelivered
//	    RELEASED --> [*]
//	    FAILED --> [*]
//
// Duplicates (same attempt, nothing changes): dispatch in DISPATCHED and
// later; job_ack in ACCEPTED and later; job_started in RUNNING and later;
// job_result in FINISHED and RELEASED; release in RELEASED; timeout and
// failover, fail and undelivered in FAILED.
package fsm
