package scheduler

import (
	"time"

	"github.com/ksana-dev/ksana/fsm"
)

// Hooks are the metric sources of the dispatch plane. A binary builds its
// metrics from them: scheduler_phase2_inbox_pending from InboxPending,
// scheduler_phase2_dlq_moved_total from DLQMoved (the third metric,
// scheduler_phase2_redis_op_total{op,result}, comes from the Redis adapter's
// operation hook). Each hook is optional, must be fast and is called from
// the loop that observed the event.
type Hooks struct {
	// InboxPending receives the inbox's count of entries delivered and not
	// yet acknowledged every Inbox.ScanInterval: the
	// scheduler_phase2_inbox_pending gauge.
	InboxPending func(n int64)
	// DLQMoved is called once per entry moved to the dead-letter queue:
	// the scheduler_phase2_dlq_moved_total counter.
	DLQMoved func(d DeadLetter)
	// DeliveryHandled is called after a handler returns, with the result
	// and how long the handler took. Optional.
	DeliveryHandled func(m Message, err error, d time.Duration)
	// Lost is called with the ids of inbox entries that were pending but
	// found deleted when they were taken over:
	// messages that were sent and will never be handled.
	Lost func(ids []string)

	// The hooks below come from the [Dispatcher].

	// JobState is called each time this instance moves a job into state s:
	// the jobs-by-state counter.
	JobState func(s fsm.State)
	// Failover is called when a job's attempt ends on its node (why is
	// "failover", "timeout" or "model_not_available").
	Failover func(jobID, why string)
	// Rejected is called for each node event refused, with its refusal
	// code ([Refusal]): an older attempt, a job of another node, an
	// unknown job, a move the lifecycle does not allow.
	Rejected func(t MessageType, reason string)
	// SelectionMiss is called when no node is eligible for a job.
	SelectionMiss func(pool, model string)
	// Answered is called for each answer handed to a session here.
	Answered func(t MessageType)
	// Storm is called with each MODEL_NOT_AVAILABLE decision.
	Storm func(nodeID, model string, d StormDecision)
	// Adopted is called when this instance drained a dead instance's inbox.
	Adopted func(instanceID string)
	// Shed is called for each job refused or failed for want of a node:
	// reason is "queue_full" (refused on arrival, its pool's queue on this
	// instance being full) or "no_node" (it waited Dispatch.QueueTimeout
	// without a free slot on an eligible node).
	Shed func(pool, reason string)
}
