package cron

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// solo is a store that is not shared (a [Store] that is no
// [SharedStore], or none at all), seen through the contract of a
// [SharedStore]: the store of one member, which holds every partition and
// wins every claim. The runner works through this one contract whatever
// its store; solo makes the trivial answers:
//
//   - the runner owns every job, and holds every stored job: a job it does
//     not hold does not exist, and the reads of every job (Read, PageJobs,
//     CountJobs) answer from the runner's table;
//   - every claim is won at once, and nothing is written for it;
//   - the writes go to the store as they are (Write is Save, RecordBatch
//     is Record per job, AppendRuns is AppendRun per run), and a job's
//     version is always 0: there is no other writer to compare with.
//
// Without a store (st nil) the jobs live in the runner alone, and so
// does their history: the newest [Config.RunLimit] runs of each job,
// which AppendRuns adds to and the reads of runs answer from.
type solo struct {
	st   Store
	runs RunStore // st's history; nil when it keeps none
	r    *Runner
}

var _ SharedStore = solo{}

func (s solo) Load(ctx context.Context) ([]Job, error) {
	if s.st == nil {
		return nil, nil
	}
	return s.st.Load(ctx)
}

// LoadHeld is Load: every job is held, at version 0 (vers nil).
func (s solo) LoadHeld(ctx context.Context) ([]Job, []int64, error) {
	jobs, err := s.Load(ctx)
	return jobs, nil, err
}

func (s solo) Save(ctx context.Context, j Job) error {
	if s.st == nil {
		return nil
	}
	return s.st.Save(ctx, j)
}

// Delete deletes a job the runner holds; any other id is unknown.
func (s solo) Delete(ctx context.Context, id string) error {
	if !s.held(id) {
		return ErrNotFound
	}
	if s.st == nil {
		return nil
	}
	return s.st.Delete(ctx, id)
}

func (s solo) Record(ctx context.Context, id string, b Bookkeeping) error {
	if s.st == nil {
		return nil
	}
	return s.st.Record(ctx, id, b)
}

func (s solo) Flush(ctx context.Context) error {
	if s.st == nil {
		return nil
	}
	return s.st.Flush(ctx)
}

func (s solo) Owns(string) bool { return true }

// LastSlots answers nothing: no other runner claims or records a slot,
// and the runner alone never asks.
func (s solo) LastSlots(context.Context, []string) (map[string]Run, error) { return nil, nil }

// held reports whether the runner holds job id: whether it exists.
func (s solo) held(id string) bool {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	_, _, ok := s.r.lookup(id)
	return ok
}

// Read is the job as the runner holds it.
func (s solo) Read(ctx context.Context, id string) (Job, int64, error) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	if _, e, ok := s.r.lookup(id); ok {
		return e.job(true), 0, nil
	}
	return Job{}, 0, ErrNotFound
}

// Write saves j, whatever the version: the runner checked in its table
// that a job it creates is new.
func (s solo) Write(ctx context.Context, j Job, version int64) (int64, error) {
	return 0, s.Save(ctx, j)
}

func (s solo) PageJobs(ctx context.Context, q JobQuery) ([]Job, bool, error) {
	return s.r.pageHeld(q)
}

func (s solo) CountJobs(ctx context.Context) (enabled, paused int, err error) {
	enabled, paused = s.r.countHeld()
	return enabled, paused, nil
}

func (s solo) ClaimRun(ctx context.Context, r Run, slot bool) (bool, error) { return true, nil }

func (s solo) ClaimSlots(ctx context.Context, runs []Run) ([]bool, error) {
	won := make([]bool, len(runs))
	for i := range won {
		won[i] = true
	}
	return won, nil
}

// RecordBatch records each job's bookkeeping in turn; a job no longer
// stored is skipped. The error joins those of the jobs that failed.
func (s solo) RecordBatch(ctx context.Context, recs []Recorded) error {
	if s.st == nil {
		return nil
	}
	var errs []error
	for _, rec := range recs {
		if err := s.st.Record(ctx, rec.ID, rec.Bookkeeping); err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, fmt.Errorf("job %q: %w", rec.ID, err))
		}
	}
	return errors.Join(errs...)
}

func (s solo) AppendRun(ctx context.Context, run Run) error {
	return s.AppendRuns(ctx, []Run{run})
}

// AppendRuns appends each run in turn; a run of a job no longer stored is
// skipped. The error joins those of the runs that failed.
func (s solo) AppendRuns(ctx context.Context, runs []Run) error {
	if s.st == nil {
		s.r.mu.Lock()
		defer s.r.mu.Unlock()
		for _, run := range runs {
			if _, e, ok := s.r.lookup(run.JobID); ok {
				e.addRun(run, s.r.cfg.RunLimit)
			}
		}
		return nil
	}
	if s.runs == nil {
		return nil
	}
	var errs []error
	for _, run := range runs {
		if err := s.runs.AppendRun(ctx, run); err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, fmt.Errorf("run %q of job %q: %w", run.ID, run.JobID, err))
		}
	}
	return errors.Join(errs...)
}

func (s solo) Runs(ctx context.Context, id string, limit int) ([]Run, error) {
	if s.st == nil {
		s.r.mu.Lock()
		defer s.r.mu.Unlock()
		_, e, ok := s.r.lookup(id)
		if !ok {
			return nil, ErrNotFound
		}
		return e.runs(limit), nil
	}
	if s.runs == nil {
		if !s.held(id) {
			return nil, ErrNotFound
		}
		return nil, ErrUnsupported
	}
	return s.runs.Runs(ctx, id, limit)
}

func (s solo) QueryRuns(ctx context.Context, q RunQuery) ([]Run, RunCursor, error) {
	if s.st == nil {
		var all []Run
		s.r.eachRun(q.JobIDs, func(h *Run) bool {
			if q.Match(h) && q.After.Before(h) {
				all = append(all, *h)
			}
			return true
		})
		runs, next := q.Page(all)
		return runs, next, nil
	}
	if s.runs == nil {
		return nil, RunCursor{}, ErrUnsupported
	}
	return s.runs.QueryRuns(ctx, q)
}

func (s solo) RunByID(ctx context.Context, runID string) (Run, error) {
	if s.st == nil {
		var found Run
		s.r.eachRun(nil, func(h *Run) bool {
			if h.ID == runID {
				found = *h
			}
			return found.ID == ""
		})
		if found.ID == "" {
			return Run{}, ErrNotFound
		}
		return found, nil
	}
	if s.runs == nil {
		return Run{}, ErrUnsupported
	}
	return s.runs.RunByID(ctx, runID)
}

// eachRun calls f with each run the runner keeps of the jobs in ids (nil:
// of every job), until f returns false.
func (r *Runner) eachRun(ids []string, f func(*Run) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, idx := range r.order {
		if idx < 0 {
			continue
		}
		e := r.tab.at(idx)
		if e.x == nil || (len(ids) > 0 && !slices.Contains(ids, e.id)) {
			continue
		}
		for i := range e.x.hist.buf {
			if !f(&e.x.hist.buf[i]) {
				return
			}
		}
	}
}
