package cron

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// SlotClaimer is an optional capability of a [Store] shared by several
// runners (several processes on one database). Before the executor is
// called for a run, the runner calls ClaimRun with the run as it starts
// (Status, FinishedAt and the result fields empty); the run is called only
// when ClaimRun returns true. A slot is claimed [Config.ClaimAhead] before
// its time, by the runner's claiming goroutine (through [BatchClaimer]
// when the store has it); a run-now, or every run with a negative
// ClaimAhead, by its worker just before the call. A store makes each slot run at most once
// across runners by refusing a second claim of one (JobID, ScheduledAt)
// when slot is true; slot is false for a run of [Runner.RunNow], which is
// claimed by its id alone. When ClaimRun fails the run is not called
// either: it is recorded as skipped with the error. The store then keeps
// the claimed run, and [RunStore.AppendRun] of the same run id completes
// it. Retries of a run happen inside one call of the executor: they stay
// one run and one claim.
type SlotClaimer interface {
	ClaimRun(ctx context.Context, r Run, slot bool) (bool, error)
}

// Owner is an optional capability of a [Store] shared by several runners:
// Owns reports whether this runner is the one that fires job id now. A
// runner over an Owner holds every job (for the API) but fires only those
// it owns: at a slot of a job it does not own it rolls on to the next slot
// without a run and without writing bookkeeping, and a run queued for a job
// it stopped owning is not called. The answer may change at any time (on
// the gain or loss of a lease); Owns must be fast and safe for concurrent
// use, since the timer goroutine calls it at every slot.
type Owner interface {
	Owns(id string) bool
}

// JobReader is an optional capability of a [Store] shared by several
// runners: Job reads one job as stored, bookkeeping included, or
// [ErrNotFound]. [Runner.Get] uses it for a job that the runner holds but
// does not own (see [Owner]), whose bookkeeping another runner writes.
type JobReader interface {
	Job(ctx context.Context, id string) (Job, error)
}

// Inserter is an optional capability of a [Store] shared by several
// runners: Insert stores a new job durably, or fails with an error
// wrapping [ErrExists] when the id is stored already, also when another
// runner stored it a moment ago and this one has not held it yet.
// [Runner.Add] uses it instead of Save.
type Inserter interface {
	Insert(ctx context.Context, j Job) error
}

// JobLister is an optional capability of a [Store] shared by runners that
// each hold only the jobs they fire (see [Owner]): PageJobs pages through
// every stored job as [Runner.Page] does through the jobs of a runner (up
// to limit jobs that keep returns true for, in creation order, after the
// job with id after, and whether more follow; an after that names no job
// is [ErrNotFound]). The creation order must be the one a single runner
// over the store would have. [Runner.Page] and [Runner.List] use it when
// the store is also an [Owner].
type JobLister interface {
	PageJobs(ctx context.Context, after string, limit int, keep func(*Job) bool) (jobs []Job, more bool, err error)
}

// JobCounter is an optional capability of a shared [Store]: CountJobs
// counts every stored job, enabled and paused. [Runner.Count] uses it
// when the store is also an [Owner].
type JobCounter interface {
	CountJobs(ctx context.Context) (enabled, paused int, err error)
}

// sharedCaps are the optional capabilities of a shared store.
type sharedCaps struct {
	claim   SlotClaimer
	owner   Owner
	reader  JobReader
	insert  Inserter
	lister  JobLister
	counter JobCounter
}

func sharedOf(s Store) sharedCaps {
	var c sharedCaps
	c.claim, _ = s.(SlotClaimer)
	c.owner, _ = s.(Owner)
	c.reader, _ = s.(JobReader)
	c.insert, _ = s.(Inserter)
	c.lister, _ = s.(JobLister)
	c.counter, _ = s.(JobCounter)
	return c
}

// storeTimeout bounds the store reads of the methods without a context
// (Get, Page, List, Count).
const storeTimeout = 10 * time.Second

// partial reports whether the runner may hold only part of the stored
// jobs: its store is an [Owner] (a shared store whose runners each hold
// the jobs they fire).
func (r *Runner) partial() bool { return r.sh.owner != nil }

