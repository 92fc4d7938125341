package cron

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// MemStore is a [Store] in memory: a [RunStore] that keeps the newest
// RunLimit runs of each job, with nothing to flush, a
// [PauseStore], an [AuditLog] (the newest [DefaultAuditKeep] entries) and an
// [IdempotencyStore] (at most [DefaultIdempotencyKeys] keys). It loses
// everything with the process; use it in tests of code that works through
// a Store. A runner over a MemStore holds each job twice (in the runner
// and here); for a runner without durable storage pass a nil store to
// [New] instead, which keeps the jobs and their run history in the runner
// alone. The zero value is an empty store ready to use. It is safe for
// concurrent use.
//
// MemStore keeps a compact record of each job, from which
// [MemStore.Load] rebuilds the Job saved, with the bookkeeping recorded
// since: its id, its times as Unix nanoseconds, and, once for jobs saved
// one after another that have them alike, its name and the rest of its
// configuration. A job of a runner of many jobs made from a few templates
// costs about 50 bytes here besides its cost in the runner; a field that
// few jobs have (a pause, a last error, a time in another location than
// UTC) costs only the jobs that have it. The audit log keeps its entries
// compactly (see [AuditBuffer]): the entry of a job made from a template
// costs some 70 bytes.
//
// MemStore keeps the jobs it is given as they are: their header maps and
// args are shared with the caller, not copied, and must not be modified.
type MemStore struct {
	// RunLimit is how many runs per job are kept. Set it before first use.
	// Default (0) [DefaultRunLimit].
	RunLimit int

	mu     sync.RWMutex
	jobs   memTable
	runs   map[string]*runRing // only for jobs that have runs
	extras memExtras           // the service pause and the audit log
}

// NewMemStore returns an empty MemStore that keeps [DefaultRunLimit] runs
// per job.
func NewMemStore() *MemStore { return &MemStore{} }

var (
	_ Store    = (*MemStore)(nil)
	_ RunStore = (*MemStore)(nil)
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
	return s.jobs.all(), nil
}

