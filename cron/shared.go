package cron

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// SharedStore is the capability of a [Store] shared by several runners
// (several processes on one database, as store/sqlstore's Jobs). It is
// the one contract the runner works through: [New] sees any other store
// (or none) as a SharedStore with one member, which owns every job and
// wins every claim. Each runner holds and fires only the jobs the store
// says it owns, claims
// every run in the store before it is called, so that each slot is called
// at most once across the runners, and writes its bookkeeping and runs in
// batches. Every adapter passes store/storetest.TestSharedStore.
//
// Each stored job has a version, which every acknowledged write of its
// configuration ([SharedStore.Write]) raises. The runner writes the
// bookkeeping of a job with the version it computed it from
// ([Recorded.Version]), and the store writes it only while the row still
// has that version: the order of an API write and of the bookkeeping of
// a run is a property of the writes, not of their timing.
type SharedStore interface {
	Store
	RunStore

	// Owns reports whether this runner fires job id now. The answer
	// may change at any time (on the gain or loss of a lease); Owns must
	// be fast and safe for concurrent use: the timer goroutine calls it at
	// each slot it takes.
	Owns(id string) bool
	// LoadHeld returns the jobs this runner fires now, in creation order,
	// with the version of each (vers has the length of jobs). [Runner.Load]
	// calls it in place of Load.
	LoadHeld(ctx context.Context) (jobs []Job, vers []int64, err error)
	// Read returns job id as stored, bookkeeping included, and its
	// version; an unknown id is [ErrNotFound].
	Read(ctx context.Context, id string) (Job, int64, error)
	// Write stores j durably, its bookkeeping included, and returns the
	// job's new version, higher than any it had. It compares and sets:
	// with version 0 it creates j, and an id already stored (by any
	// runner) fails with an error wrapping [ErrExists]; with a version
	// above 0 it replaces the stored job only while that is its version,
	// and fails with an error wrapping [ErrConflict] when another write
	// came first ([ErrNotFound] when the job is gone); with a negative
	// version it replaces the stored job whatever its version, or adds j.
	// The runner writes a change with the version it read, and on a
	// conflict reads the job again and applies the change to what another
	// runner wrote: two runners that pause, resume or update one job at
	// once leave one outcome, and one record of it.
	Write(ctx context.Context, j Job, version int64) (newVersion int64, err error)
	// PageJobs pages through every stored job as [Runner.List] does
	// through the jobs of a runner: up to q.Limit jobs (0 or less: no
	// limit) whose id or name contains q.Text ignoring case and that
	// q.Keep (when not nil) returns true for, in creation order, after
	// the job with id q.After ("": from the first), and whether more
	// follow; an After that names no job is [ErrNotFound].
	PageJobs(ctx context.Context, q JobQuery) (jobs []Job, more bool, err error)
	// CountJobs counts every stored job, enabled and paused.
	CountJobs(ctx context.Context) (enabled, paused int, err error)
	// ClaimRun records run r as started, before it is called, with
	// Status, FinishedAt and the result fields empty, and reports whether
	// this runner won it. With slot true, a second claim of one (JobID,
	// ScheduledAt) loses; with slot false (a run of [Runner.RunNow]) the
	// run is claimed by its id alone. A run whose claim fails or loses is
	// not called; a failed claim is recorded as skipped with the error.
	// [RunStore.AppendRun] (or AppendRuns) of the same run id completes
	// the claimed run. Retries happen inside one call of the executor:
	// one run, one claim.
	ClaimRun(ctx context.Context, r Run, slot bool) (bool, error)
	// ClaimSlots claims the slots of runs at once, as ClaimRun(ctx, run,
	// true) does each, and returns whether each was won (won has the
	// length of runs); an error means none was claimed by this call. The
	// runner calls it with the slots it takes ahead (see
	// [Config.ClaimAhead]).
	ClaimSlots(ctx context.Context, runs []Run) (won []bool, err error)
	// RecordBatch stores the bookkeeping of each job in recs, each only
	// while the job's version is the record's [Recorded.Version]; of a
	// [Recorded.LastOnly] record only the last-run fields, and the
	// last-run fields of any record only when its LastRunAt is not before
	// the stored one. An id that no job has is skipped; an id appears at
	// most once.
	RecordBatch(ctx context.Context, recs []Recorded) error
	// AppendRuns adds each run to its job's history, in order, as
	// [RunStore.AppendRun] does; a run of a job no longer stored is
	// skipped.
	AppendRuns(ctx context.Context, runs []Run) error
	// LastSlots returns, for each job of ids that has one, the latest row
	// of its schedule's slots in the history: of the runs claimed with
	// slot true ([SharedStore.ClaimRun], ClaimSlots) and the skipped or
	// missed slots recorded, not the runs of [Runner.RunNow], the one
	// with the latest ScheduledAt, with at least its ID, JobID,
	// ScheduledAt and Slots. The runner calls it once for the jobs it
	// takes over at a time whose next_run_at has passed, and starts each
	// after the slots of that row: the stored next_run_at may lag behind
	// the runner that held the job before (its writes come in batches),
	// and the runner never records as missed a slot that another runner
	// claimed or recorded.
	LastSlots(ctx context.Context, ids []string) (map[string]Run, error)
}

