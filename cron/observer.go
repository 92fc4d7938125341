package cron

import "time"

// Observer sees every run of every job: each finished run, and each slot
// that was skipped (the previous run was still in flight) or missed (a once
// job past due), with Attempts 0. The runner calls it from one goroutine,
// its recorder, after the run's bookkeeping is handed to the store, in the
// order the runs ended; it must be fast: a slow observer delays the
// bookkeeping of the runs behind it (never the runs themselves). It is the
// hook for metrics (lag, latency, outcome counts) without a metrics
// dependency.
type Observer interface {
	RunFinished(r Run)
}

// ObserverFunc adapts a function to [Observer].
type ObserverFunc func(r Run)

// RunFinished calls f(r).
func (f ObserverFunc) RunFinished(r Run) { f(r) }

// Lag returns how late the run started: TriggeredAt minus ScheduledAt.
// For a run of a jittered every job, ScheduledAt already includes the
// jitter, so the lag measures the runner alone.
func (r Run) Lag() time.Duration {
	if r.ScheduledAt.IsZero() || r.TriggeredAt.IsZero() {
		return 0
	}
	return r.TriggeredAt.Sub(r.ScheduledAt)
}
