package cron

import (
	"container/heap"
	"context"
	"fmt"
	"time"
)

// takeAhead hands the slot due of e, seen at now, to the claiming
// goroutine: the timer goroutine takes it r.lead before its time, and a
// slot due within half of that is urgent. mu is held.
func (r *Runner) takeAhead(e *entry, due, now int64) {
	r.holdSlot(e, due)
	r.ahead = append(r.ahead, task{e: e, gen: e.gen, runID: newID(), scheduled: due, claimed: true})
	if len(r.ahead) == 1 {
		select {
		case r.claimWake <- struct{}{}:
		default:
		}
	}
	if due-now < r.lead/2 {
		select {
		case r.claimNow <- struct{}{}:
		default:
		}
	}
}

// claimLoop is the claiming goroutine: it claims the slots the timer
// goroutine takes ahead until ctx (that of Run) ends. Once a slot is
// taken, it waits a fifth of the lead for more (unless one is urgent), so
// that each claim covers the slots of that time: the slots are claimed
// between four fifths of the lead and the whole lead before their time.
func (r *Runner) claimLoop(ctx context.Context) {
	var c claimBufs
	for {
		select {
		case <-r.claimWake:
		case <-ctx.Done():
			return
		}
		linger := time.NewTimer(time.Duration(r.lead / 5))
		select {
		case <-linger.C:
		case <-r.claimNow:
			linger.Stop()
		case <-ctx.Done():
			linger.Stop()
			return
		}
		for r.claimSlots(ctx, &c) {
		}
	}
}

// claimBufs are the claiming goroutine's buffers, reused from one batch
// to the next.
type claimBufs struct {
	batch []task
	runs  []Run
	keep  []int // for each run, its task in batch
}

