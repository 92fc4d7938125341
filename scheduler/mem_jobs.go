package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ksana-dev/ksana/fsm"
)

// DefaultJobTTL is how long a job record lives after its last change when
// a job store's TTL is zero.
const DefaultJobTTL = 24 * time.Hour

// MemJobsConfig configures [MemJobs].
type MemJobsConfig struct {
	// MaxAttempts is [fsm.Machine].MaxAttempts. Default (0):
	// [fsm.DefaultMaxAttempts].
	MaxAttempts int
	// TTL is how long a record lives after its last change. Default (0):
	// [DefaultJobTTL].
	TTL time.Duration
	// Due is the deadline index Open writes a new job's deadline to.
	// Default (nil): none, for a store used without a [Dispatcher].
	Due *MemDue
}

// MemJobs is the in-memory [JobStore]: the reference implementation, for
// tests and single-process use. It is safe for concurrent use. It reads
// the time from package time, so a test drives its TTL under
// testing/synctest.
type MemJobs struct {
	m   fsm.Machine
	ttl time.Duration
	due *MemDue

	mu   sync.Mutex
	jobs map[string]*memJob
}

type memJob struct {
	rec     JobRecord
	book    BookEntry
	expires time.Time
}

var _ JobStore = (*MemJobs)(nil)

// NewMemJobs returns an empty store.
func NewMemJobs(cfg MemJobsConfig) (*MemJobs, error) {
	if cfg.MaxAttempts < 0 {
		return nil, fmt.Errorf("scheduler: MaxAttempts: %d is negative", cfg.MaxAttempts)
	}
	if cfg.TTL < 0 {
		return nil, fmt.Errorf("scheduler: TTL: %v is negative", cfg.TTL)
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultJobTTL
	}
	return &MemJobs{m: fsm.Machine{MaxAttempts: cfg.MaxAttempts}, ttl: cfg.TTL, due: cfg.Due, jobs: map[string]*memJob{}}, nil
}

func (s *MemJobs) get(id string, now time.Time) (*memJob, bool) {
	j, ok := s.jobs[id]
	if !ok || !now.Before(j.expires) {
		delete(s.jobs, id)
		return nil, false
	}
	return j, true
}

var _ AttemptLimit = (*MemJobs)(nil)

// MaxAttempts implements [AttemptLimit].
func (s *MemJobs) MaxAttempts() int { return s.m.Max() }