// RunCounter is an optional capability of a [SharedStore]: the runs in
// flight of a job on every runner of the store, so that the overlap rule
// of [Runner.RunNow] holds across them. store/sqlstore has it.
type RunCounter interface {
	// RunsInFlight counts the runs of job id that another live runner of
	// the store has claimed ([SharedStore.ClaimRun]) and not yet
	// finished, and whose time is not after now: slots claimed ahead of
	// their time do not count, nor the unfinished runs of a runner whose
	// lease ran out. The runs of this store's own runner need not count:
	// the runner counts those itself.
	RunsInFlight(ctx context.Context, id string, now time.Time) (int, error)
}

// unavailable wraps err, a failed read of the shared store while doing
// what, in [ErrUnavailable].
func unavailable(what string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
}

// versions are the versions of the jobs a runner over a [SharedStore]
// holds, by their slot in the runner's table, in slabs like the table's.
type versions struct {
	slabs []*[1 << slabBits]int64
}

func (v *versions) get(idx int32) int64 {
	if int(idx>>slabBits) >= len(v.slabs) {
		return 0
	}
	return v.slabs[idx>>slabBits][idx&(1<<slabBits-1)]
}

func (v *versions) set(idx int32, ver int64) {
	if ver == 0 && int(idx>>slabBits) >= len(v.slabs) {
		return // get answers 0 there: a runner whose store has no versions keeps no slabs
	}
	for int(idx>>slabBits) >= len(v.slabs) {
		v.slabs = append(v.slabs, new([1 << slabBits]int64))
	}
	v.slabs[idx>>slabBits][idx&(1<<slabBits-1)] = ver
}

// loose is an entry the runner does not hold but still runs: a job
// dropped (its partition moved to another runner) while some of its
// slots were claimed, queued or running, which this runner still calls
// and records, or while the bookkeeping of its last run waited for the
// recorder, which this runner still writes; or the copy of a stored job
// that a run-now of a job not held runs (idx -1). Its pos is -1.
type loose struct {
	idx int32 // its slot in the table, -1 for none
	ver int64
}

// version returns the version of the job of e. mu is held.
func (r *Runner) version(e *entry) int64 {
	if e.pos < 0 {
		return r.loose[e].ver
	}
	return r.vers.get(r.order[e.pos])
}

// pending reports whether e has runs claimed, queued or running. mu is
// held.
func (r *Runner) pending(e *entry) bool {
	if e.inflight > 0 {
		return true
	}
	for _, t := range r.ahead {
		if t.e == e && t.gen == e.gen {
			return true
		}
	}
	for _, t := range r.ready {
		if t.e == e && t.gen == e.gen {
			return true
		}
	}
	for _, t := range r.claiming {
		if t.e == e && t.gen == e.gen {
			return true
		}
	}
	return false
}