// readStored reads job id from a shared store, for a job the runner does
// not hold. ok is false when the store cannot be read that way.
func (r *Runner) readStored(ctx context.Context, id string) (j Job, ok bool, err error) {
	if r.sh.reader == nil || r.store == nil {
		return Job{}, false, nil
	}
	j, err = r.sh.reader.Job(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return Job{}, true, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if err != nil {
		return Job{}, true, fmt.Errorf("cron: read job %q: %w", id, err)
	}
	return j, true, nil
}

// updateStored is [Runner.Update] of a job the runner does not hold: it
// reads the job from the store, applies change, validates the result as
// Update does, recomputes the bookkeeping as Update would and saves the
// job durably. The runner that fires the job takes the change from the
// store (see [Runner.Hold]). ok is false when the store cannot be read
// that way. The result is held to MinInterval unless stored (a pause or
// resume, which changes nothing else). The caller holds the job's lock.
func (r *Runner) updateStored(ctx context.Context, id string, change func(*Job) error, stored bool) (Job, bool, error) {
	j, ok, err := r.readStored(ctx, id)
	if !ok || err != nil {
		return Job{}, ok, err
	}
	now := r.now()
	var old entry
	if err := r.compile(&j, now, &old, true); err != nil {
		return Job{}, true, fmt.Errorf("cron: stored job %q: %w", id, err)
	}
	old.setBookkeeping(BookkeepingOf(&j))
	if err := change(&j); err != nil {
		return Job{}, true, err
	}
	if j.ID != id {
		return Job{}, true, invalid("id", "cannot be changed (the job is %q, got %q)", id, j.ID)
	}
	c := &entry{}
	if err := r.compile(&j, now, c, stored); err != nil {
		return Job{}, true, err
	}
	c.setBookkeeping(old.bookkeeping())
	if !old.sameSchedule(c) || old.enabled != c.enabled {
		r.reschedulePlan(c, old.enabled, toNano(now))
	}
	if err := r.save(ctx, c.job(false)); err != nil {
		return Job{}, true, err
	}
	return c.job(true), true, nil
}

// runStored is [Runner.RunNow] of a job the runner does not hold: the run
// is called by this runner, from a copy of the job as stored that the
// runner does not hold (claimed by its run id, like every run-now), and
// the runner writes the run's bookkeeping. mu is held on entry and exit.
func (r *Runner) runStored(id, runID string, now int64) (bool, error) {
	if r.sh.reader == nil || r.store == nil {
		return false, nil
	}
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	j, _, err := r.readStored(ctx, id)
	cancel()
	var c entry
	if err == nil {
		if cerr := r.compile(&j, r.now(), &c, true); cerr != nil {
			err = fmt.Errorf("cron: stored job %q: %w", id, cerr)
		}
		c.setBookkeeping(BookkeepingOf(&j))
	}
	r.mu.Lock()
	if err != nil {
		return true, err
	}
	if r.state >= stateStopping {
		return true, ErrClosed
	}
	e := new(entry)
	*e = c
	r.enqueue(e, task{runID: runID, scheduled: now})
	return true, nil
}

// create stores the new job j: through the store's [Inserter] when it has
// one, else as any save.
func (r *Runner) create(ctx context.Context, j Job) error {
	if r.sh.insert == nil {
		return r.save(ctx, j)
	}
	if err := r.sh.insert.Insert(ctx, j); err != nil {
		if errors.Is(err, ErrExists) {
			return fmt.Errorf("%w: %q", ErrExists, j.ID)
		}
		return fmt.Errorf("cron: save job %q: %w", j.ID, err)
	}
	return nil
}

// mine reports whether this runner fires job id: always, unless the
// store is an [Owner].
func (r *Runner) mine(id string) bool {
	return r.sh.owner == nil || r.sh.owner.Owns(id)
}

// markRan queues the bookkeeping of e after a run. A run-now of a job
// another runner fires is the one run whose bookkeeping this runner
// writes for it, so that last_run_at and last_status show it as they
// would on one runner. mu is held.
func (r *Runner) markRan(e *entry, slot bool) {
	if slot || r.mine(e.id) {
		r.markDirty(e)
		return
	}
	if e.dirty || e.id == "" || r.store == nil {
		return
	}
	e.dirty = true
	r.dirty = append(r.dirty, e)
	r.wakeRecorder()
}

// passOver handles the slot due of a job this runner does not own: it
// rolls e on to its first slot after now, with no run and no bookkeeping.
// mu is held.
func (r *Runner) passOver(idx int32, e *entry, due, now int64) {
	e.next = e.nextAfter(max(due, now))
	r.schedule(idx, e, e.next)
}

// claim asks the store for run t of job j before it is called. It returns
// false when the run must not be called: another runner holds the slot,
// this runner no longer owns the job, or the claim failed (then a skipped
// run says why).
func (r *Runner) claim(ctx context.Context, t task, slot bool, info RunInfo) bool {
	if slot && !r.mine(info.JobID) {
		return false
	}
	if r.sh.claim == nil {
		return true
	}
	ok, err := r.sh.claim.ClaimRun(ctx, Run{ID: info.RunID, JobID: info.JobID, ScheduledAt: info.ScheduledAt, TriggeredAt: info.TriggeredAt}, slot)
	if err != nil {
		r.mu.Lock()
		r.claimFailed(Run{ID: info.RunID, JobID: info.JobID, ScheduledAt: info.ScheduledAt, TriggeredAt: info.TriggeredAt}, err, t.e.gen != t.gen)
		r.mu.Unlock()
		return false
	}
	if !ok {
		r.log.Debug("cron: slot claimed by another runner", "job_id", info.JobID, "scheduled_at", info.ScheduledAt)
	}
	return ok
}

// claimFailed records run, whose claim failed with err, as a skipped run
// that says why (drop: of a removed job, for the observer only). mu is
// held.
func (r *Runner) claimFailed(run Run, err error, drop bool) {
	r.log.Warn("cron: run not called: its claim failed", "job_id", run.JobID, "run_id", run.ID, "scheduled_at", run.ScheduledAt, "error", err)
	r.finish(Run{JobID: run.JobID, ScheduledAt: run.ScheduledAt, TriggeredAt: run.TriggeredAt, FinishedAt: r.now().UTC(),
		Status: StatusSkipped, Error: fmt.Sprintf("run not called: claim in the store failed: %v", err)}, drop)
}

// unclaimed ends task t that was not called.
func (r *Runner) unclaimed(t task) {
	r.mu.Lock()
	if t.e.gen == t.gen {
		t.e.inflight--
	}
	r.mu.Unlock()
}

// newerRun returns mem with the last-run fields of stored when stored's
// last run is the later one: a run-now called by a runner that does not
// hold the job writes them to the store only.
func newerRun(mem, stored Bookkeeping) Bookkeeping {
	if stored.LastRunAt.After(mem.LastRunAt) {
		mem.LastRunAt, mem.LastStatus, mem.LastError = stored.LastRunAt, stored.LastStatus, stored.LastError
	}
	return mem
}

// pageStored is [Runner.Page] from a shared store's [JobLister]: the jobs
// this runner holds and fires show the bookkeeping it has in memory, as
// [Runner.Get] does.
func (r *Runner) pageStored(after string, limit int, keep func(*Job) bool) ([]Job, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	jobs, more, err := r.sh.lister.PageJobs(ctx, after, limit, keep)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, false, fmt.Errorf("%w: %q", ErrNotFound, after)
		}
		return nil, false, fmt.Errorf("cron: page jobs: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range jobs {
		if _, e, ok := r.lookup(jobs[i].ID); ok && r.mine(jobs[i].ID) {
			newerRun(e.bookkeeping(), BookkeepingOf(&jobs[i])).Apply(&jobs[i])
		}
	}
	return jobs, more, nil
}

