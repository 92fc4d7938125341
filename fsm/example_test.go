package fsm_test

import (
	"errors"
	"fmt"

	"github.com/ksana-dev/ksana/fsm"
)

// A job is dispatched, times out on its first node, is dispatched again and
// finishes; a late message from the first attempt is refused as stale, and
// a replayed result is a harmless duplicate.
func Example() {
	m := fsm.Machine{MaxAttempts: 3}
	job := fsm.New()
	step := func(ev fsm.Event, attempt int) {
		out, err := m.Apply(job, ev, attempt)
		switch {
		case errors.Is(err, fsm.ErrStaleAttempt):
			fmt.Printf("%-11s attempt %d: stale, dropped\n", ev, attempt)
		case err != nil:
			fmt.Printf("%-11s attempt %d: %v\n", ev, attempt, err)
		default:
			job = out.Job
			fmt.Printf("%-11s attempt %d: %s attempt %d duplicate=%v free=%v\n",
				ev, attempt, job.State, job.Attempt, out.Duplicate, out.FreeReservation)
		}
	}
	step(fsm.Dispatch, 1)
	step(fsm.Ack, 1)
	step(fsm.Timeout, 1)
	step(fsm.Start, 1) // the first node, too late
	step(fsm.Dispatch, 2)
	step(fsm.Start, 2)
	step(fsm.Result, 2)
	step(fsm.Result, 2) // redelivered
	step(fsm.Release, 2)
	// Output:
	// dispatch    attempt 1: DISPATCHED attempt 1 duplicate=false free=false
	// job_ack     attempt 1: ACCEPTED attempt 1 duplicate=false free=false
	// timeout     attempt 1: CREATED attempt 2 duplicate=false free=true
	// job_started attempt 1: stale, dropped
	// dispatch    attempt 2: DISPATCHED attempt 2 duplicate=false free=false
	// job_started attempt 2: RUNNING attempt 2 duplicate=false free=false
	// job_result  attempt 2: FINISHED attempt 2 duplicate=false free=true
	// job_result  attempt 2: FINISHED attempt 2 duplicate=true free=false
	// release     attempt 2: RELEASED attempt 2 duplicate=false free=false
}