// Open implements [JobStore].
func (s *MemJobs) Open(ctx context.Context, jobID string, spec JobSpec, nodeID string, due time.Time) (JobRecord, BookEntry, bool, error) {
	if err := CheckSpec(jobID, spec); err != nil {
		return JobRecord{}, BookEntry{}, false, err
	}
	// Round-trip through JSON, as a store would.
	data, err := json.Marshal(spec)
	if err != nil {
		return JobRecord{}, BookEntry{}, false, err
	}
	var stored JobSpec
	if err := json.Unmarshal(data, &stored); err != nil {
		return JobRecord{}, BookEntry{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.due != nil {
		s.due.add(jobID, due) // under s.mu: in the same step as the job
	}
	now := time.Now()
	if j, ok := s.get(jobID, now); ok {
		return j.rec, cloneEntry(j.book), false, nil
	}
	ms := now.Truncate(time.Millisecond)
	rec := JobRecord{ID: jobID, Job: fsm.New(), CreatedAt: ms, UpdatedAt: ms, QueuedAt: ms}
	j := &memJob{rec: rec, book: BookEntry{Spec: stored, Waiters: []string{spec.SessionID}}, expires: now.Add(s.ttl)}
	if nodeID != "" {
		out, err := s.m.Apply(rec.Job, fsm.Dispatch, rec.Attempt)
		if err != nil {
			return JobRecord{}, BookEntry{}, false, err
		}
		j.rec.Job, j.rec.NodeID, j.rec.DispatchedAt = out.Job, nodeID, ms
		j.book.Tried = []string{nodeID}
		rec = j.rec
	}
	s.jobs[jobID] = j
	return rec, cloneEntry(j.book), true, nil
}

// Entry implements [JobStore].
func (s *MemJobs) Entry(ctx context.Context, jobID string) (BookEntry, error) {
	if err := checkID("job_id", jobID); err != nil {
		return BookEntry{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.get(jobID, time.Now())
	if !ok {
		return BookEntry{}, fmt.Errorf("job %q: %w", jobID, ErrJobNotFound)
	}
	return cloneEntry(j.book), nil
}

// Watch implements [JobStore].
func (s *MemJobs) Watch(ctx context.Context, jobID, sessionID string) (Outcome, bool, error) {
	if err := checkID("job_id", jobID); err != nil {
		return Outcome{}, false, err
	}
	if err := checkID("session_id", sessionID); err != nil {
		return Outcome{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.get(jobID, time.Now())
	if !ok {
		return Outcome{}, false, fmt.Errorf("job %q: %w", jobID, ErrJobNotFound)
	}
	if j.book.Outcome != nil {
		return *cloneEntry(j.book).Outcome, true, nil
	}
	if !slices.Contains(j.book.Waiters, sessionID) {
		j.book.Waiters = append(j.book.Waiters, sessionID)
	}
	return Outcome{}, false, nil
}

// Finish implements [JobStore].
func (s *MemJobs) Finish(ctx context.Context, jobID string, ev fsm.Event, attempt int, nodeID string, out Outcome) (JobTransition, BookEntry, error) {
	if err := CheckJobEvent(jobID, ev, nodeID); err != nil {
		return JobTransition{}, BookEntry{}, err
	}
	if err := CheckOutcome(out); err != nil {
		return JobTransition{}, BookEntry{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tr, err := s.apply(jobID, ev, attempt, nodeID)
	if err != nil {
		return tr, BookEntry{}, err
	}
	j := s.jobs[jobID]
	if st := tr.Job.State; (st == fsm.Finished || st == fsm.Failed) && j.book.Outcome == nil {
		o := out
		o.Payload = slices.Clone(out.Payload)
		j.book.Outcome = &o
	}
	e := cloneEntry(j.book)
	e.Spec.Payload = nil
	return tr, e, nil
}

// Job implements [JobStore].
func (s *MemJobs) Job(ctx context.Context, jobID string) (JobRecord, error) {
	if err := checkID("job_id", jobID); err != nil {
		return JobRecord{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.get(jobID, time.Now())
	if !ok {
		return JobRecord{}, fmt.Errorf("job %q: %w", jobID, ErrJobNotFound)
	}
	return j.rec, nil
}

// ApplyJob implements [JobStore].
func (s *MemJobs) ApplyJob(ctx context.Context, jobID string, ev fsm.Event, attempt int, nodeID string) (JobTransition, error) {
	if err := CheckJobEvent(jobID, ev, nodeID); err != nil {
		return JobTransition{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.apply(jobID, ev, attempt, nodeID)
}

// apply is ApplyJob with s.mu held.
func (s *MemJobs) apply(jobID string, ev fsm.Event, attempt int, nodeID string) (JobTransition, error) {
	now := time.Now()
	j, ok := s.get(jobID, now)
	if !ok {
		return JobTransition{}, fmt.Errorf("job %q: %w", jobID, ErrJobNotFound)
	}
	rec := j.rec
	// The node check comes after the attempt checks and before the
	// table's, as in the Redis script.
	out, err := s.m.Apply(rec.Job, ev, attempt)
	wrongNode := ev != fsm.Dispatch && nodeID != "" && nodeID != rec.NodeID
	if err != nil && !(wrongNode && errors.Is(err, fsm.ErrInvalidTransition)) {
		return JobTransition{Job: rec}, err
	}
	if wrongNode {
		return JobTransition{Job: rec}, fmt.Errorf("job %q is on node %q, not %q: %w", jobID, rec.NodeID, nodeID, ErrWrongNode)
	}
	if out.Duplicate {
		tr := JobTransition{Job: rec, Duplicate: true}
		if ev.Frees() {
			tr.FreeNode = rec.NodeID
		}
		return tr, nil
	}
	tr := JobTransition{}
	if out.FreeReservation {
		tr.FreeNode = rec.NodeID
	}
	rec.Job = out.Job
	switch {
	case ev == fsm.Dispatch:
		rec.NodeID, rec.DispatchedAt = nodeID, now.Truncate(time.Millisecond)
		if !slices.Contains(j.book.Tried, nodeID) {
			j.book.Tried = append(j.book.Tried, nodeID)
		}
	case out.Job.State == fsm.Created:
		rec.NodeID = ""
		if ev != fsm.Undelivered {
			rec.QueuedAt = now.Truncate(time.Millisecond)
		}
	}
	rec.UpdatedAt = now.Truncate(time.Millisecond)
	j.rec, j.expires = rec, now.Add(s.ttl)
	tr.Job = rec
	return tr, nil
}

// ReleaseJobs implements [JobStore].
func (s *MemJobs) ReleaseJobs(ctx context.Context, jobs []JobAttempt) ([]JobTransition, []error) {
	trs, errs := make([]JobTransition, len(jobs)), make([]error, len(jobs))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, j := range jobs {
		if errs[i] = CheckJobEvent(j.ID, fsm.Release, ""); errs[i] == nil {
			trs[i], errs[i] = s.apply(j.ID, fsm.Release, j.Attempt, "")
		}
	}
	return trs, errs
}
