package cron

import (
	"context"
	"time"
)

// maxWait caps each sleep of the timer goroutine: a low-frequency tick that
// notices a wall clock that jumped (or a suspend that stopped the monotonic
// clock) within a second.
const maxWait = time.Second

// fireBatch bounds the slots handled under one hold of the lock, so that a
// burst of due jobs does not keep API calls waiting.
const fireBatch = 256

// settle places an enabled entry whose run is due at due (0: none), seen at
// now, outside the timer loop (Load, Add, Resume): on time or in the future,
// it goes in the heap at due; past MisfireTolerance the misfire rules apply.
// It returns the slot to run at once (a missed slot within misfire_grace) or
// 0, and the event to emit for a missed once job. mu is held.
func (r *Runner) settle(idx int32, e *entry, due, now int64) (slot int64, ev *Run) {
	if due == 0 {
		e.next = 0
		return 0, nil
	}
	if now-due <= int64(r.cfg.MisfireTolerance) {
		e.next = due
		r.schedule(idx, e, due)
		return 0, nil
	}
	reason := ReasonDowntime
	if !r.alone {
		// A job this runner just took over: its slots passed while no
		// runner held it.
		reason = ReasonNoHolder
	}
	return r.misfire(idx, e, due, now, reason)
}

// misfire applies the misfire rules to the entry's slot due, found at now.
// The event it returns records the slots not called: a once job's, or
// the burst of slots from due on that rolled on, for reason. mu is held.
func (r *Runner) misfire(idx int32, e *entry, due, now int64, reason string) (slot int64, ev *Run) {
	d := decideMisfire(e.schedule(), fromNano(due), fromNano(now), time.Duration(e.grace()))
	e.next = toNano(d.Next)
	r.schedule(idx, e, e.next)
	if d.Status == StatusMissed {
		e.status = statusID(StatusMissed)
		e.setLastErr("")
		t := fromNano(now)
		ev = &Run{JobID: e.id, ScheduledAt: fromNano(due), TriggeredAt: t, FinishedAt: t, Status: StatusMissed, Reason: ReasonPastDue}
		r.log.Info("cron: once job missed", "job_id", e.id, "name", e.name, "scheduled_at", fromNano(due))
	} else if !d.Run {
		r.rolled.add(e, due, toNano(d.Next))
		ev = r.passed(e, due, now, reason)
	}
	r.markDirty(e)
	if d.Run {
		return due, ev
	}
	return 0, ev
}

