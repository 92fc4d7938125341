package cron

import (
	"context"
	"fmt"
	"sync"
)

// DefaultRunLimit is how many runs per job a [MemStore] keeps when its
// RunLimit is 0.
const DefaultRunLimit = 50

// MemStore is a [Store] in memory: a [RunStore] that keeps the newest
// RunLimit runs of each job, and a [Flusher] with nothing to flush. It loses
// everything with the process; use it for tests, examples and runners whose
// jobs are added by code at start-up. The zero value is an empty store ready
// to use. It is safe for concurrent use.
//
// MemStore keeps the jobs it is given as they are: their header maps are
// shared with the caller, not copied, and must not be modified.
type MemStore struct {
	// RunLimit is how many runs per job are kept. Set it before first use.
	// Default (0) [DefaultRunLimit].
	RunLimit int

	mu    sync.RWMutex
	jobs  map[string]*memJob
	order []*memJob // creation order; nil holes are deleted jobs
	holes int
}

type memJob struct {
	job  Job
	pos  int
	runs []Run // ring of up to RunLimit runs
	head int   // index of the oldest run once the ring is full
}

// NewMemStore returns an empty MemStore that keeps [DefaultRunLimit] runs
// per job.
func NewMemStore() *MemStore { return &MemStore{} }

var (
	_ Store    = (*MemStore)(nil)
	_ RunStore = (*MemStore)(nil)
	_ Flusher  = (*MemStore)(nil)
)

func (s *MemStore) limit() int {
	if s.RunLimit > 0 {
		return s.RunLimit
	}
	return DefaultRunLimit
}

// Load returns every job, in creation order.
func (s *MemStore) Load(ctx context.Context) ([]Job, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Job, 0, len(s.jobs))
	for _, m := range s.order {
		if m != nil {
			out = append(out, m.job)
		}
	}
	return out, nil
}

// Save creates or replaces the job with j.ID.
func (s *MemStore) Save(ctx context.Context, j Job) error {
	if j.ID == "" {
		return fmt.Errorf("cron: memstore: save: %w", &ValidationError{Field: "id", Reason: "is required"})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.jobs[j.ID]; m != nil {
		m.job = j
		return nil
	}
	if s.jobs == nil {
		s.jobs = make(map[string]*memJob)
	}
	m := &memJob{job: j, pos: len(s.order)}
	s.jobs[j.ID] = m
	s.order = append(s.order, m)
	return nil
}

// Delete removes job id and its runs; an unknown id is [ErrNotFound].
func (s *MemStore) Delete(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.jobs[id]
	if m == nil {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	delete(s.jobs, id)
	s.order[m.pos] = nil
	s.holes++
	if s.holes > 64 && s.holes > len(s.order)/2 {
		kept := s.order[:0]
		for _, o := range s.order {
			if o != nil {
				o.pos = len(kept)
				kept = append(kept, o)
			}
		}
		clear(s.order[len(kept):])
		s.order, s.holes = kept, 0
	}
	return nil
}

// Record stores the bookkeeping of job id; an unknown id is [ErrNotFound].
func (s *MemStore) Record(ctx context.Context, id string, b Bookkeeping) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.jobs[id]
	if m == nil {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	b.Apply(&m.job)
	return nil
}

// AppendRun adds r to the history of r.JobID, dropping the oldest run
// beyond RunLimit; an unknown job is [ErrNotFound].
func (s *MemStore) AppendRun(ctx context.Context, r Run) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.jobs[r.JobID]
	if m == nil {
		return fmt.Errorf("%w: %q", ErrNotFound, r.JobID)
	}
	if limit := s.limit(); len(m.runs) < limit {
		m.runs = append(m.runs, r)
	} else {
		m.runs[m.head] = r
		m.head = (m.head + 1) % len(m.runs)
	}
	return nil
}

// Runs returns up to limit of the newest runs of job id, newest first
// (limit <= 0: all kept); an unknown id is [ErrNotFound].
func (s *MemStore) Runs(ctx context.Context, id string, limit int) ([]Run, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m := s.jobs[id]
	if m == nil {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	n := len(m.runs)
	if limit <= 0 || limit > n {
		limit = n
	}
	out := make([]Run, 0, limit)
	for i := range limit {
		out = append(out, m.runs[(m.head+n-1-i)%n])
	}
	return out, nil
}

// Flush does nothing: a MemStore has nothing to make durable.
func (s *MemStore) Flush(ctx context.Context) error { return nil }
