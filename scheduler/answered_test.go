package scheduler

import (
	"strconv"
	"testing"
	"time"
)

// A session forgets the jobs answered before the cutoff and keeps the
// others, whatever the order of its queue says about a job answered again.
func TestSessionForgetsOldAnswers(t *testing.T) {
	s := &localSession{answered: map[string]time.Time{}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 5000 {
		s.markAnswered("j"+strconv.Itoa(i), t0.Add(time.Duration(i)*time.Millisecond))
	}
	// j0 answered again later (an expired request answered twice): the
	// old queue entry must not take the new answer out.
	s.markAnswered("j0", t0.Add(10*time.Second))

	s.forget(t0.Add(3000 * time.Millisecond))
	if len(s.answered) != 2001 {
		t.Fatalf("after forgetting the first 3000: %d remembered, want 2001", len(s.answered))
	}
	for _, j := range []string{"j0", "j3000", "j4999"} {
		if _, ok := s.answered[j]; !ok {
			t.Errorf("%s forgotten too early", j)
		}
	}
	if _, ok := s.answered["j2999"]; ok {
		t.Error("j2999 still remembered")
	}
	if got := len(s.order) - s.head; got != 2001 {
		t.Errorf("queue holds %d entries, want 2001", got)
	}
	if s.head > len(s.order)/2 && s.head > 1024 {
		t.Errorf("queue not compacted: head %d of %d", s.head, len(s.order))
	}

	s.forget(t0.Add(time.Hour))
	if len(s.answered) != 0 || len(s.order) != 0 || s.head != 0 {
		t.Errorf("after forgetting all: %d remembered, queue %d from %d", len(s.answered), len(s.order), s.head)
	}
}
