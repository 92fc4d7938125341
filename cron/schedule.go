package cron

import (
	"time"
)

// A Schedule says when a job runs. Next returns the first run time strictly
// after after, or the zero time when there is no further run. A Schedule is a
// pure function of its argument: no clock, no goroutines, no I/O.
type Schedule interface {
	Next(after time.Time) time.Time
}

// onceSchedule runs a single time, at At.
type onceSchedule struct {
	At time.Time
}

// Next returns At when it lies after after, else the zero time.
func (o onceSchedule) Next(after time.Time) time.Time {
	if o.At.After(after) {
		return o.At
	}
	return time.Time{}
}

// everySchedule runs on the grid Start + k*Interval (k = 0, 1, 2, ...). The next slot
// is computed from the grid, never from when a run finished, so a schedule
// does not drift however long its runs take.
//
// Jitter, when positive, delays each run by an offset in [0, Jitter) without
// moving the grid. The offset of slot k is a hash of (Seed, k): it looks
// random but is a pure function, so Next gives the same answer each time it
// is asked and a restart does not re-roll it. Jitter must be below Interval,
// which keeps the run times strictly increasing ([ScheduleSpec.Validate]
// checks it; a larger Jitter is clamped to Interval).
type everySchedule struct {
	Interval time.Duration
	Start    time.Time
	Jitter   time.Duration
	Seed     uint64
}

// Next returns the first run time (slot plus its jitter) strictly after after.
// It returns the zero time when Interval is not positive. Before Start, the
// first run is slot 0. The cost is constant, however far after lies from
// Start.
func (e everySchedule) Next(after time.Time) time.Time {
	if e.Interval <= 0 {
		return time.Time{}
	}
	if after.Before(e.Start) {
		return e.Start.Add(e.offset(0))
	}
	k, slot := gridFloor(e.Start, e.Interval, after)
	if t := slot.Add(e.offset(k)); t.After(after) {
		return t
	}
	return slot.Add(e.Interval).Add(e.offset(k + 1))
}

// Slot returns the grid slot that run time t belongs to: t less its jitter.
// Times before Start, and every t when Interval is not positive, are
// returned unchanged.
func (e everySchedule) Slot(t time.Time) time.Time {
	if e.Interval <= 0 || t.Before(e.Start) {
		return t
	}
	_, slot := gridFloor(e.Start, e.Interval, t)
	return slot
}

// offset is the jitter of slot k: a hash of (Seed, k) reduced to [0, Jitter).
func (e everySchedule) offset(k int64) time.Duration {
	j := min(e.Jitter, e.Interval) // a Jitter at or above Interval is clamped
	if j <= 0 {
		return 0
	}
	return time.Duration(splitmix64(e.Seed^splitmix64(uint64(k))) % uint64(j))
}

// splitmix64 is a fast, well-mixed 64-bit hash (Steele, Lea, Flood 2014).
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// seedFor derives a jitter seed from a job id, so that every job spreads its
// runs differently but each job always the same way.
func seedFor(id string) uint64 {
	// FNV-1a, then mixed.
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	return splitmix64(h)
}
