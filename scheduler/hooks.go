package scheduler

import "time"

// Hooks are the metric sources of the dispatch plane. A binary builds its
// metrics from them: scheduler_phase2_inbox_pending from InboxPending,
// scheduler_phase2_dlq_moved_total from DLQMoved (the third metric,
// scheduler_phase2_redis_op_total{op,result}, comes from the Redis adapter's
// operation hook). Each hook is optional, must be fast and is called from
// the loop that observed the event.
type Hooks struct {
	// InboxPending receives the inbox's pending count (XPENDING summary)
	// every dlq_scan_interval_ms: the scheduler_phase2_inbox_pending gauge.
	InboxPending func(n int64)
	// DLQMoved is called once per entry moved to the dead-letter queue:
	// the scheduler_phase2_dlq_moved_total counter.
	DLQMoved func(d DeadLetter)
	// DeliveryHandled is called after a handler returns, with the result
	// and how long the handler took. Optional.
	DeliveryHandled func(m Message, err error, d time.Duration)
}
