package cron

import "time"

// misfireDecision says what to do with a slot that was due at Due but is seen
// only at Now.
type misfireDecision struct {
	Run    bool      // run the missed slot once, now
	Status Status    // StatusMissed when a once job is dropped; "" otherwise
	Next   time.Time // the job's next slot after now (zero: no further run)
}

// decideMisfire decides for schedule s whose slot due was missed, seen at now, with
// grace g. The rule, with its opt-in grace:
//
//   - if now-due < g (g > 0): Run = true (the slot runs once, late);
//     Next = s.Next(now);
//   - else a once schedule (one with no further run: s.Next(now) is zero):
//     Run = false, Status = [StatusMissed], Next zero;
//   - else every and cron schedules: Run = false, Next = s.Next(now): the job
//     rolls to its next future slot, with no catch-up of the slots in
//     between (countSlots says how many there were, for a log line).
//
// A slot seen exactly at its due time is on time (Run = true, Next =
// s.Next(now)), whatever g. A slot not yet due (now before due) is left
// alone: Run = false, Next = due.
func decideMisfire(s Schedule, due, now time.Time, grace time.Duration) misfireDecision {
	if now.Before(due) {
		return misfireDecision{Next: due}
	}
	next := s.Next(now)
	if now.Equal(due) || (grace > 0 && now.Sub(due) < grace) {
		return misfireDecision{Run: true, Next: next}
	}
	if next.IsZero() {
		return misfireDecision{Status: StatusMissed}
	}
	return misfireDecision{Next: next}
}

// defaultCountLimit is the limit countSlots applies when given max <= 0.
const defaultCountLimit = 1000

// countSlots returns how many run times of s fall in (after, until], counting
// at most max (max <= 0: defaultCountLimit). The cost is constant for
// once and every schedules and an @every [CronSchedule]; other schedules are stepped
// through with Next, so max bounds the work.
func countSlots(s Schedule, after, until time.Time, max int) int {
	if max <= 0 {
		max = defaultCountLimit
	}
	if !until.After(after) {
		return 0
	}
	var n int64
	switch s := s.(type) {
	case onceSchedule:
		if s.At.After(after) && !s.At.After(until) {
			n = 1
		}
	case *onceSchedule:
		return countSlots(*s, after, until, max)
	case everySchedule:
		n = s.countUpTo(until) - s.countUpTo(after)
	case *everySchedule:
		return countSlots(*s, after, until, max)
	case *CronSchedule:
		if s == nil || s.every <= 0 {
			return countByNext(s, after, until, max)
		}
		ku, _ := gridFloor(s.origin, s.every, until)
		ka, _ := gridFloor(s.origin, s.every, after)
		n = ku - ka
	default:
		return countByNext(s, after, until, max)
	}
	if n > int64(max) {
		return max
	}
	return int(n)
}

func countByNext(s Schedule, after, until time.Time, max int) int {
	if s == nil {
		return 0
	}
	n := 0
	for t := after; n < max; n++ {
		t = s.Next(t)
		if t.IsZero() || t.After(until) {
			break
		}
	}
	return n
}

// countUpTo returns how many run times of e are at or before t.
func (e everySchedule) countUpTo(t time.Time) int64 {
	if e.Interval <= 0 || t.Before(e.Start) {
		return 0
	}
	k, slot := gridFloor(e.Start, e.Interval, t)
	// Runs 0..k-1 lie before slot k, so at or before t.
	if !slot.Add(e.offset(k)).After(t) {
		return k + 1
	}
	return k
}
