package scheduler

import (
	"context"
	"errors"
	"fmt"
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
}

// MemJobs is the in-memory [JobStore]: the reference implementation, for
// tests and single-process use. It is safe for concurrent use. It reads
// the time from package time, so a test drives its TTL under
// testing/synctest.
type MemJobs struct {
	m   fsm.Machine
	ttl time.Duration

	mu   sync.Mutex
	jobs map[string]memJob
}

type memJob struct {
	rec     JobRecord
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
	return &MemJobs{m: fsm.Machine{MaxAttempts: cfg.MaxAttempts}, ttl: cfg.TTL, jobs: map[string]memJob{}}, nil
}

func (s *MemJobs) get(id string, now time.Time) (JobRecord, bool) {
	j, ok := s.jobs[id]
	if !ok || !now.Before(j.expires) {
		delete(s.jobs, id)
		return JobRecord{}, false
	}
	return j.rec, true
}

// CreateJob implements [JobStore].
func (s *MemJobs) CreateJob(ctx context.Context, jobID string) (JobRecord, bool, error) {
	if err := checkID("job_id", jobID); err != nil {
		return JobRecord{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if rec, ok := s.get(jobID, now); ok {
		return rec, false, nil
	}
	rec := JobRecord{ID: jobID, Job: fsm.New(), CreatedAt: now.Truncate(time.Millisecond), UpdatedAt: now.Truncate(time.Millisecond)}
	s.jobs[jobID] = memJob{rec, now.Add(s.ttl)}
	return rec, true, nil
}

// Job implements [JobStore].
func (s *MemJobs) Job(ctx context.Context, jobID string) (JobRecord, error) {
	if err := checkID("job_id", jobID); err != nil {
		return JobRecord{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.get(jobID, time.Now())
	if !ok {
		return JobRecord{}, fmt.Errorf("job %q: %w", jobID, ErrJobNotFound)
	}
	return rec, nil
}

// ApplyJob implements [JobStore].
func (s *MemJobs) ApplyJob(ctx context.Context, jobID string, ev fsm.Event, attempt int, nodeID string) (JobTransition, error) {
	if err := CheckJobEvent(jobID, ev, nodeID); err != nil {
		return JobTransition{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	rec, ok := s.get(jobID, now)
	if !ok {
		return JobTransition{}, fmt.Errorf("job %q: %w", jobID, ErrJobNotFound)
	}
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
		rec.NodeID = nodeID
	case out.Job.State == fsm.Created:
		rec.NodeID = ""
	}
	rec.UpdatedAt = now.Truncate(time.Millisecond)
	s.jobs[jobID] = memJob{rec, now.Add(s.ttl)}
	tr.Job = rec
	return tr, nil
}