// reap frees the loose entries that have nothing left to run. mu is held.
func (r *Runner) reap() {
	for e, l := range r.loose {
		if r.pending(e) || e.dirty {
			continue
		}
		delete(r.loose, e)
		if l.idx >= 0 {
			r.tab.release(l.idx)
		}
	}
}

// storeTimeout bounds the store calls the runner makes on its own (in
// its loops, or for a run-now, beside its caller's context).
const storeTimeout = 10 * time.Second

// readStored reads job id from the store, for a job the runner does
// not hold, or to compare with what it holds.
func (r *Runner) readStored(ctx context.Context, id string) (j Job, ver int64, err error) {
	j, ver, err = r.sh.Read(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return Job{}, 0, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if err != nil {
		return Job{}, 0, unavailable(fmt.Sprintf("read job %q", id), err)
	}
	return j, ver, nil
}

// updateStored is [Runner.Update] of a job the runner does not hold: it
// reads the job from the store, applies change, validates the result as
// Update does, recomputes the bookkeeping and paused_at as Update would
// and saves the job durably. The runner that fires the job takes the
// change from the store (see [Runner.Hold]), and records the pause of a
// job resumed. The result is held to MinInterval unless stored (a
// pause or resume, which changes nothing else). The caller holds the
// job's lock.
func (r *Runner) updateStored(ctx context.Context, id string, change func(*Job) error, stored bool) (Job, error) {
	for try := 1; ; try++ {
		j, err := r.updateStoredOnce(ctx, id, change, stored)
		if !errors.Is(err, ErrConflict) || try == conflictTries {
			return j, err
		}
	}
}

// conflictTries bounds the read, change and write of a job that another
// runner keeps writing first (see [SharedStore.Write]).
const conflictTries = 8

// updateStoredOnce is one try of updateStored: the write fails with
// [ErrConflict] when another runner wrote the job since it was read.
func (r *Runner) updateStoredOnce(ctx context.Context, id string, change func(*Job) error, stored bool) (Job, error) {
	j, ver, err := r.readStored(ctx, id)
	if err != nil {
		return Job{}, err
	}
	now := r.now()
	var old entry
	if err := r.compile(&j, now, &old, true); err != nil {
		return Job{}, fmt.Errorf("cron: stored job %q: %w", id, err)
	}
	old.setBookkeeping(j.Bookkeeping())
	typ := j.Type
	if err := change(&j); err != nil {
		return Job{}, err
	}
	if j.ID != id {
		return Job{}, invalid("id", "cannot be changed (the job is %q, got %q)", id, j.ID)
	}
	c := &entry{}
	if err := r.compile(&j, now, c, stored); err != nil {
		return Job{}, err
	}
	if !stored {
		if err := r.checkRetyped(&j, typ); err != nil {
			return Job{}, err
		}
	}
	c.setBookkeeping(old.bookkeeping())
	nowNs := toNano(now)
	c.setPausedAt(nextPausedAt(&old, c, nowNs))
	if !old.sameSchedule(c) || old.enabled != c.enabled {
		r.reschedulePlan(c, old.enabled, nowNs)
		if !old.enabled && c.enabled {
			resumedStatus(c, false, r.statusBeforePause(ctx, id))
		}
	}
	if _, err := r.save(ctx, c.job(false), ver); err != nil {
		return Job{}, err
	}
	// A resume is recorded by the runner that holds the job (see
	// [Runner.Hold]): it alone knows which slots it did not call, the
	// ones it took ahead of the pause having run.
	return c.job(true), nil
}

// runStored is [Runner.RunNow] of a job the runner does not hold: the run
// is called by this runner, from a copy of the job as stored that the
// runner does not hold (claimed by its run id, like every run-now), and
// the runner writes the run's last-run fields. elsewhere is the count of
// the job's runs in flight on the runners of the store ([RunCounter]),
// refused as the runs in flight here are unless force. mu is held on
// entry and exit. by names who asked.
func (r *Runner) runStored(id, runID, by string, now int64, over *RunOptions, force bool, elsewhere int) error {
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	j, ver, err := r.readStored(ctx, id)
	cancel()
	var c entry
	if err == nil {
		if cerr := r.compile(&j, r.now(), &c, true); cerr != nil {
			err = fmt.Errorf("cron: stored job %q: %w", id, cerr)
		}
		c.setBookkeeping(j.Bookkeeping())
	}
	r.mu.Lock()
	if err != nil {
		return err
	}
	if r.state >= stateStopping {
		return ErrClosed
	}
	if over != nil {
		if err := over.check(c.fn() == nil); err != nil {
			return err
		}
	}
	if !force {
		for l := range r.loose {
			if l.id == id && l.inflight > 0 {
				return fmt.Errorf("%w: job %q has %d run(s) queued or running", ErrInFlight, id, l.inflight)
			}
		}
		if elsewhere > 0 {
			return inFlightElsewhere(id, elsewhere)
		}
	}
	e := new(entry)
	*e = c
	e.pos = -1
	r.loose[e] = loose{idx: -1, ver: ver}
	r.enqueue(e, task{runID: runID, scheduled: now, over: over, by: by})
	return nil
}

// create stores the new job j and returns its version: over a shared
// store, an id stored by any runner is [ErrExists].
func (r *Runner) create(ctx context.Context, j Job) (int64, error) {
	ver, err := r.sh.Write(ctx, j, 0)
	if errors.Is(err, ErrExists) {
		return 0, fmt.Errorf("%w: %q", ErrExists, j.ID)
	}
	if err != nil {
		return 0, fmt.Errorf("cron: save job %q: %w", j.ID, err)
	}
	return ver, nil
}

// mine reports whether this runner fires job id.
func (r *Runner) mine(id string) bool {
	return r.sh.Owns(id)
}

// markRan queues the bookkeeping of e after a run. Over a shared store, a
// run of a job this runner does not fire (a run-now of a job another
// runner holds, or a slot this runner claimed before the job's partition
// moved away) writes the run's last-run fields only, so that
// last_run_at and last_status show it as they would on one runner. mu is
// held.
func (r *Runner) markRan(e *entry, slot bool) {
	if e.pos >= 0 && r.mine(e.id) {
		r.markDirty(e)
		return
	}
	if e.id == "" {
		return
	}
	r.lastRuns = append(r.lastRuns, Recorded{ID: e.id, Bookkeeping: e.bookkeeping(), Version: r.version(e), LastOnly: true})
	r.wakeRecorder()
}

// ownerRetry is how often a runner looks again whether it owns a job it
// holds whose slot came while it did not (see awaitOwner).
const ownerRetry = 100 * time.Millisecond

// awaitOwner handles the slot due of a job the runner holds but does not
// own at now: its lease lapsed (renewals held up by a slow database, or
// the process stopped) or is not taken yet. The job stays at due, neither
// called nor rolled on, and is looked at again after ownerRetry: the
// runner calls the slot (or records it missed) if it owns the job by
// then, and when the partition went to another runner, that one starts at
// due (the job's next_run_at written is not past it). Rolling the job on
// here would lose the slot whenever the lease comes back to this runner.
// mu is held.
func (r *Runner) awaitOwner(idx int32, e *entry, due, now int64) {
	e.next = due
	e.lapsed = true
	r.schedule(idx, e, max(due, now+r.lead+int64(ownerRetry)))
}

// ownerBack handles the slot due of e, seen at now, when the runner owns
// the job again after a lapse (see awaitOwner). Another runner may have
// held the job meanwhile, called its slots and moved its next_run_at on:
// a slot late past MisfireTolerance is neither called nor recorded from
// memory, but the job is read as stored first (by the claiming
// goroutine, resyncLapsed), and resumes at the stored next_run_at when
// that is later. It reports whether fire goes on with the slot. mu is
// held.
func (r *Runner) ownerBack(idx int32, e *entry, due, now int64) bool {
	e.lapsed = false
	if r.lead <= 0 || now-due <= int64(r.cfg.MisfireTolerance) {
		return true
	}
	r.resync = append(r.resync, e.id)
	select {
	case r.claimWake <- struct{}{}:
	default:
	}
	e.next = due
	r.schedule(idx, e, now+r.lead+int64(ownerRetry))
	return false
}

// resyncLapsed reads as stored the jobs whose lease came back after a
// lapse (see ownerBack), and moves each on to its stored next_run_at, or
// past the latest slot the store has a row for, when another runner got
// further; otherwise the job goes on from the slot it waited at (called
// late or recorded missed, by the misfire rules). It places the jobs
// taken over (see takeOver) after that slot too. The latest slots of all
// these jobs are one read ([SharedStore.LastSlots]). It runs in the
// claiming goroutine.
func (r *Runner) resyncLapsed(ctx context.Context) {
	r.mu.Lock()
	ids, taken := r.resync, r.takeovers
	r.resync, r.takeovers = nil, nil
	r.mu.Unlock()
	all := make([]string, 0, len(ids)+len(taken))
	all = append(all, ids...)
	for _, t := range taken {
		all = append(all, t.id)
	}
	last := r.lastSlots(ctx, all)
	if len(taken) > 0 {
		r.mu.Lock()
		now := toNano(r.now())
		for _, t := range taken {
			idx, e, ok := r.lookup(t.id)
			if !ok || e.gen != t.gen || !e.enabled || e.queuedAt != 0 || e.next != t.due {
				continue // dropped, changed or placed since
			}
			due := t.due
			if l, ok := last[t.id]; ok {
				due = afterSlots(e, due, l)
			}
			if !r.mine(t.id) {
				if due != 0 {
					r.awaitOwner(idx, e, due, now)
				} else {
					e.next = 0
				}
				continue
			}
			r.settleHeld(idx, e, due, now)
		}
		r.mu.Unlock()
	}
	for _, id := range ids {
		rctx, cancel := context.WithTimeout(ctx, storeTimeout)
		j, _, err := r.sh.Read(rctx, id)
		cancel()
		r.mu.Lock()
		if idx, e, ok := r.lookup(id); ok && e.enabled && !e.lapsed {
			if err == nil && toNano(j.NextRunAt) > e.next {
				e.next = toNano(j.NextRunAt)
			}
			if l, ok := last[id]; ok && e.next != 0 {
				e.next = afterSlots(e, e.next, l)
			}
			r.schedule(idx, e, e.next)
		}
		r.mu.Unlock()
	}
}

// claim asks the shared store for run t of job j before it is called (a
// run-now, or a slot when ClaimAhead is negative). It returns false when
// the run must not be called: another runner holds the slot, this runner
// no longer owns the job, or the claim failed (then a skipped run says
// why).
func (r *Runner) claim(ctx context.Context, t task, slot bool, info RunInfo) bool {
	if slot && !r.mine(info.JobID) {
		return false
	}
	ok, err := r.sh.ClaimRun(ctx, Run{ID: info.RunID, JobID: info.JobID, ScheduledAt: info.ScheduledAt, TriggeredAt: info.TriggeredAt}, slot)
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
		Status: StatusSkipped, Reason: ReasonClaimFailed, Error: fmt.Sprintf("run not called: claim in the store failed: %v", err)}, drop)
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
		mem.Failures, mem.LastAlert = stored.Failures, stored.LastAlert
	}
	return mem
}