// Hold makes the runner hold job j as another runner stored it, without
// writing it back to the store: a new id is added (after every held job in
// the creation order), a known one takes j's configuration. A job whose
// schedule and enabled flag did not change keeps the bookkeeping the
// runner has while the runner owns it (it is the one writing it; but for
// j's last run when that is later: a run-now another runner called), and
// takes j's otherwise. A job the runner fires (see [Owner]) is scheduled
// at j's next_run_at, through the misfire rules when that has passed. An
// invalid j is an error and changes nothing. Hold is how a runner that
// shares its store with others learns of their writes (see
// store/sqlstore); an application that writes through the runner never
// needs it.
func (r *Runner) Hold(j Job) error {
	if j.ID == "" {
		return invalid("id", "is required")
	}
	now := r.now()
	var c entry
	if err := r.compile(&j, now, &c, true); err != nil {
		return fmt.Errorf("cron: hold job %q: %w", j.ID, err)
	}
	c.setBookkeeping(BookkeepingOf(&j))
	nowNs := toNano(now)
	defer r.lockJob(j.ID)()
	r.mu.Lock()
	defer r.mu.Unlock()
	idx, e, ok := r.lookup(j.ID)
	if ok {
		if e.sameSchedule(&c) && e.enabled == c.enabled && r.mine(j.ID) {
			c.setBookkeeping(newerRun(e.bookkeeping(), c.bookkeeping()))
			e.setConfig(&c)
			return nil
		}
		e.setConfig(&c)
		e.setBookkeeping(c.bookkeeping())
	} else {
		var ne *entry
		idx, ne = r.tab.alloc()
		c.gen = ne.gen
		*ne = c
		e = ne
		r.insert(idx, e)
	}
	if !e.enabled {
		r.unschedule(e)
		return nil
	}
	due := e.next
	if due == 0 && e.kind != kindOnceID {
		due = e.nextAfter(nowNs)
	}
	if !r.mine(j.ID) {
		if due != 0 && due < nowNs {
			due = e.nextAfter(nowNs)
		}
		e.next = due
		r.schedule(idx, e, due)
		return nil
	}
	slot, ev := r.settle(idx, e, due, nowNs)
	if ev != nil {
		r.finish(*ev, false)
	}
	if slot != 0 && r.state == stateRunning {
		r.enqueue(e, task{scheduled: slot})
	}
	return nil
}

// Drop makes the runner forget job id without deleting it from the store,
// as when another runner removed it. A run in flight finishes; its
// bookkeeping is dropped. It reports whether the runner held the job.
func (r *Runner) Drop(id string) bool {
	defer r.lockJob(id)()
	r.mu.Lock()
	defer r.mu.Unlock()
	idx, e, ok := r.lookup(id)
	if !ok {
		return false
	}
	r.unlink(idx, e)
	return true
}

// IDs returns the ids of the jobs the runner holds, in creation order.
func (r *Runner) IDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, r.jobs.len())
	for _, idx := range r.order {
		if idx >= 0 {
			out = append(out, r.tab.at(idx).id)
		}
	}
	return out
}
