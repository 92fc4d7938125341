package cron

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// SlotClaimer is an optional capability of a [Store] shared by several
// runners (several processes on one database). Before a worker calls the
// executor for a run, the runner calls ClaimRun with the run as it starts
// (Status, FinishedAt and the result fields empty); the run is called only
// when ClaimRun returns true. A store makes each slot run at most once
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

// sharedCaps are the optional capabilities of a shared store.
type sharedCaps struct {
	claim  SlotClaimer
	owner  Owner
	reader JobReader
	insert Inserter
}

func sharedOf(s Store) sharedCaps {
	var c sharedCaps
	c.claim, _ = s.(SlotClaimer)
	c.owner, _ = s.(Owner)
	c.reader, _ = s.(JobReader)
	c.insert, _ = s.(Inserter)
	return c
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
		now := r.now().UTC()
		r.log.Warn("cron: run not called: its claim failed", "job_id", info.JobID, "run_id", info.RunID, "scheduled_at", info.ScheduledAt, "error", err)
		r.mu.Lock()
		r.finish(Run{JobID: info.JobID, ScheduledAt: info.ScheduledAt, TriggeredAt: info.TriggeredAt, FinishedAt: now,
			Status: StatusSkipped, Error: fmt.Sprintf("run not called: claim in the store failed: %v", err)}, t.e.gen != t.gen)
		r.mu.Unlock()
		return false
	}
	if !ok {
		r.log.Debug("cron: slot claimed by another runner", "job_id", info.JobID, "scheduled_at", info.ScheduledAt)
	}
	return ok
}

// unclaimed ends task t that was not called.
func (r *Runner) unclaimed(t task) {
	r.mu.Lock()
	if t.e.gen == t.gen {
		t.e.inflight--
	}
	r.mu.Unlock()
}

// getShared reads job id from the store when the runner holds it but does
// not own it. ok is false when the runner's own copy should answer.
func (r *Runner) getShared(id string) (Job, bool) {
	if r.sh.reader == nil || r.mine(id) {
		return Job{}, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	j, err := r.sh.reader.Job(ctx, id)
	if err != nil {
		return Job{}, false
	}
	return j, true
}

// Hold makes the runner hold job j as another runner stored it, without
// writing it back to the store: a new id is added (after every held job in
// the creation order), a known one takes j's configuration. A job whose
// schedule and enabled flag did not change keeps the bookkeeping the
// runner has while the runner owns it (it is the one writing it), and
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
			c.setBookkeeping(e.bookkeeping())
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
