package cron

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// PauseState is the service-wide pause of a runner (maintenance): while
// it is in effect, no slot of any job is called (each is recorded as a
// skipped run whose error is [ServicePausedError]) and run-now is refused,
// whatever each job's own enabled flag says.
type PauseState struct {
	// Paused is true while the pause is set.
	Paused bool
	// Until, when not zero, ends the pause by itself at that time.
	Until time.Time
	// Reason is the text the operator gave, "" for none.
	Reason string
	// Since is when the pause was set.
	Since time.Time
}

// pauseWire is the JSON form of a PauseState.
type pauseWire struct {
	Paused bool   `json:"paused"`
	Until  string `json:"paused_until,omitempty"`
	Reason string `json:"pause_reason,omitempty"`
	Since  string `json:"paused_at,omitempty"`
}

// MarshalJSON writes {"paused": ..., "paused_until": ..., "pause_reason":
// ..., "paused_at": ...}, times RFC3339 in UTC, leaving out the empty
// ones: the form of GET /health in cron/httpapi and of the stores.
func (p PauseState) MarshalJSON() ([]byte, error) {
	return json.Marshal(pauseWire{Paused: p.Paused, Until: formatTime(p.Until), Reason: p.Reason, Since: formatTime(p.Since)})
}

// UnmarshalJSON reads the form MarshalJSON writes; unknown fields are an
// error.
func (p *PauseState) UnmarshalJSON(b []byte) error {
	var w pauseWire
	if err := strictUnmarshal(b, &w); err != nil {
		return err
	}
	until, err := parseTime("paused_until", w.Until)
	if err != nil {
		return err
	}
	since, err := parseTime("paused_at", w.Since)
	if err != nil {
		return err
	}
	*p = PauseState{Paused: w.Paused, Until: until, Reason: w.Reason, Since: since}
	return nil
}

// Active reports whether the pause is in effect at now: it is set, and
// its Until, if any, is after now.
func (p PauseState) Active(now time.Time) bool {
	return p.Paused && (p.Until.IsZero() || now.Before(p.Until))
}

// PauseStore is an optional capability of a [Store]: it keeps the
// service-wide pause ([Runner.PauseAll]) durably. The runner reads it at
// [Runner.Load]; over a [SharedStore] it reads it again every
// [Config.PauseRefresh], so that a pause set through one runner stops
// every runner of the store within that time. Without it, the pause of a
// runner over a store lives in the process alone.
type PauseStore interface {
	// LoadPause returns the pause stored; the zero PauseState when none
	// was ever saved.
	LoadPause(ctx context.Context) (PauseState, error)
	// SavePause stores p durably, replacing the pause stored.
	SavePause(ctx context.Context, p PauseState) error
}

// pauseOf returns the PauseStore of the runner's store, or nil.
func (r *Runner) pauseStore() PauseStore {
	ps, _ := r.store.(PauseStore)
	return ps
}