// claimSlots claims the slots taken ahead so far in the store and hands
// each one won to the timer goroutine (or to a worker at once when its
// time has come). A slot of a job removed is not claimed; a slot of a
// job whose partition moved away since it was taken is: the runner that
// took the job over starts after the slots this one took, so this one
// calls them (the claim keeps each slot to one runner). A failed claim
// is recorded as a skipped run that says why. It reports whether there
// was any slot to claim.
func (r *Runner) claimSlots(ctx context.Context, c *claimBufs) bool {
	r.mu.Lock()
	resync := len(r.resync) > 0 || len(r.takeovers) > 0
	r.mu.Unlock()
	if resync {
		r.resyncLapsed(ctx)
	}
	now := r.now().UTC()
	r.mu.Lock()
	batch := r.ahead
	r.ahead = c.batch[:0]
	runs, keep := c.runs[:0], c.keep[:0]
	for i, t := range batch {
		if t.e.gen != t.gen {
			r.dropTask(t)
			continue
		}
		runs = append(runs, Run{ID: t.runID, JobID: t.e.id, ScheduledAt: fromNano(t.scheduled), TriggeredAt: now})
		keep = append(keep, i)
	}
	// A job dropped while its claim is on its way stays pending (loose),
	// so that the slot, if won, is still called and recorded.
	r.claiming = batch
	r.mu.Unlock()
	defer func() {
		clear(batch)
		clear(runs)
		c.batch, c.runs, c.keep = batch[:0], runs[:0], keep[:0]
	}()
	if len(batch) == 0 {
		return false
	}
	var won []bool
	var err error
	if len(runs) > 0 {
		won, err = r.sh.ClaimSlots(ctx, runs)
		if err == nil && len(won) != len(runs) {
			err = fmt.Errorf("cron: the store answered %d claims for %d slots", len(won), len(runs))
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.claiming = nil
	if err == nil || ctx.Err() == nil {
		// Each slot of the batch now has its row (won here, won by
		// another runner, or the skipped run of a failed claim, recorded
		// below): the next_run_at written may pass it. A slot taken ahead
		// since bounds its entry's in turn.
		for _, t := range batch {
			r.claimedSlot(t.e, t.gen, t.scheduled)
		}
		for _, t := range r.ahead {
			r.holdSlot(t.e, t.scheduled)
		}
	}
	nowNs := toNano(r.now())
	for k, i := range keep {
		t, run := batch[i], runs[k]
		switch {
		case r.state != stateRunning:
			r.dropTask(t)
		case err != nil:
			r.dropTask(t)
			if ctx.Err() == nil {
				r.claimFailed(run, err, t.e.gen != t.gen)
			}
		case !won[k]:
			r.log.Debug("cron: slot claimed by another runner", "job_id", run.JobID, "scheduled_at", run.ScheduledAt)
			r.dropTask(t)
		case t.scheduled <= nowNs:
			r.release(t, nowNs)
		default:
			heap.Push(&r.ready, t)
			if t.scheduled < r.wakeAt {
				select {
				case r.wake <- struct{}{}:
				default:
				}
			}
		}
	}
	return true
}

// releaseDue hands the claimed slots whose time has come to the workers,
// and returns how long until the next one (maxWait when there is none).
// mu is held.
func (r *Runner) releaseDue(now int64) time.Duration {
	for len(r.ready) > 0 {
		t := r.ready[0]
		if t.scheduled > now {
			return time.Duration(t.scheduled - now)
		}
		heap.Pop(&r.ready)
		r.release(t, now)
	}
	return maxWait
}

// release hands the claimed slot t to a worker at now, unless the runner
// was held up (a process stopped or starved) so long since the claim that
// the slot is later than MisfireTolerance, and than the job's
// misfire_grace: then the slot is recorded as missed (the claim's run,
// "holder stopped") and not called, as the misfire rules would have had
// it; or unless the
// job's previous run is still in flight: then it is recorded as skipped,
// as an unshared runner does at the slot's time. mu is held.
func (r *Runner) release(t task, now int64) {
	e := t.e
	if late := now - t.scheduled; e.gen == t.gen && late > int64(r.cfg.MisfireTolerance) && (e.grace() <= 0 || late >= e.grace()) {
		r.dropTask(t)
		at := fromNano(now)
		r.log.Warn("cron: claimed slot missed: the runner was held up past the misfire tolerance", "job_id", e.id, "run_id", t.runID,
			"scheduled_at", fromNano(t.scheduled), "late", time.Duration(late))
		r.finish(Run{ID: t.runID, JobID: e.id, ScheduledAt: fromNano(t.scheduled), TriggeredAt: at, FinishedAt: at, Status: StatusMissed, Reason: ReasonHolderStopped,
			Error: fmt.Sprintf("holder stopped: claimed, then found %v late: the runner was held up past the misfire tolerance", time.Duration(late).Round(time.Millisecond))}, false)
		return
	}
	if e.gen == t.gen {
		if e.inflight > 0 {
			r.dropTask(t)
			run, _ := r.skipInFlight(e, t.runID, t.scheduled, now)
			r.finish(run, false)
			return
		}
		e.inflight++
		t.counted = true
	}
	r.queue = append(r.queue, t)
	r.work.Signal()
}

// readyHeap is a min-heap of tasks by scheduled time (container/heap).
type readyHeap []task

func (h readyHeap) Len() int           { return len(h) }
func (h readyHeap) Less(i, j int) bool { return h[i].scheduled < h[j].scheduled }
func (h readyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *readyHeap) Push(x any)        { *h = append(*h, x.(task)) }
func (h *readyHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = task{}
	*h = old[:len(old)-1]
	return t
}

// finishClaimed is the end of claiming ahead, once the timer and the
// claiming goroutines have stopped: the slots taken and not claimed yet
// are claimed (for at most four times the lead), and every slot claimed
// is handed to the workers at its time (at most the lead from now), so
// that a runner that stops calls each slot it took: no other runner would.
func (r *Runner) finishClaimed() {
	if r.lead == 0 {
		return
	}
	// The slots taken and not claimed yet: the runner already rolled their
	// jobs on, so no runner would call them unless this one does.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Duration(r.lead))
	var c claimBufs
	for r.claimSlots(ctx, &c) {
	}
	cancel()
	deadline := time.Now().Add(2 * time.Duration(r.lead))
	for {
		r.mu.Lock()
		wait := r.releaseDue(toNano(r.now()))
		left := len(r.ready)
		if left > 0 && time.Now().After(deadline) {
			// The clock jumped back: these slots are not near after all.
			for _, t := range r.ready {
				r.dropTask(t)
			}
			r.ready, left = nil, 0
		}
		r.mu.Unlock()
		if left == 0 {
			return
		}
		time.Sleep(wait)
	}
}

// holdSlot notes that slot due of e is taken but has no row in the shared
// store yet: until its claim is written, the next_run_at the recorder
// writes for e is at most due, so that a runner that takes e over after
// this one dies, stops or loses e's partition starts at that slot (one of
// the two wins its claim) instead of after it. mu is held.
func (r *Runner) holdSlot(e *entry, due int64) {
	if r.alone {
		return // no other runner takes the job over
	}
	if h, ok := r.holds[e]; !ok || h.gen != e.gen {
		r.holds[e] = slotHold{at: due, gen: e.gen}
	}
}

// claimedSlot ends the hold of slot due of e, taken at generation gen
// (see holdSlot): its row is written. mu is held.
func (r *Runner) claimedSlot(e *entry, gen uint32, due int64) {
	if h, ok := r.holds[e]; ok && (h.gen != e.gen || h.gen == gen && h.at == due) {
		delete(r.holds, e)
		r.markDirty(e)
	}
}

// slotHold is the earliest slot of an entry taken but not yet claimed,
// and the entry's generation then (an entry's memory is reused once its
// job is removed).
type slotHold struct {
	at  int64
	gen uint32
}

// storedNext returns the next_run_at to write for e over a shared store:
// e's, or the earliest slot taken and not yet claimed when that is
// earlier. mu is held.
func (r *Runner) storedNext(e *entry, b *Bookkeeping) {
	if h, ok := r.holds[e]; ok && h.gen == e.gen && (e.next == 0 || h.at < e.next) {
		b.NextRunAt = fromNano(h.at)
	}
}