// schedule puts e in the heap at at (0: takes it out) and wakes the timer
// goroutine when the earliest deadline moves. mu is held.
func (r *Runner) schedule(idx int32, e *entry, at int64) {
	if e.queuedAt == at {
		return
	}
	r.unschedule(e)
	if at == 0 {
		return
	}
	e.queuedAt = at
	r.heap.push(item{at: at, idx: idx, gen: e.gen})
	if at < r.wakeAt {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

func (r *Runner) unschedule(e *entry) {
	if e.queuedAt != 0 {
		e.queuedAt = 0
		r.heap.markStale()
	}
}

// loop is the timer goroutine: it fires what is due and sleeps until the
// next deadline, a change of it, or the end of ctx.
func (r *Runner) loop(ctx context.Context) {
	timer := time.NewTimer(maxWait)
	defer timer.Stop()
	var events []Run
	for {
		r.mu.Lock()
		now := toNano(r.now())
		r.wakeAt = 0
		wait, more := r.fireDue(now, &events)
		if r.lead > 0 {
			wait = min(wait, r.releaseDue(now))
		}
		wait = min(wait, maxWait)
		r.wakeAt = now + int64(wait)
		for i, ev := range events {
			r.finish(ev, false)
			events[i] = Run{}
		}
		events = events[:0]
		if !more {
			r.logRolled()
		}
		r.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		if more {
			continue
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-r.wake:
		}
	}
}

// fireDue handles up to fireBatch due slots at now: those due by now +
// r.lead when slots are claimed ahead. It returns how long to wait for the
// next one (maxWait when there is none), or more = true when due slots
// remain. mu is held.
func (r *Runner) fireDue(now int64, events *[]Run) (wait time.Duration, more bool) {
	horizon := now + r.lead
	for range fireBatch {
		it, ok := r.heap.peek(horizon)
		if !ok {
			return maxWait, false
		}
		if it.at > horizon {
			return time.Duration(it.at - horizon), false
		}
		e := r.tab.at(it.idx)
		e.queuedAt = 0
		r.heap.hold() // the job's next slot, if any, replaces the root
		r.fire(it.idx, e, it.at, now, events)
		r.heap.release()
	}
	return 0, true
}

// fire handles the slot due of e at now: it rolls e to its next slot and
// dispatches the run, records a skip when the previous run is still in
// flight, or applies the misfire rules when the slot is late. mu is held.
func (r *Runner) fire(idx int32, e *entry, due, now int64, events *[]Run) {
	if e.next != 0 && e.next < due {
		due = e.next // a slot that waited for its owner (see awaitOwner)
	}
	if !r.mine(e.id) {
		r.awaitOwner(idx, e, due, now)
		return
	}
	if e.lapsed && !r.ownerBack(idx, e, due, now) {
		return
	}
	if now-due > int64(r.cfg.MisfireTolerance) {
		slot, ev := r.misfire(idx, e, due, now, ReasonDowntime)
		if ev != nil {
			*events = append(*events, *ev)
		}
		if slot == 0 {
			return
		}
	} else {
		e.next = e.nextAfter(due)
		r.schedule(idx, e, e.next)
	}
	if r.servicePaused(due) {
		r.skipPaused(e, due, now)
		return
	}
	if e.x != nil && e.x.skip != nil && e.x.skip.Reason == ReasonServicePaused {
		r.endOverlap(e) // the first slot after a service pause
	}
	if r.lead > 0 {
		// Taken ahead: the skip of a slot whose previous run is still in
		// flight is decided at its time (see release). The bookkeeping is
		// written once the slot is claimed (see holdSlot).
		r.takeAhead(e, due, now)
		return
	}
	if e.inflight > 0 {
		if run, ok := r.skipInFlight(e, "", due, now); ok {
			*events = append(*events, run)
		}
		return
	}
	r.markDirty(e)
	r.enqueue(e, task{scheduled: due})
}

// skipInFlight records in e that its slot due, seen at now, is skipped
// because its previous run is still in flight. A slot claimed in a
// shared store (runID not "") is recorded at once, under its claim's
// id; the others of one overlap are gathered into one record (see
// [Run.Slots]), which the end of the run in flight hands to the
// recorder (endOverlap): then ok is false. mu is held.
func (r *Runner) skipInFlight(e *entry, runID string, due, now int64) (run Run, ok bool) {
	if e.enabled {
		// A slot claimed ahead of the job's pause is still taken at its
		// time; its skip leaves last_status paused, as a run would (the
		// pause is the last word until a resume).
		e.status = statusID(StatusSkipped)
		e.setLastErr("previous run still in flight")
	}
	r.markDirty(e)
	t := fromNano(now)
	run = Run{ID: runID, JobID: e.id, ScheduledAt: fromNano(due), TriggeredAt: t, FinishedAt: t, Status: StatusSkipped,
		Error: "previous run still in flight", Reason: ReasonOverlap}
	if runID != "" {
		return run, true
	}
	r.gatherSkip(e, run)
	return Run{}, false
}

// gatherSkip adds run, a skipped slot of e, to the record of skipped
// slots gathered in e: it counts in that record when it has the same
// reason, and otherwise hands that record to the recorder and starts a
// new one. mu is held.
func (r *Runner) gatherSkip(e *entry, run Run) {
	x := e.ext()
	if x.skip != nil && x.skip.Reason == run.Reason {
		x.skip.Slots = max(x.skip.Slots, 1) + max(run.Slots, 1)
		x.skip.TriggeredAt, x.skip.FinishedAt = run.TriggeredAt, run.FinishedAt
		return
	}
	if x.skip != nil {
		r.finish(*x.skip, false)
	}
	x.skip = &run
}

// endSkips hands the records of skipped slots gathered in every job to
// the recorder, as the runner stops. mu is held.
func (r *Runner) endSkips() {
	for _, idx := range r.order {
		if idx >= 0 {
			r.endOverlap(r.tab.at(idx))
		}
	}
	for e := range r.loose {
		r.endOverlap(e)
	}
}

// passed records the slots of e from due to now that were not called
// (the runner was down or held up, or, over a shared store, no runner
// held the job), and returns the record to emit: one missed record of
// reason for the slots outside the service pause, while the slots the
// pause covers are skipped, reason [ReasonServicePaused], gathered with
// the others of the pause (see skipPaused) or recorded at once when the
// pause has ended by now. A runner restarted during a service pause so
// records the slots that passed while it was down as the pause's. mu is
// held.
func (r *Runner) passed(e *entry, due, now int64, reason string) *Run {
	missed := func(after, until int64) *Run {
		if run, ok := notCalled(e, fromNano(after), fromNano(until), StatusMissed, reason, fromNano(now)); ok {
			return &run
		}
		return nil
	}
	from, to, ok := r.pausedSpan(due, now)
	if !ok {
		run := missed(due-1, now)
		if !r.alone && run != nil && run.Slots > 1 {
			// Over a shared store the first of these slots may have a
			// row already: the runner that held the job before claimed
			// it and died before it wrote the next_run_at past it. It is
			// recorded on its own, so that a record of it that loses to
			// that row does not take the others with it.
			rest, _ := notCalled(e, run.ScheduledAt, fromNano(now), StatusMissed, reason, fromNano(now))
			run.Slots = 0
			r.finish(rest, false)
		}
		return run
	}
	var out []*Run
	if from > due {
		out = append(out, missed(due-1, from-1))
	}
	if run, ok := notCalled(e, fromNano(max(due, from)-1), fromNano(to), StatusSkipped, ReasonServicePaused, fromNano(now)); ok {
		run.Error = ServicePausedError
		if e.enabled { // a paused job's last_status stays paused
			e.status = statusID(StatusSkipped)
			e.setLastErr(ServicePausedError)
		}
		if to < now {
			out = append(out, &run)
		} else {
			r.gatherSkip(e, run)
		}
	}
	if to < now {
		out = append(out, missed(to, now))
	}
	var ev *Run
	for _, run := range out {
		switch {
		case run == nil:
		case ev == nil:
			ev = run
		default:
			r.finish(*run, false)
		}
	}
	return ev
}

// endOverlap hands the record of skipped slots gathered in e, if any, to
// the recorder: its run in flight ended, or a service pause did. mu is
// held.
func (r *Runner) endOverlap(e *entry) {
	if e.x == nil || e.x.skip == nil {
		return
	}
	run := *e.x.skip
	e.x.skip = nil
	r.finish(run, false)
}

// rollLog gathers the slots missed and rolled on (an every or cron job
// whose slot passed while the runner was down or held up) into one log
// record per burst: after a long downtime every such job has one.
type rollLog struct {
	n     int
	ids   []string // the first rollLogIDs
	first int64    // the earliest slot missed
	id    string   // the one job, while n is 1
	name  string
	due   int64
	next  int64
}

// rollLogIDs bounds the job ids named in one record of slots rolled on.
const rollLogIDs = 10

func (l *rollLog) add(e *entry, due, next int64) {
	if l.n == 0 || due < l.first {
		l.first = due
	}
	if l.n == 0 {
		l.id, l.name, l.due, l.next = e.id, e.name, due, next
	}
	l.n++
	if len(l.ids) < rollLogIDs {
		l.ids = append(l.ids, e.id)
	}
}

// logRolled logs the slots rolled on since the last call: one record for
// one job (its id, name and slots), one for many (how many, the first
// ids, the earliest slot). mu is held.
func (r *Runner) logRolled() {
	l := &r.rolled
	switch {
	case l.n == 0:
		return
	case l.n == 1:
		r.log.Info("cron: slot missed, rolled on", "job_id", l.id, "name", l.name, "scheduled_at", fromNano(l.due), "next_run_at", fromNano(l.next))
	default:
		r.log.Info("cron: slots missed, rolled on", "jobs", l.n, "earliest_scheduled_at", fromNano(l.first), "job_ids", l.ids)
	}
	*l = rollLog{ids: l.ids[:0]}
}
