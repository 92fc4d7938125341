package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNodeFull: the node's reservations already reach its capacity.
var ErrNodeFull = errors.New("node at capacity")

// ReservationStore holds the nodes' concurrency slots across instances: in
// Redis the ZSET {prefix}:v1:nodes:{node:<node_id>}:reserved of job ids
// scored by expiry in milliseconds. A reservation ends when it is released
// or when it expires, so a slot is never lost to a crashed instance for
// longer than its TTL. Implementations: [MemReservations];
// store/redisstore.Reservations. Each passes
// store/storetest.TestReservationStore.
type ReservationStore interface {
	// Reserve holds one of nodeID's capacity slots for jobID until ttl from
	// now, after dropping expired reservations; all of it atomically. A job
	// that already holds a slot keeps it, with its expiry set to ttl from
	// now, even when the node is full (Reserve is idempotent). A full node
	// is [ErrNodeFull].
	Reserve(ctx context.Context, nodeID, jobID string, capacity int, ttl time.Duration) error
	// Release frees jobID's slot on nodeID and reports whether it held one
	// (an expired reservation that no later call has dropped yet counts).
	Release(ctx context.Context, nodeID, jobID string) (bool, error)
	// ReleaseSlots frees every slot named, in one call (in Redis one
	// pipeline); freeing a slot not held is no error.
	ReleaseSlots(ctx context.Context, slots []Slot) error
	// Count returns the number of unexpired reservations on nodeID.
	Count(ctx context.Context, nodeID string) (int, error)
	// Jobs returns, sorted, the jobs holding a reservation on nodeID,
	// expired ones not yet dropped included: the jobs to send elsewhere
	// when the node goes away.
	Jobs(ctx context.Context, nodeID string) ([]string, error)
}

// CheckReserve validates the arguments of [ReservationStore.Reserve], for
// implementations to call first.
func CheckReserve(nodeID, jobID string, capacity int, ttl time.Duration) error {
	if err := checkID("node_id", nodeID); err != nil {
		return err
	}
	if err := checkID("job_id", jobID); err != nil {
		return err
	}
	if capacity < 1 {
		return argErr("capacity", fmt.Sprintf("%d is below 1", capacity))
	}
	if ttl < time.Millisecond {
		return argErr("ttl", fmt.Sprintf("%v is below 1ms", ttl))
	}
	return nil
}

// Slot names one job's reservation on one node.
type Slot struct {
	NodeID string
	JobID  string
}

// CheckRelease validates the arguments of [ReservationStore.Release].
func CheckRelease(nodeID, jobID string) error {
	if err := checkID("node_id", nodeID); err != nil {
		return err
	}
	return checkID("job_id", jobID)
}

// CheckNodeID validates a node id argument.
func CheckNodeID(nodeID string) error { return checkID("node_id", nodeID) }
