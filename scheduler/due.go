package scheduler

import (
	"context"
	"sort"
	"sync"
	"time"
)

// DueIndex holds, for every job that is not over, the time by which
// something must have happened to it: its node must have acknowledged it,
// its lease must have been renewed, its result must have been settled. A
// sweeper on every instance claims the jobs whose time has passed and
// settles them, so a job survives the death of any one instance. In Redis
// it is sorted sets {prefix}:v1:jobs:due:{due:<n>} of job ids scored by
// Unix milliseconds: 16 on a Redis Cluster, a job's set chosen by a hash of
// its id, one on a standalone server.
// Implementations: [MemDue]; store/redisstore.Due. Each passes
// store/storetest.TestDueIndex.
type DueIndex interface {
	// Set makes at the job's due time, replacing an earlier one.
	Set(ctx context.Context, jobID string, at time.Time) error
	// Remove takes the jobs out of the index, in one call.
	Remove(ctx context.Context, jobIDs ...string) error
	// Claim returns up to n jobs due at or before now, earliest first, and
	// moves each one's due time to now+lease in the same atomic step, so
	// that sweepers running at once claim different jobs.
	Claim(ctx context.Context, now time.Time, lease time.Duration, n int) ([]string, error)
}

// MemDue is the in-memory [DueIndex]: the reference implementation. It is
// safe for concurrent use.
type MemDue struct {
	mu  sync.Mutex
	due map[string]int64 // job -> Unix ms
}

var _ DueIndex = (*MemDue)(nil)

// NewMemDue returns an empty index.
func NewMemDue() *MemDue { return &MemDue{due: map[string]int64{}} }

// Set implements [DueIndex].
func (m *MemDue) Set(ctx context.Context, jobID string, at time.Time) error {
	if err := checkID("job_id", jobID); err != nil {
		return err
	}
	m.mu.Lock()
	m.due[jobID] = at.UnixMilli()
	m.mu.Unlock()
	return nil
}

// add makes at the job's due time unless it has one already.
func (m *MemDue) add(jobID string, at time.Time) {
	m.mu.Lock()
	if _, ok := m.due[jobID]; !ok {
		m.due[jobID] = at.UnixMilli()
	}
	m.mu.Unlock()
}

// Remove implements [DueIndex].
func (m *MemDue) Remove(ctx context.Context, jobIDs ...string) error {
	for _, id := range jobIDs {
		if err := checkID("job_id", id); err != nil {
			return err
		}
	}
	m.mu.Lock()
	for _, id := range jobIDs {
		delete(m.due, id)
	}
	m.mu.Unlock()
	return nil
}

// Claim implements [DueIndex].
func (m *MemDue) Claim(ctx context.Context, now time.Time, lease time.Duration, n int) ([]string, error) {
	if n <= 0 {
		return nil, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ms := now.UnixMilli()
	var ids []string
	for id, at := range m.due {
		if at <= ms {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool {
		if m.due[ids[i]] != m.due[ids[j]] {
			return m.due[ids[i]] < m.due[ids[j]]
		}
		return ids[i] < ids[j]
	})
	if len(ids) > n {
		ids = ids[:n]
	}
	next := now.Add(lease).UnixMilli()
	for _, id := range ids {
		m.due[id] = next
	}
	return ids, nil
}

// Due returns the job's due time and whether it is in the index (for
// tests: the Dispatcher never asks).
func (m *MemDue) Due(ctx context.Context, jobID string) (time.Time, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.due[jobID]
	if !ok {
		return time.Time{}, false, nil
	}
	return time.UnixMilli(at), true, nil
}

// Len returns the number of jobs in the index.
func (m *MemDue) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.due)
}