// pageStored is [Runner.List] from the store: the jobs this runner
// holds and fires show the bookkeeping it has in memory, as [Runner.Get]
// does.
func (r *Runner) pageStored(ctx context.Context, q JobQuery) ([]Job, bool, error) {
	jobs, more, err := r.sh.PageJobs(ctx, q)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, false, fmt.Errorf("%w: %q", ErrNotFound, q.After)
		}
		return nil, false, unavailable("page jobs", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range jobs {
		if _, e, ok := r.lookup(jobs[i].ID); ok && r.mine(jobs[i].ID) {
			newerRun(e.bookkeeping(), jobs[i].Bookkeeping()).Apply(&jobs[i])
		}
	}
	return jobs, more, nil
}

// Hold makes the runner hold job j as another runner stored it, at
// version (see [SharedStore]), without writing it back to the store: a
// new id is added (after every held job in the creation order), a known
// one takes j's configuration and version (also an older version than the
// one held: a job deleted and created again starts over; a read that a
// later write overtook is followed by the Hold of that write). A job
// whose schedule and enabled flag did not change keeps the bookkeeping
// the runner has while the runner owns it (it is the one writing it; but
// for j's last run when that is later: a run-now another runner called),
// and takes j's otherwise; when its version changed, the runner writes
// that bookkeeping again at the new version. A job the runner fires is
// scheduled at j's next_run_at, through the misfire rules when that has
// passed (then after the latest slot the store has a row for, should
// that be later: see [SharedStore.LastSlots]); one it held paused that j resumes has its pause recorded here
// (the slots it did not call, as one skipped run). An invalid j is an
// error and changes nothing. Hold is how a runner over a [SharedStore]
// learns of the other runners' writes (see store/sqlstore); an
// application that writes through the runner never needs it.
func (r *Runner) Hold(j Job, version int64) error {
	if j.ID == "" {
		return invalid("id", "is required")
	}
	now := r.now()
	var c entry
	if err := r.compile(&j, now, &c, true); err != nil {
		return fmt.Errorf("cron: hold job %q: %w", j.ID, err)
	}
	c.setBookkeeping(j.Bookkeeping())
	nowNs := toNano(now)
	defer r.lockJob(j.ID)()
	var last map[string]Run
	if r.lead <= 0 && r.mine(j.ID) {
		// No claiming goroutine to read it with others (see takeOver).
		last = r.lastSlots(context.Background(), overdue([]Job{j}, now, r.cfg.MisfireTolerance))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	idx, e, ok := r.lookup(j.ID)
	if ok && e.enabled && !c.enabled && r.mine(j.ID) {
		// Paused by another runner: the slots this one took since
		// paused_at are called, and the pause it records (should it
		// resume the job) starts after them.
		c.setPausedAt(r.pauseStart(e, c.pausedAt(), nowNs))
	}
	var resumedFrom int64
	if ok && !e.enabled && c.enabled && r.mine(j.ID) {
		// Resumed by another runner: this one, which held the job paused,
		// knows which slots it did not call, and records them.
		resumedFrom = e.pausedAt()
	}
	if ok {
		held := r.vers.get(idx)
		r.vers.set(idx, version)
		if e.sameSchedule(&c) && e.enabled == c.enabled && r.mine(j.ID) {
			c.setBookkeeping(newerRun(e.bookkeeping(), c.bookkeeping()))
			e.setConfig(&c)
			r.notePause(e)
			if version != held {
				// What the recorder wrote since that version was refused.
				r.markDirty(e)
			}
			return nil
		}
		e.setConfig(&c)
		e.setBookkeeping(c.bookkeeping())
		r.notePause(e)
		if resumedFrom != 0 {
			// The resume was made before the next run it stored: a slot
			// from that one on came after the resume and is called, even
			// when this runner learns of the resume only after its time.
			until := nowNs
			if e.next != 0 && e.next <= nowNs {
				until = e.next - 1
			}
			r.endPause(e, resumedFrom, until, nowNs)
		}
	} else {
		var ne *entry
		idx, ne = r.tab.alloc()
		c.gen = ne.gen
		*ne = c
		e = ne
		r.insert(idx, e)
		r.vers.set(idx, version)
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
		if due != 0 {
			r.awaitOwner(idx, e, due, nowNs)
		}
		return nil
	}
	if due != 0 && nowNs-due > int64(r.cfg.MisfireTolerance) {
		if r.lead > 0 {
			r.takeOver(e, due)
			return nil
		}
		if l, ok := last[j.ID]; ok {
			due = afterSlots(e, due, l)
		}
	}
	r.settleHeld(idx, e, due, nowNs)
	return nil
}

// settleHeld places e, a job this runner holds and fires, at due as
// settle does, and handles the slot to run at once and the record of
// the slots passed. mu is held.
func (r *Runner) settleHeld(idx int32, e *entry, due, now int64) {
	slot, ev := r.settle(idx, e, due, now)
	if ev != nil {
		r.finish(*ev, false)
	}
	switch {
	case slot == 0:
	case r.servicePaused(slot):
		r.skipPaused(e, slot, now)
	case r.state == stateRunning:
		r.enqueue(e, task{scheduled: slot})
	}
}

// takeover is a job taken over whose next_run_at (due) had passed, at
// the generation of its entry then.
type takeover struct {
	id  string
	gen uint32
	due int64
}

// takeOver defers the placing of e, a job this runner takes over whose
// next_run_at due has passed, to the claiming goroutine (see
// resyncLapsed): the stored next_run_at may lag behind the runner that
// held the job before, which writes it in batches, or which a stop held
// up with a write on its way; the slots from due on may have rows
// already, claimed (and called) or recorded by it. The claiming
// goroutine reads the latest of those rows of every job taken over at
// once ([SharedStore.LastSlots]) and places each job after it. Until
// then the job is not in the heap. mu is held.
func (r *Runner) takeOver(e *entry, due int64) {
	e.next = due
	r.unschedule(e)
	r.takeovers = append(r.takeovers, takeover{id: e.id, gen: e.gen, due: due})
	select {
	case r.claimWake <- struct{}{}:
	default:
	}
}

// overdue returns the ids of the enabled jobs whose next_run_at passed
// before now by more than tol.
func overdue(jobs []Job, now time.Time, tol time.Duration) []string {
	var ids []string
	for i := range jobs {
		if j := &jobs[i]; !j.Paused && !j.NextRunAt.IsZero() && now.Sub(j.NextRunAt) > tol {
			ids = append(ids, j.ID)
		}
	}
	return ids
}

// lastSlots reads from a shared store the latest row of a slot of each
// job of ids ([SharedStore.LastSlots]); alone, or when the read fails
// (logged), it answers none.
func (r *Runner) lastSlots(ctx context.Context, ids []string) map[string]Run {
	if r.alone || len(ids) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	last, err := r.sh.LastSlots(ctx, ids)
	if err != nil {
		r.log.Warn("cron: reading the latest slots of jobs taken over failed; they start at their stored next_run_at", "jobs", len(ids), "error", err)
		return nil
	}
	return last
}

// afterSlots returns where e, due at due, starts when l is the latest row
// of its slots in the store: after the slots l stands for when that is
// later (0 when the schedule has none after them), due otherwise.
func afterSlots(e *entry, due int64, l Run) int64 {
	if l.ScheduledAt.IsZero() {
		return due
	}
	s := e.schedule()
	end := l.ScheduledAt
	for k := 1; k < l.Slots; k++ {
		n := s.Next(end)
		if n.IsZero() {
			break
		}
		end = n
	}
	if toNano(end) < due {
		return due
	}
	return e.nextAfter(toNano(end))
}

// Drop makes the runner forget job id without deleting it from the
// store, as when another runner removed it or its partition moved to
// another runner. The slots of the job this runner has claimed, queued
// or started are still called (or recorded as missed) and recorded, so
// that no claimed slot is left without a status: the runner that takes
// the job over cannot claim them, and the last run's bookkeeping not
// yet written is written. It reports whether the runner held the job.
func (r *Runner) Drop(id string) bool {
	defer r.lockJob(id)()
	r.mu.Lock()
	defer r.mu.Unlock()
	idx, e, ok := r.lookup(id)
	if !ok {
		return false
	}
	// A job whose bookkeeping waits for the recorder stays too (loose),
	// until the recorder has written its last-run fields.
	if !r.pending(e) && !e.dirty {
		r.unlink(idx, e)
		return true
	}
	ver := r.vers.get(idx)
	r.unindex(idx, e)
	e.pos = -1
	r.loose[e] = loose{idx: idx, ver: ver}
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