// Save creates or replaces the job with j.ID. An empty id is an error.
func (s *MemStore) Save(ctx context.Context, j Job) error {
	if j.ID == "" {
		return fmt.Errorf("cron: memstore: save: %w", &ValidationError{Field: "id", Reason: "is required"})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs.save(&j)
	return nil
}

// Delete removes job id and its runs; an unknown id is [ErrNotFound].
func (s *MemStore) Delete(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.jobs.remove(id) {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	delete(s.runs, id)
	return nil
}

// Record stores the bookkeeping of job id; an unknown id is [ErrNotFound].
func (s *MemStore) Record(ctx context.Context, id string, b Bookkeeping) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.jobs.find(id)
	if !ok {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	s.jobs.record(i, &b)
	return nil
}

// AppendRun adds r to the history of r.JobID, dropping the oldest runs
// beyond the job's KeepRuns, or RunLimit when it has none; an unknown job
// is [ErrNotFound].
func (s *MemStore) AppendRun(ctx context.Context, r Run) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.jobs.find(r.JobID)
	if !ok {
		return fmt.Errorf("%w: %q", ErrNotFound, r.JobID)
	}
	m := s.runs[r.JobID]
	if m == nil {
		if s.runs == nil {
			s.runs = make(map[string]*runRing)
		}
		m = &runRing{}
		s.runs[r.JobID] = m
	}
	limit := s.limit()
	if k := s.jobs.keepRuns(i); k > 0 {
		limit = k
	}
	m.add(r, limit)
	return nil
}

// Runs returns up to limit of the newest runs of job id, newest first
// (limit <= 0: all kept); an unknown id is [ErrNotFound].
func (s *MemStore) Runs(ctx context.Context, id string, limit int) ([]Run, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if _, ok := s.jobs.find(id); !ok {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	m := s.runs[id]
	if m == nil {
		return []Run{}, nil
	}
	return m.newest(limit), nil
}

// Flush does nothing: a MemStore has nothing to make durable.
func (s *MemStore) Flush(ctx context.Context) error { return nil }

// QueryRuns returns a page of the runs kept of every job, as
// [RunStore.QueryRuns] describes.
func (s *MemStore) QueryRuns(ctx context.Context, q RunQuery) ([]Run, RunCursor, error) {
	s.mu.RLock()
	var all []Run
	for id, m := range s.runs {
		if len(q.JobIDs) > 0 && !slices.Contains(q.JobIDs, id) {
			continue
		}
		for i := range m.buf {
			if q.Match(&m.buf[i]) && q.After.Before(&m.buf[i]) {
				all = append(all, m.buf[i])
			}
		}
	}
	s.mu.RUnlock()
	runs, next := q.Page(all)
	return runs, next, nil
}

// RunByID returns the kept run with id runID; an unknown one is
// [ErrNotFound] (see [RunStore.RunByID]).
func (s *MemStore) RunByID(ctx context.Context, runID string) (Run, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, m := range s.runs {
		for i := range m.buf {
			if m.buf[i].ID == runID {
				return m.buf[i], nil
			}
		}
	}
	return Run{}, fmt.Errorf("%w: run %q", ErrNotFound, runID)
}

// memExtras is the service pause and audit log of a MemStore.
type memExtras struct {
	mu    sync.Mutex
	pause PauseState
	audit AuditBuffer
	idem  idempotencyMemory
	alert alertMemory
}

var (
	_ PauseStore       = (*MemStore)(nil)
	_ AuditLog         = (*MemStore)(nil)
	_ IdempotencyStore = (*MemStore)(nil)
	_ AlertOutbox      = (*MemStore)(nil)
)

// EnqueueAlerts adds alerts to the store's outbox (see [AlertOutbox]),
// in memory.
func (s *MemStore) EnqueueAlerts(ctx context.Context, ds []AlertDelivery) error {
	return s.extras.alert.EnqueueAlerts(ctx, ds)
}

// TakeAlerts takes the alerts due at now until until.
func (s *MemStore) TakeAlerts(ctx context.Context, now, until time.Time, max int) ([]AlertDelivery, error) {
	return s.extras.alert.TakeAlerts(ctx, now, until, max)
}

// SettleAlert records the end of an attempt at an alert.
func (s *MemStore) SettleAlert(ctx context.Context, d AlertDelivery, delivered bool) error {
	return s.extras.alert.SettleAlert(ctx, d, delivered)
}

// ListAlerts lists the pending or the dead alerts, oldest first.
func (s *MemStore) ListAlerts(ctx context.Context, dead bool, limit int) ([]AlertDelivery, int, error) {
	return s.extras.alert.ListAlerts(ctx, dead, limit)
}

// LoadPause returns the service pause saved last.
func (s *MemStore) LoadPause(ctx context.Context) (PauseState, error) {
	s.extras.mu.Lock()
	defer s.extras.mu.Unlock()
	return s.extras.pause, nil
}

// SavePause keeps p as the service pause.
func (s *MemStore) SavePause(ctx context.Context, p PauseState) error {
	s.extras.mu.Lock()
	defer s.extras.mu.Unlock()
	s.extras.pause = p
	return nil
}

// AppendAudit keeps e in the store's audit log, which holds the newest
// [DefaultAuditKeep] entries.
func (s *MemStore) AppendAudit(ctx context.Context, e AuditEntry) (AuditEntry, error) {
	return s.extras.audit.AppendAudit(ctx, e)
}

// Audit returns a page of the store's audit log (see [AuditLog]).
func (s *MemStore) Audit(ctx context.Context, q AuditQuery) ([]AuditEntry, bool, error) {
	return s.extras.audit.Audit(ctx, q)
}

// ReserveIdempotencyKey reserves a run-now's idempotency key in the
// store's memory (see [IdempotencyStore]).
func (s *MemStore) ReserveIdempotencyKey(ctx context.Context, job, key string, e IdempotencyEntry) (IdempotencyEntry, bool, error) {
	return s.extras.idem.ReserveIdempotencyKey(ctx, job, key, e)
}

// CompleteIdempotencyKey records the run of a reservation (see
// [IdempotencyStore]).
func (s *MemStore) CompleteIdempotencyKey(ctx context.Context, job, key string, at time.Time, runID string) error {
	return s.extras.idem.CompleteIdempotencyKey(ctx, job, key, at, runID)
}

// ForgetIdempotencyKey deletes a reservation that has no run (see
// [IdempotencyStore]).
func (s *MemStore) ForgetIdempotencyKey(ctx context.Context, job, key string, at time.Time) error {
	return s.extras.idem.ForgetIdempotencyKey(ctx, job, key, at)
}