// PauseAll pauses every firing of the runner (maintenance) without
// touching any job's enabled flag: until it ends, the slots that come are
// skipped, recorded as one skipped run per job (reason and error
// "service paused", [Run.Slots] their number) at the job's first slot
// called after the pause, and
// [Runner.RunNow] returns [ErrServicePaused]. A slot already taken ahead
// of its time over a shared store ([Config.ClaimAhead]) when the pause
// comes still runs. A zero until pauses until [Runner.ResumeAll]; else
// until must lie in the future (a *[ValidationError] naming "until"
// otherwise), and the pause ends by itself then. reason (at most
// [MaxPauseReason] bytes of UTF-8, a *ValidationError naming "reason"
// otherwise) is kept for [Runner.Paused]. The pause is saved in the
// store when it is a [PauseStore] before PauseAll returns: it survives a
// restart, and reaches every runner sharing the store within
// [Config.PauseRefresh]. Pausing again replaces the pause.
//
// The change is authorized and audited ([ActionPauseAll]) as [Runner.Add]'s.
func (r *Runner) PauseAll(ctx context.Context, until time.Time, reason string) (PauseState, error) {
	a, err := r.authorize(ctx, ActionPauseAll, "")
	if err != nil {
		return PauseState{}, err
	}
	now := r.now()
	if !until.IsZero() {
		if !until.After(now) {
			return PauseState{}, invalid("until", "must be in the future, got %s (now %s)", until.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		}
		if !inNanoRange(until) {
			return PauseState{}, invalid("until", "must be before the year 2262, got %s", until.UTC().Format(time.RFC3339))
		}
	}
	if len(reason) > MaxPauseReason {
		return PauseState{}, invalid("reason", "must be at most %d bytes, got %d", MaxPauseReason, len(reason))
	}
	if !utf8.ValidString(reason) {
		return PauseState{}, invalid("reason", "must be UTF-8 text")
	}
	p := PauseState{Paused: true, Until: until.UTC(), Reason: reason, Since: now.UTC()}
	if until.IsZero() {
		p.Until = time.Time{}
	}
	return p, r.changeService(ctx, a, ActionPauseAll, p)
}

// changeService saves p as the service pause for actor a, and audits it
// as act.
func (r *Runner) changeService(ctx context.Context, a Actor, act Action, p PauseState) error {
	before := r.Paused()
	if err := r.setService(ctx, p); err != nil {
		return err
	}
	if r.auditOn() {
		r.audit(ctx, change{actor: a, action: act, before: before, after: p})
	}
	return nil
}

// ResumeAll ends the service-wide pause of [Runner.PauseAll] (saved in
// the store as PauseAll's is): the slots that come from then on are
// called. The slots skipped meanwhile are not called. Resuming a runner
// that is not paused is no error.
//
// The change is authorized and audited ([ActionResumeAll]) as [Runner.Add]'s.
func (r *Runner) ResumeAll(ctx context.Context) (PauseState, error) {
	a, err := r.authorize(ctx, ActionResumeAll, "")
	if err != nil {
		return PauseState{}, err
	}
	return PauseState{}, r.changeService(ctx, a, ActionResumeAll, PauseState{})
}

// setService saves p and makes it the runner's pause, and wakes the
// pause timer, which ends a pause with an until at that time.
func (r *Runner) setService(ctx context.Context, p PauseState) error {
	r.pmu.Lock()
	defer r.pmu.Unlock()
	if ps := r.pauseStore(); ps != nil {
		if err := ps.SavePause(ctx, p); err != nil {
			return fmt.Errorf("cron: save the service pause: %w", err)
		}
	}
	r.svc.Store(&p)
	select {
	case r.pauseWake <- struct{}{}:
	default:
	}
	return nil
}

// Paused returns the service-wide pause in effect now (see
// [Runner.PauseAll]): the zero PauseState when there is none, or when
// its Until has passed. Over a [SharedStore], a pause set through another
// runner shows within [Config.PauseRefresh].
func (r *Runner) Paused() PauseState {
	p := r.svc.Load()
	if p == nil || !p.Active(r.now()) {
		return PauseState{}
	}
	return *p
}

// servicePaused reports whether the service pause covers a slot due at
// due (Unix ns).
func (r *Runner) servicePaused(due int64) bool {
	p := r.svc.Load()
	return p != nil && p.Paused && (p.Until.IsZero() || due < p.Until.UnixNano())
}

// pausedSpan returns the part [from, to] (Unix ns) of the slots from due
// to now that the service pause covers: from its start (Since; a pause
// that does not know its start covers them all) to now, or to its end
// when it ended before now. ok is false when it covers none of them.
func (r *Runner) pausedSpan(due, now int64) (from, to int64, ok bool) {
	p := r.svc.Load()
	if p == nil || !p.Paused {
		return 0, 0, false
	}
	from, to = due, now
	if !p.Since.IsZero() {
		from = max(due, p.Since.UnixNano())
	}
	if !p.Until.IsZero() {
		to = min(now, p.Until.UnixNano()-1)
	}
	return from, to, from <= to
}

// skipPaused records in e that its slot due, seen at now, is skipped
// because the service is paused. The slots of one pause are gathered into
// one record of reason [ReasonServicePaused] (see [Run.Slots]), handed to
// the recorder at the job's first slot called after the pause, or when
// another reason of skipping comes first. mu is held.
func (r *Runner) skipPaused(e *entry, due, now int64) {
	if e.enabled { // a paused job's last_status stays paused
		e.status = statusID(StatusSkipped)
		e.setLastErr(ServicePausedError)
	}
	r.markDirty(e)
	t := fromNano(now)
	r.gatherSkip(e, Run{JobID: e.id, ScheduledAt: fromNano(due), TriggeredAt: t, FinishedAt: t, Status: StatusSkipped,
		Error: ServicePausedError, Reason: ReasonServicePaused})
}

// loadPause reads the service pause from the store, when it keeps one.
func (r *Runner) loadPause(ctx context.Context) error {
	ps := r.pauseStore()
	if ps == nil {
		return nil
	}
	// The read is under pmu, as changeService's write: a read that a
	// change overtook would put the state before it back.
	r.pmu.Lock()
	p, err := ps.LoadPause(ctx)
	if err != nil {
		r.pmu.Unlock()
		return fmt.Errorf("cron: load the service pause: %w", err)
	}
	old := r.svc.Load()
	r.svc.Store(&p)
	r.pmu.Unlock()
	if old == nil || old.Paused != p.Paused || !old.Until.Equal(p.Until) {
		if p.Paused {
			r.log.Info("cron: the service is paused", "until", p.Until, "reason", p.Reason)
		} else if old != nil {
			r.log.Info("cron: the service is resumed")
		}
	}
	return nil
}

// Pause disables job id: enabled=false, paused_at now (see
// [Job.PausedAt]; kept when the job was paused already), last_status
// paused, next_run_at unset, out of the heap. A run in flight finishes.
// An unknown id is [ErrNotFound].
//
// A zero until pauses the job until [Runner.Resume] (paused_until
// cleared). Otherwise the job is paused until that time (stored as its
// paused_until): then the runner that fires the job resumes it by
// itself, as Resume does, also after a restart, and over a [SharedStore]
// whichever runner holds the job at that time (the resume is a write of
// the job like any other). A non-zero until must lie in the future: a
// *[ValidationError] naming "until" otherwise. Pausing a paused job
// again sets its new paused_until (or clears it, with a zero until).
//
// The change is authorized and audited ([ActionPause]) as [Runner.Add]'s.
func (r *Runner) Pause(ctx context.Context, id string, until time.Time) (Job, error) {
	if until.IsZero() {
		return r.pauseJob(ctx, ActionPause, id, true, time.Time{})
	}
	if _, err := r.authorize(ctx, ActionPause, id); err != nil {
		return Job{}, err
	}
	if now := r.now(); !until.After(now) {
		return Job{}, invalid("until", "must be in the future, got %s (now %s)", until.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if !inNanoRange(until) {
		return Job{}, invalid("until", "must be before the year 2262, got %s", until.UTC().Format(time.RFC3339))
	}
	return r.pauseJob(ctx, ActionPause, id, true, until.UTC())
}

// pauseJob makes the pause (paused, until zero for no end) or the resume
// of job id for the actor of ctx, and audits it as act.
func (r *Runner) pauseJob(ctx context.Context, act Action, id string, paused bool, until time.Time) (Job, error) {
	a, err := r.authorize(ctx, act, id)
	if err != nil {
		return Job{}, err
	}
	if !r.auditOn() {
		j, _, err := r.setPause(ctx, id, paused, until, 0)
		return j, err
	}
	before, berr := r.Get(ctx, id)
	j, _, err := r.setPause(ctx, id, paused, until, 0)
	if err != nil {
		return Job{}, err
	}
	c := changeOf(a, act, id, before, j)
	if berr != nil {
		c.before = nil
	}
	r.audit(ctx, c)
	return j, nil
}

// Resume enables job id, clears its paused_until and schedules its next
// slot after now (a once job whose run_at has passed is marked missed
// instead), and clears its failures in a row and last alert (see
// [AlertConfig]). The slots passed since its paused_at are recorded as
// one skipped run of reason [ReasonPaused], and paused_at is cleared:
// whichever runner paused the job, and over a [SharedStore] whether or
// not this runner holds it. An unknown id is [ErrNotFound].
//
// The change is authorized and audited ([ActionResume]) as [Runner.Add]'s.
func (r *Runner) Resume(ctx context.Context, id string) (Job, error) {
	return r.pauseJob(ctx, ActionResume, id, false, time.Time{})
}

// setPause pauses (until, zero for no end) or resumes job id. timed, when
// not 0, makes it the resume of a timed pause that ended: done only when
// the runner holds and fires the job and the job is still paused until
// timed (Unix ns); done reports whether it was.
func (r *Runner) setPause(ctx context.Context, id string, paused bool, until time.Time, timed int64) (_ Job, done bool, _ error) {
	nowNs := toNano(r.now())
	untilNs := toNano(until)
	defer r.lockJob(id)()
	var prev Status // the last_status of a resumed job
	if !paused {
		prev = r.statusBeforePause(ctx, id)
	}
	r.mu.Lock()
	idx, e, ok := r.lookup(id)
	if timed != 0 && (!ok || e.enabled || e.pausedUntil() != timed || !r.mine(id)) {
		r.mu.Unlock()
		return Job{}, false, nil
	}
	if timed != 0 {
		// Another runner may have resumed the job, or paused it again,
		// in a write this runner has not seen yet: resume only a job
		// still stored paused until timed, so that the pause is ended,
		// and recorded, once.
		r.mu.Unlock()
		sj, _, err := r.readStored(ctx, id)
		if errors.Is(err, ErrNotFound) || (err == nil && (!sj.Paused || toNano(sj.PausedUntil) != timed)) {
			return Job{}, false, nil
		}
		if err != nil {
			return Job{}, false, err
		}
		r.mu.Lock()
		if idx, e, ok = r.lookup(id); !ok || e.enabled || e.pausedUntil() != timed {
			r.mu.Unlock()
			return Job{}, false, nil
		}
	}
	// stored pauses or resumes the job as stored, for a job this runner
	// does not hold, or holds at a version another runner's write has
	// passed (see [SharedStore.Write]).
	stored := func() (Job, bool, error) {
		j, _, err := r.readStored(ctx, id)
		if err != nil || (j.Paused == paused && j.PausedUntil.Equal(until)) {
			return j, false, err
		}
		changed := false
		j, err = r.updateStored(ctx, id, func(j *Job) error {
			changed = j.Paused != paused || !j.PausedUntil.Equal(until)
			if !changed {
				return nil // another runner did it first
			}
			if j.Paused && !paused {
				j.Failures, j.LastAlert = 0, "" // a new episode of its health
			}
			j.Paused, j.PausedUntil = paused, until
			return nil
		}, true)
		return j, err == nil && changed, err
	}
	if !ok {
		r.mu.Unlock()
		return stored()
	}
	was := e.enabled
	if was == !paused && e.pausedUntil() == untilNs {
		j := e.job(true)
		r.mu.Unlock()
		return j, false, nil
	}
	j := e.job(false)
	held := r.vers.get(idx)
	c := entry{kind: e.kind, start: e.start, interval: e.interval, cad: e.cad, id: e.id, last: e.last, next: e.next, status: e.status, enabled: !paused}
	r.mu.Unlock()
	if was != c.enabled {
		r.reschedulePlan(&c, was, nowNs)
		resumedStatus(&c, was, prev)
	}
	j.Paused, j.PausedUntil, j.NextRunAt, j.LastStatus = paused, until, fromNano(c.next), statusNames[c.status]
	pausedAt := toNano(j.PausedAt) // kept by a paused job paused again
	if !paused {
		pausedAt = 0
	} else if was {
		// A slot taken ahead of its time still runs: the pause starts
		// after it.
		r.mu.Lock()
		pausedAt = r.pauseStart(e, nowNs, nowNs)
		r.mu.Unlock()
	}
	j.PausedAt = fromNano(pausedAt)
	if was != c.enabled && c.enabled {
		// A resumed job starts a new episode of its health: its next
		// failure alerts failing again.
		j.Failures, j.LastAlert = 0, ""
	}
	ver, err := r.save(ctx, j, held)
	if errors.Is(err, ErrConflict) {
		if timed != 0 {
			return Job{}, false, nil // another runner resumed it, or paused it again
		}
		// Another runner wrote the job since this one read it: the
		// watcher brings that write here; the pause applies to it.
		return stored()
	}
	if err != nil {
		return Job{}, false, err
	}
	r.mu.Lock()
	r.vers.set(idx, ver)
	again := false
	if was && paused && r.lead > 0 {
		// The timer may have taken a slot ahead of its time while the
		// pause was saved: that slot runs, and the pause starts after
		// it, in the store too.
		if p := r.pauseStart(e, pausedAt, toNano(r.now())); p != pausedAt {
			pausedAt, again = p, true
		}
	}
	e.enabled, e.next, e.status = c.enabled, c.next, c.status
	e.setPausedUntil(untilNs)
	from := e.pausedAt()
	e.setPausedAt(pausedAt)
	if e.enabled {
		if !was {
			e.setHealth(health{})
		}
		r.schedule(idx, e, e.next)
		r.endPause(e, from, nowNs, nowNs)
	} else {
		r.unschedule(e)
	}
	r.markDirty(e)
	r.notePause(e)
	out := e.job(true)
	r.mu.Unlock()
	if again {
		if ver, err := r.save(ctx, out, ver); err != nil {
			r.log.Warn("cron: saving the start of a pause after a slot taken ahead failed; a resume by another runner may count that slot again",
				"job_id", id, "paused_at", out.PausedAt, "error", err)
		} else {
			r.mu.Lock()
			r.vers.set(idx, ver)
			r.markDirty(e)
			r.mu.Unlock()
		}
	}
	return out, true, nil
}

// statusBeforePause returns what job id's last_status becomes when it is
// resumed: the status of the newest run in its history that is not the
// record of a pause, or "" when the history holds none (or cannot be
// read: the resume does not wait on it).
func (r *Runner) statusBeforePause(ctx context.Context, id string) Status {
	const look = 8
	runs, _ := r.sh.Runs(ctx, id, look)
	for i := range runs {
		if runs[i].Reason != ReasonPaused {
			return runs[i].Status
		}
	}
	return ""
}

// resumedStatus sets the last_status of c, enabled from was (disabled),
// to prev when it says paused: a resumed job shows what happened last.
func resumedStatus(c *entry, was bool, prev Status) {
	if !was && c.enabled && statusNames[c.status] == StatusPaused {
		c.status = statusID(prev)
	}
}

// nextPausedAt returns the paused_at (Unix ns) of the job old becomes as
// c at now: now for a job that goes from running to paused, old's for a
// job that stays paused, 0 for a job that runs.
func nextPausedAt(old, c *entry, now int64) int64 {
	switch {
	case c.enabled:
		return 0
	case old.enabled:
		return now
	}
	return old.pausedAt()
}

// pauseStart returns where the pause of e, paused at from (Unix ns) and
// seen by this runner at now, starts for its record: after the slots of e
// this runner already took (e.next is the first it has not), up to now
// and ClaimAhead beyond, for those are called all the same (a slot
// claimed ahead of its time over a shared store runs when its time
// comes). It is from when there are none. mu is held.
func (r *Runner) pauseStart(e *entry, from, now int64) int64 {
	if from == 0 || e.next == 0 {
		return from
	}
	s := e.schedule()
	for range 1000 {
		n := toNano(s.Next(fromNano(from)))
		if n == 0 || n >= e.next || n > now+r.lead {
			break
		}
		from = n
	}
	return from
}

// notePause hands the pause timer the paused_until of e, when it has
// one. mu is held.
func (r *Runner) notePause(e *entry) {
	t := e.pausedUntil()
	if t == 0 || e.enabled {
		return
	}
	if r.untils == nil {
		r.untils = make(map[string]int64)
	}
	r.untils[e.id] = t
	select {
	case r.pauseWake <- struct{}{}:
	default:
	}
}

// pauseRetry is how long the pause timer waits before it tries again a
// resume whose write failed.
const pauseRetry = time.Second

// pauseLoop is the pause timer: it resumes each held job whose
// paused_until has come, and over a [SharedStore] that keeps the service
// pause it reads that pause every PauseRefresh, until ctx ends.
func (r *Runner) pauseLoop(ctx context.Context) {
	refresh := time.Duration(0)
	if r.pauseStore() != nil {
		refresh = r.cfg.PauseRefresh
	}
	var nextRefresh time.Time
	if refresh > 0 {
		nextRefresh = r.now().Add(refresh)
	}
	timer := time.NewTimer(maxPauseWait)
	defer timer.Stop()
	retry := map[string]int64{} // id -> not before (Unix ns)
	for {
		now := r.now()
		if refresh > 0 && !now.Before(nextRefresh) {
			rctx, cancel := context.WithTimeout(ctx, storeTimeout)
			if err := r.loadPause(rctx); err != nil && ctx.Err() == nil {
				r.log.Warn("cron: reading the service pause failed; keeping the last one read", "error", err)
			}
			cancel()
			nextRefresh = r.now().Add(refresh)
		}
		nowNs := toNano(r.now())
		var due []string
		var dueAt []int64
		wait := maxPauseWait
		r.mu.Lock()
		for id, t := range r.untils {
			at := max(t, retry[id])
			if at <= nowNs {
				due = append(due, id)
				dueAt = append(dueAt, t)
				delete(r.untils, id)
				continue
			}
			wait = min(wait, time.Duration(at-nowNs))
		}
		r.mu.Unlock()
		for i, id := range due {
			resumed, done, err := r.setPause(ctx, id, false, time.Time{}, dueAt[i])
			switch {
			case err != nil && ctx.Err() == nil:
				r.log.Warn("cron: resuming a job whose pause ended failed; trying again", "job_id", id, "paused_until", fromNano(dueAt[i]), "error", err)
				retry[id] = nowNs + int64(pauseRetry)
				r.mu.Lock()
				if _, e, ok := r.lookup(id); ok {
					r.notePause(e)
				}
				r.mu.Unlock()
				wait = min(wait, pauseRetry)
			case done:
				delete(retry, id)
				if r.auditOn() {
					r.audit(ctx, change{actor: ActorRunner, action: ActionResume, jobID: id, after: resumed})
				}
				r.log.Info("cron: job resumed: its pause ended", "job_id", id, "paused_until", fromNano(dueAt[i]))
			default:
				delete(retry, id)
			}
		}
		wait = min(wait, r.endServicePause(ctx))
		if refresh > 0 {
			wait = min(wait, max(nextRefresh.Sub(r.now()), 0))
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-r.pauseWake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
	}
}

// endServicePause ends the service pause whose until has passed: it
// clears the pause in the store and audits the resume as the runner's
// own ([ActorRunner], [ActionResumeAll]). Over a [SharedStore] the runner
// that holds the partition of the empty id does it, once, after reading
// the store again. It returns how long the pause timer may sleep.
func (r *Runner) endServicePause(ctx context.Context) time.Duration {
	p := r.svc.Load()
	if p == nil || !p.Paused || p.Until.IsZero() {
		return maxPauseWait
	}
	if wait := p.Until.Sub(r.now()); wait > 0 {
		return wait
	}
	if !r.mine("") {
		return maxPauseWait // its holder records the end; the refresh reads it
	}
	rctx, cancel := context.WithTimeout(ctx, storeTimeout)
	err := r.loadPause(rctx)
	cancel()
	if err != nil {
		return pauseRetry
	}
	if q := r.svc.Load(); !q.Paused || !q.Until.Equal(p.Until) || !q.Since.Equal(p.Since) {
		return 0 // changed meanwhile: look again
	}
	if err := r.changeService(ctx, ActorRunner, ActionResumeAll, PauseState{}); err != nil {
		if ctx.Err() == nil {
			r.log.Warn("cron: ending the service pause whose time came failed; trying again", "error", err)
		}
		return pauseRetry
	}
	r.log.Info("cron: the service is resumed: its pause ended", "paused_until", p.Until)
	return maxPauseWait
}

// maxPauseWait bounds the sleep of the pause timer.
const maxPauseWait = time.Hour
