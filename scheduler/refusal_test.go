package scheduler_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ksana-dev/ksana/fsm"
	"github.com/ksana-dev/ksana/scheduler"
)

func TestRefusal(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&fsm.TransitionError{Err: fsm.ErrStaleAttempt}, scheduler.RefusedStaleAttempt},
		{fmt.Errorf("x: %w", scheduler.ErrWrongNode), scheduler.RefusedWrongNode},
		{fmt.Errorf("job j: %w", scheduler.ErrJobNotFound), scheduler.RefusedJobNotFound},
		{&fsm.TransitionError{Err: fsm.ErrInvalidTransition}, scheduler.RefusedTransition},
		{&scheduler.MessageError{Field: "job_id", Reason: "empty"}, scheduler.RefusedBadMessage},
		{scheduler.ErrStopped, scheduler.RefusedStopping},
		{errors.New("connection reset"), ""},
		{nil, ""},
	} {
		if got := scheduler.Refusal(tc.err); got != tc.want {
			t.Errorf("Refusal(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
