package scheduler

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// MemReservationsConfig configures [MemReservations]. It has no fields
// yet; it is the place of future tunables. The store reads the time from
// package time, so a test drives its expiry under testing/synctest.
type MemReservationsConfig struct{}

// MemReservations is the in-memory [ReservationStore]: the reference
// implementation. It is safe for concurrent use. Expiry reads the time
// from package time (testing/synctest fakes it).
type MemReservations struct {
	mu    sync.Mutex
	nodes map[string]map[string]time.Time // node -> job -> expiry
}

var _ ReservationStore = (*MemReservations)(nil)

// NewMemReservations returns an empty store.
func NewMemReservations(cfg MemReservationsConfig) *MemReservations {
	return &MemReservations{nodes: map[string]map[string]time.Time{}}
}

// live drops the expired reservations of nodeID and returns the rest.
func (s *MemReservations) live(nodeID string, now time.Time) map[string]time.Time {
	r := s.nodes[nodeID]
	for j, exp := range r {
		if !exp.After(now) {
			delete(r, j)
		}
	}
	return r
}

// Reserve implements [ReservationStore].
func (s *MemReservations) Reserve(ctx context.Context, nodeID, jobID string, capacity int, ttl time.Duration) error {
	if err := CheckReserve(nodeID, jobID, capacity, ttl); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	r := s.live(nodeID, now)
	if _, held := r[jobID]; !held && len(r) >= capacity {
		return fmt.Errorf("node %q: %d of %d slots reserved: %w", nodeID, len(r), capacity, ErrNodeFull)
	}
	if r == nil {
		r = map[string]time.Time{}
		s.nodes[nodeID] = r
	}
	r[jobID] = now.Add(ttl)
	return nil
}

// Release implements [ReservationStore].
func (s *MemReservations) Release(ctx context.Context, nodeID, jobID string) (bool, error) {
	if err := CheckRelease(nodeID, jobID); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.nodes[nodeID]
	_, held := r[jobID]
	delete(r, jobID)
	if len(r) == 0 {
		delete(s.nodes, nodeID)
	}
	return held, nil
}

// ReleaseSlots implements [ReservationStore].
func (s *MemReservations) ReleaseSlots(ctx context.Context, slots []Slot) error {
	for _, sl := range slots {
		if err := CheckRelease(sl.NodeID, sl.JobID); err != nil {
			return err
		}
	}
	for _, sl := range slots {
		s.Release(ctx, sl.NodeID, sl.JobID)
	}
	return nil
}

// Count implements [ReservationStore].
func (s *MemReservations) Count(ctx context.Context, nodeID string) (int, error) {
	if err := CheckNodeID(nodeID); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live(nodeID, time.Now())), nil
}

// Jobs implements [ReservationStore].
func (s *MemReservations) Jobs(ctx context.Context, nodeID string) ([]string, error) {
	if err := CheckNodeID(nodeID); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []string{}
	for j := range s.nodes[nodeID] {
		out = append(out, j)
	}
	sort.Strings(out)
	return out, nil
}
