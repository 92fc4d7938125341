package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ksana-dev/ksana/affinity"
	"github.com/ksana-dev/ksana/fsm"
)

// A job's lifecycle: a request becomes a job, the job is dispatched,
// moved by its node's events, taken off a node, and finished.

// turnLock serializes the dispatch of one turn's jobs on this instance, so
// that a turn's second job selects only after its first wrote the
// affinity. A session's turn is dispatched by the instance the session is
// connected to.
type turnLock struct {
	mu   sync.Mutex
	refs int
}

func (d *Dispatcher) lockTurn(turn string) func() {
	if turn == "" {
		return func() {}
	}
	d.turnMu.Lock()
	l := d.turns[turn]
	if l == nil {
		l = &turnLock{}
		d.turns[turn] = l
	}
	l.refs++
	d.turnMu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		d.turnMu.Lock()
		if l.refs--; l.refs == 0 {
			delete(d.turns, turn)
		}
		d.turnMu.Unlock()
	}
}

// CheckRequest validates a request; the error is a [*MessageError] naming
// the field.
func CheckRequest(r Request) error {
	if err := CheckID("request_id", r.RequestID); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"turn_id", r.TurnID}, {"pool", r.Pool}, {"model", r.Model}} {
		if err := checkOptID(f.name, f.v); err != nil {
			return err
		}
	}
	if r.Reason != "" {
		if _, err := affinity.ParseReason(r.Reason); err != nil {
			return msgErr("reason", "%q (manual|timeout|max_duration)", r.Reason)
		}
	}
	if len(r.Payload) > MaxPayload {
		return msgErr("payload", "%d bytes, more than %d", len(r.Payload), MaxPayload)
	}
	return nil
}

// Submit makes the job of a request from an attached session and
// dispatches it; the answer (job_result or job_failed) comes later through
// the session's [SessionConn], exactly once per request and session. It
// returns the job's id. A request id seen before (on any instance) makes
// no new job: the session is added to the job's waiters, or, when the job
// is over, answered at once. Such a duplicate that keeps a turn going
// returns once the turn has its node (at most Dispatch.QueueTimeout later), so
// that the session's next request of the turn finds the affinity.
//
// A job that no node can take now waits in its pool's queue on this
// instance (see the package documentation, "Overload"). A new request
// whose pool has Dispatch.QueueLimit jobs waiting here is refused: the
// session gets job_failed with [FailQueueFull] before Submit returns,
// and nothing is stored.
func (d *Dispatcher) Submit(ctx context.Context, sessionID string, req Request) (string, error) {
	if err := CheckRequest(req); err != nil {
		return "", err
	}
	jobID := JobIDFor(req.RequestID)
	now := time.Now()
	d.mu.Lock()
	switch {
	case d.stopped:
		d.mu.Unlock()
		return "", ErrStopped
	case d.sessions[sessionID] == nil:
		d.mu.Unlock()
		return "", fmt.Errorf("session %q: %w", sessionID, ErrNotAttached)
	}
	d.pending[pendingKey{sessionID, jobID}] = pendingReq{requestID: req.RequestID, deadline: now.Add(d.dc.RequestTimeout)}
	d.mu.Unlock()
	admitted, behind, admitDone := d.admit(req.Pool, req.Model)
	if !admitted {
		// The pool's queue is full. A request whose job exists (a
		// duplicate) adds no load and joins its job; a new one is refused.
		_, err := d.st.Jobs.Job(ctx, jobID)
		switch {
		case errors.Is(err, ErrJobNotFound):
			d.refuse(ctx, sessionID, jobID, req, d.dc.QueueLimit)
			return jobID, nil
		case err != nil:
			return "", d.submitFailed(sessionID, jobID, err)
		}
		behind, admitDone = true, func() {}
	}
	defer admitDone()
	spec := JobSpec{
		RequestID: req.RequestID, SessionID: sessionID, TurnID: req.TurnID, Pool: req.Pool,
		Model: req.Model, Reason: req.Reason, Payload: req.Payload, Instance: d.id,
	}
	// The job is placed before it is opened, so that opening it
	// dispatches it in the same step.
	unlock := d.lockTurn(spec.TurnID)
	// Open stores the job's deadline with it (JobStore.Open), so that
	// whatever stops this call from here on, a sweeper finds the job and
	// carries it on. A store that opens the job with its node's slot
	// (SlotOpener) does so in the step that takes the slot.
	due := now.Add(min(d.dc.AckTimeout, d.dc.RunTimeout))
	if behind {
		// Jobs of its pool and model wait here already: it waits behind
		// them, without a selection that would find no free slot.
		due = d.queueDue(now)
	}
	var (
		rec     JobRecord
		entry   BookEntry
		created bool
		opened  bool
		reserve = d.st.Reservations.Reserve
	)
	if so, ok := d.st.Jobs.(SlotOpener); ok {
		reserve = func(ctx context.Context, node, _ string, capacity int, ttl time.Duration) error {
			var err error
			rec, entry, created, err = so.OpenOnSlot(ctx, jobID, spec, node, capacity, ttl, due)
			opened = err == nil
			return err
		}
	}
	var node string
	if !behind {
		var err error
		if node, err = d.place(ctx, jobID, spec, nil, reserve, false); err != nil {
			d.log.Warn("scheduler: place job", "job_id", jobID, "err", err)
			node = "" // opened to wait
		}
		if node == "" {
			due = d.queueDue(now)
		}
	}
	var err error
	if !opened {
		rec, entry, created, err = d.st.Jobs.Open(ctx, jobID, spec, node, due)
		// The slot is given back unless the job is ours, or already runs on
		// that node (whose slot the reservation renewed).
		if node != "" && (err != nil || (!created && !(rec.NodeID == node && rec.State.Active()))) {
			d.st.Reservations.Release(ctx, node, jobID)
		}
	}
	if err != nil {
		unlock()
		return "", d.submitFailed(sessionID, jobID, err)
	}
	if !created {
		unlock()
		admitDone()
		out, done, err := d.st.Jobs.Watch(ctx, jobID, sessionID)
		if err != nil {
			return "", d.submitFailed(sessionID, jobID, err)
		}
		if done {
			d.deliver(ctx, sessionID, answerOf(jobID, entry.Spec, sessionID, out))
			return jobID, nil
		}
		if entry.Spec.Instance != d.id {
			d.mu.Lock()
			if p, ok := d.pending[pendingKey{sessionID, jobID}]; ok {
				p.moved = true
				d.pending[pendingKey{sessionID, jobID}] = p
			}
			d.mu.Unlock()
		}
		d.awaitTurnNode(ctx, req, jobID)
		return jobID, nil
	}
	d.enter(fsm.Created)
	if node == "" {
		// No node can take it now: it waits in its pool's queue here, and
		// Open gave it the queue's deadline.
		unlock()
		d.hold(rec, entry)
		return jobID, nil
	}
	d.enter(fsm.Dispatched)
	if err := d.dispatched(ctx, rec, spec, unlock); err != nil {
		d.log.Warn("scheduler: dispatch", "job_id", jobID, "err", err)
	}
	return jobID, nil
}

// awaitTurnNode holds a duplicate request that keeps its turn going until
// the turn has its node. The instance that made the job writes the turn's
// affinity before its Submit returns, but a duplicate (the same request id
// sent to another instance first) returns while that instance may still be
// choosing; the session's next request of the turn would then choose
// without the affinity. It waits until the affinity is written, or
// Dispatch.QueueTimeout passed, or the job has been out of CREATED for
// turnWriteGrace without an affinity (the instance that dispatched it
// writes the affinity right after the job leaves CREATED; a job that
// failed, or whose write failed, never gets one).
func (d *Dispatcher) awaitTurnNode(ctx context.Context, req Request, jobID string) {
	if req.TurnID == "" {
		return
	}
	if ends, _ := affinity.EndsTurn(affinity.Reason(req.Reason)); ends {
		return
	}
	deadline := time.Now().Add(d.dc.QueueTimeout)
	var leftCreated time.Time
	pause := time.Millisecond
	for {
		if node, err := d.st.Turns.TurnAffinity(ctx, req.TurnID); err != nil || node != "" {
			return
		}
		if rec, err := d.st.Jobs.Job(ctx, jobID); err == nil && rec.State != fsm.Created {
			if leftCreated.IsZero() {
				leftCreated = time.Now()
			} else if time.Since(leftCreated) >= turnWriteGrace {
				return
			}
		}
		if time.Now().After(deadline) {
			return
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, 20*time.Millisecond)
	}
}

// turnWriteGrace is how long a duplicate waits for a turn's affinity once
// the turn's job left CREATED: the dispatching instance writes it right
// after, one round trip later.
const turnWriteGrace = time.Second

func (d *Dispatcher) submitFailed(sessionID, jobID string, err error) error {
	d.mu.Lock()
	delete(d.pending, pendingKey{sessionID, jobID})
	d.mu.Unlock()
	return fmt.Errorf("scheduler: submit job %s: %w", jobID, err)
}

func (d *Dispatcher) enter(s fsm.State) {
	if d.hooks.JobState != nil {
		d.hooks.JobState(s)
	}
}

func (d *Dispatcher) reserveTTL() time.Duration {
	return d.dc.AckTimeout + d.dc.RunTimeout + d.dc.Lease
}

// dispatch sends a job in CREATED to a node; a job that finds none waits
// in its pool's queue here, or fails with no_node once it waited
// QueueTimeout.
func (d *Dispatcher) dispatch(ctx context.Context, rec JobRecord, entry BookEntry) error {
	done, err := d.tryDispatch(ctx, rec, entry, false)
	switch {
	case err != nil || done:
		return err
	case time.Since(rec.WaitingSince()) >= d.dc.QueueTimeout:
		d.unqueue(map[string]bool{rec.ID: true})
		return d.failNoNode(ctx, rec, entry.Spec)
	}
	return d.wait(ctx, rec, entry)
}

// tryDispatch sends a job in CREATED to a node: select, reserve, record
// the dispatch, write or clear the turn's affinity, send job_assign. done
// is false when no node could take the job; true when it went to a node,
// or another instance had moved it first. skipFull leaves out the nodes
// this instance believes full (see place).
func (d *Dispatcher) tryDispatch(ctx context.Context, rec JobRecord, entry BookEntry, skipFull bool) (done bool, err error) {
	spec := entry.Spec
	unlock := d.lockTurn(spec.TurnID)
	locked := true
	defer func() {
		if locked {
			unlock()
		}
	}()
	node, err := d.place(ctx, rec.ID, spec, entry.Tried, d.st.Reservations.Reserve, skipFull)
	if err != nil || node == "" {
		return false, err
	}
	tr, err := d.st.Jobs.ApplyJob(ctx, rec.ID, fsm.Dispatch, rec.Attempt, node)
	if err != nil || tr.Duplicate {
		// Another instance moved the job first.
		d.st.Reservations.Release(ctx, node, rec.ID)
		var te *fsm.TransitionError
		if err == nil || errors.As(err, &te) || errors.Is(err, ErrJobNotFound) {
			return true, nil
		}
		return false, err
	}
	d.enter(fsm.Dispatched)
	if err := d.st.Due.Set(ctx, rec.ID, time.Now().Add(min(d.dc.AckTimeout, d.dc.RunTimeout))); err != nil {
		d.log.Warn("scheduler: set deadline", "job_id", rec.ID, "err", err)
	}
	locked = false
	return true, d.dispatched(ctx, tr.Job, spec, unlock)
}

// place selects a node for a job and reserves one of its slots there
// with reserve (which refuses a full node with [ErrNodeFull]), writing
// the turn's affinity when this is the turn's first node. It
// returns the node, or "" when no node can take the job now. Nodes
// refused in this round (storm-marked, full) stay out; the nodes of
// earlier attempts (tried) are passed over while another node can take
// the job, and tried again when none can. With skipFull, the nodes this
// instance believes full (their jobs as this instance last knew them, at
// their capacity) are left out from the start: no reservation is tried
// on them, so a belief gone stale costs a job a wait, never a slot. The
// caller holds the turn's lock.
func (d *Dispatcher) place(ctx context.Context, jobID string, spec JobSpec, triedNodes []string, reserve func(ctx context.Context, nodeID, jobID string, capacity int, ttl time.Duration) error, skipFull bool) (string, error) {
	skip := map[string]bool{}
	if skipFull {
		d.believedFull(spec, skip)
	}
	tried := map[string]bool{}
	for _, n := range triedNodes {
		tried[n] = true
	}
	turnNode := ""
	if spec.TurnID != "" {
		var err error
		if turnNode, err = d.st.Turns.TurnAffinity(ctx, spec.TurnID); err != nil {
			return "", err
		}
	}
	for {
		dec, cands, ok := d.choose(spec, skip, tried, turnNode)
		if !ok {
			if d.hooks.SelectionMiss != nil {
				d.hooks.SelectionMiss(spec.Pool, spec.Model)
			}
			return "", nil
		}
		node := dec.NodeID
		if spec.Model != "" {
			off, err := d.st.Storm.Unavailable(ctx, node, spec.Model)
			if err != nil {
				return "", err
			}
			if off {
				skip[node] = true
				continue
			}
		}
		if spec.TurnID != "" && !dec.Affinity {
			// The turn's first node is written before the job moves, and the
			// first write wins: two jobs of one turn dispatched at once, here
			// and on another instance, both follow the node written first,
			// unless the job was tried there already.
			if ends, _ := affinity.EndsTurn(affinity.Reason(spec.Reason)); !ends {
				aff, wrote, err := d.st.Turns.SetTurnAffinity(ctx, spec.SessionID, spec.TurnID, node)
				switch {
				case err != nil:
					d.log.Warn("scheduler: turn affinity", "turn_id", spec.TurnID, "err", err)
				case !wrote && aff != "" && aff != node && !tried[aff] && !skip[aff] && inSorted(cands, aff):
					node = aff
				}
			}
		}
		if err := reserve(ctx, node, jobID, d.capacity(node, d.dc.DefaultCapacity), d.reserveTTL()); err != nil {
			if errors.Is(err, ErrNodeFull) {
				skip[node] = true
				continue
			}
			return "", err
		}
		return node, nil
	}
}

// dispatched follows a job's move to its node: a finalize clears the
// turn's affinity (written before the move), the turn's lock is released
// (unlock), and job_assign goes to the node.
func (d *Dispatcher) dispatched(ctx context.Context, rec JobRecord, spec JobSpec, unlock func()) error {
	if spec.TurnID != "" {
		if ends, _ := affinity.EndsTurn(affinity.Reason(spec.Reason)); ends {
			if err := d.st.Turns.ClearTurnAffinity(ctx, spec.TurnID); err != nil {
				d.log.Warn("scheduler: turn affinity", "turn_id", spec.TurnID, "err", err)
			}
		}
	}
	unlock() // toNode may fail the job over, which dispatches again
	assign := Envelope{
		Type: TypeJobAssign, JobID: rec.ID, Attempt: rec.Attempt, NodeID: rec.NodeID, SessionID: spec.SessionID,
		RequestID: spec.RequestID, TurnID: spec.TurnID, Pool: spec.Pool, Model: spec.Model,
		Reason: spec.Reason, Payload: spec.Payload,
	}
	return d.toNode(ctx, assign)
}

// endAttempt ends a job's current attempt on its node with a timeout or
// failover, frees the node's slot, tells the node, and sends the job on
// (or fails it once its attempts are used up).
func (d *Dispatcher) endAttempt(ctx context.Context, rec JobRecord, ev fsm.Event, why string) error {
	// Should this attempt be the job's last, the step fails the job and
	// stores this outcome with it.
	out := Outcome{Status: OutcomeFailed, Attempt: rec.Attempt, Error: FailAttempts + ": the job failed on " + fmt.Sprint(rec.Attempt) + " nodes"}
	tr, entry, err := d.st.Jobs.Finish(ctx, rec.ID, ev, rec.Attempt, rec.NodeID, out)
	if err != nil {
		var te *fsm.TransitionError
		if errors.As(err, &te) || errors.Is(err, ErrWrongNode) {
			return nil // someone else ended it first
		}
		return err
	}
	if tr.Duplicate {
		return nil
	}
	d.log.Info("scheduler: job taken off its node", "job_id", rec.ID, "node_id", rec.NodeID, "attempt", rec.Attempt, "reason", why, "state", tr.Job.State)
	if d.hooks.Failover != nil {
		d.hooks.Failover(rec.ID, why)
	}
	if tr.FreeNode != "" {
		if _, err := d.st.Reservations.Release(ctx, tr.FreeNode, rec.ID); err != nil {
			d.log.Warn("scheduler: release", "job_id", rec.ID, "node_id", tr.FreeNode, "err", err)
		}
		d.toNode(ctx, Envelope{Type: TypeJobCancel, JobID: rec.ID, Attempt: rec.Attempt, NodeID: tr.FreeNode, Reason: why})
		d.wakeSweeper()
		d.wakeQueues()
	}
	d.enter(tr.Job.State)
	if tr.Job.State == fsm.Failed {
		return d.finishStored(ctx, tr.Job, entry)
	}
	return d.settleRecord(ctx, tr.Job, false)
}

// fail ends a job in CREATED that no node could take.
func (d *Dispatcher) fail(ctx context.Context, rec JobRecord, code, detail string) error {
	tr, entry, err := d.st.Jobs.Finish(ctx, rec.ID, fsm.Fail, rec.Attempt, "", Outcome{Status: OutcomeFailed, Attempt: rec.Attempt, Error: code + ": " + detail})
	if err != nil {
		var te *fsm.TransitionError
		if errors.As(err, &te) {
			return nil
		}
		return err
	}
	if !tr.Duplicate {
		d.enter(fsm.Failed)
		if d.hooks.Shed != nil {
			d.hooks.Shed(entry.Spec.Pool, code)
		}
	}
	return d.finishStored(ctx, tr.Job, entry)
}

// finishStored ends a job in FINISHED or FAILED, whose outcome the step
// that ended it stored: it answers the job's waiters and leaves the job to
// the release loop (woken at once), which frees its node's slot, releases
// it and takes its deadline out of the index together with the others that
// ended meanwhile. Each step is idempotent, so a sweeper may run it again after
// a crash (the sessions' instances drop an answer given twice).
func (d *Dispatcher) finishStored(ctx context.Context, rec JobRecord, entry BookEntry) error {
	if entry.Outcome == nil {
		return fmt.Errorf("scheduler: job %s is %s without an outcome: %w", rec.ID, rec.State, ErrJobCorrupt)
	}
	for _, s := range entry.Waiters {
		via := ""
		if s == entry.Spec.SessionID {
			via = entry.Spec.Instance
		}
		d.answer(ctx, s, via, answerOf(rec.ID, entry.Spec, s, *entry.Outcome))
	}
	if rec.NodeID != "" {
		d.untrack(rec.NodeID, rec.ID)
	}
	d.mu.Lock()
	d.over = append(d.over, overJob{JobAttempt{rec.ID, rec.Attempt}, rec.State == fsm.Finished, rec.NodeID})
	d.mu.Unlock()
	d.wakeRelease()
	return nil
}

func answerOf(jobID string, spec JobSpec, sessionID string, out Outcome) Envelope {
	m := Envelope{
		Type: TypeJobResult, JobID: jobID, Attempt: out.Attempt, NodeID: out.NodeID, SessionID: sessionID,
		RequestID: spec.RequestID, TurnID: spec.TurnID, Payload: out.Payload,
	}
	if out.Status == OutcomeFailed {
		m.Type, m.Error, m.Payload = TypeJobFailed, out.Error, nil
	}
	return m
}

func (d *Dispatcher) untrack(nodeID, jobID string) {
	d.mu.Lock()
	if n := d.nodes[nodeID]; n != nil {
		delete(n.jobs, jobID)
	}
	d.mu.Unlock()
}

// NodeEvent applies what a node attached here reports: job_ack,
// job_started (or asr_partial), job_result and model_not_available. The
// node id is the connection's, whatever m says. Only the node the job's
// current attempt was dispatched to may move it: an event for another
// node's job is [ErrWrongNode], one of an older attempt a
// [*fsm.TransitionError] wrapping [fsm.ErrStaleAttempt]; both change
// nothing and are counted by Hooks.Rejected.
func (d *Dispatcher) NodeEvent(ctx context.Context, nodeID string, m Envelope) error {
	m.NodeID = nodeID
	if err := m.Validate(); err != nil {
		return err
	}
	var ev fsm.Event
	switch m.Type {
	case TypeJobAck:
		ev = fsm.Ack
	case TypeJobStarted, TypeASRPartial:
		ev = fsm.Start
	case TypeJobResult:
		ev = fsm.Result
	case TypeModelNotAvailable:
		return d.modelNotAvailable(ctx, m)
	default:
		return msgErr("type", "%q is not a node event", m.Type)
	}
	if taken, st := d.progressHere(nodeID, m.JobID, m.Attempt, ev); taken {
		if st != "" {
			d.enter(st)
		}
		return nil
	}
	var (
		tr    JobTransition
		entry BookEntry
		err   error
	)
	if ev == fsm.Result {
		// The outcome is stored in the step that moves the job.
		tr, entry, err = d.st.Jobs.Finish(ctx, m.JobID, ev, m.Attempt, nodeID, Outcome{Status: OutcomeResult, NodeID: nodeID, Attempt: m.Attempt, Payload: m.Payload})
	} else {
		tr, err = d.st.Jobs.ApplyJob(ctx, m.JobID, ev, m.Attempt, nodeID)
	}
	if err != nil {
		return d.rejected(m, err)
	}
	switch ev {
	case fsm.Ack, fsm.Start:
		if tr.Duplicate && m.Type == TypeASRPartial {
			return nil
		}
		if !tr.Duplicate {
			d.enter(tr.Job.State)
		}
		// The step's time in the record is the lease's start: a sweeper
		// that claims the job at its ack deadline finds the lease there
		// (see settleRecord); from here on this instance renews it. An
		// ack that comes after the job's result (a replay, the job over)
		// tracks nothing: the node's count of jobs stays what it runs.
		d.mu.Lock()
		if n := d.nodes[nodeID]; n != nil && tr.Job.State.Active() {
			j := n.jobs[m.JobID]
			if j == nil || j.attempt != m.Attempt {
				j = &localJob{attempt: m.Attempt, assigned: tr.Job.DispatchedAt}
				n.jobs[m.JobID] = j
			}
			j.acked = true
			j.started = j.started || tr.Job.State == fsm.Running
		}
		d.mu.Unlock()
		return nil
	default: // result
		if !tr.Duplicate {
			d.enter(fsm.Finished)
		}
		if tr.Job.State == fsm.Released {
			return nil
		}
		return d.finishStored(ctx, tr.Job, entry)
	}
}

// progressHere takes a node's job_ack or job_started (ev) for a job this
// instance sent to that node in that attempt without a step on the job's
// record: the record gets the furthest progress seen (RUNNING, else
// ACCEPTED) in one step from storeProgress within two ticks, unless the
// job_result's step comes first and makes it moot (the record moves from
// DISPATCHED or ACCEPTED to FINISHED directly). A node that acks, starts
// and answers at once thus costs one step, not three. The lease needs no
// step: this instance renews it from what it saw. It reports whether it
// took the event, and the state the job entered ("" for a replay). An
// event of a job not sent from here, or of another attempt, is left to a
// step on the record, which refuses it or takes it. A job_result makes
// progress not yet written moot (and is left to its step).
func (d *Dispatcher) progressHere(nodeID, jobID string, attempt int, ev fsm.Event) (bool, fsm.State) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var j *localJob
	if n := d.nodes[nodeID]; n != nil {
		j = n.jobs[jobID]
	}
	if j == nil || j.attempt != attempt {
		return false, ""
	}
	var st fsm.State
	switch {
	case ev == fsm.Result:
		j.unstored = false
		return false, ""
	case ev == fsm.Start && !j.started:
		j.acked, j.started, st = true, true, fsm.Running
	case ev == fsm.Ack && !j.acked:
		j.acked, st = true, fsm.Accepted
	default:
		return true, "" // a replay: the job is past it
	}
	if !j.unstored {
		j.unstored = true
		d.progress[0] = append(d.progress[0], progressKey{nodeID, jobID, attempt, ""})
	}
	return true, st
}

// progressTick is the pace of storeProgress: a progress is written one to
// two ticks after it was seen, well within the ack timeout that a
// sweeper applies to a record still in DISPATCHED.
func (d *Dispatcher) progressTick() time.Duration {
	return min(max(d.dc.AckTimeout/20, time.Millisecond), 10*time.Millisecond)
}

// storeProgress writes the progress taken by progressHere at the tick
// before the last (or, called twice in a row, all of it): job_started as
// a start step, a job_ack alone as an ack step. Steps refused (the job
// moved on meanwhile) change nothing.
func (d *Dispatcher) storeProgress(ctx context.Context) {
	d.mu.Lock()
	due := d.progress[1]
	d.progress[1], d.progress[0] = d.progress[0], nil
	var steps []progressKey
	for _, k := range due {
		if n := d.nodes[k.node]; n != nil {
			steps = n.unstored(steps, k.job, k.attempt)
		}
	}
	d.mu.Unlock()
	d.writeProgress(ctx, steps)
}

// unstored appends the progress of job (in attempt) not yet written, and
// counts it as written. d.mu is held.
func (n *localNode) unstored(steps []progressKey, job string, attempt int) []progressKey {
	j := n.jobs[job]
	if j == nil || j.attempt != attempt || !j.unstored {
		return steps
	}
	j.unstored = false
	ev := fsm.Ack
	if j.started {
		ev = fsm.Start
	}
	return append(steps, progressKey{n.info.NodeID, job, attempt, ev})
}

// writeProgress writes the progress of each job: job_started as a start
// step, a job_ack alone as an ack step. Steps refused (the job moved on
// meanwhile) change nothing.
func (d *Dispatcher) writeProgress(ctx context.Context, steps []progressKey) {
	for _, s := range steps {
		if _, err := d.st.Jobs.ApplyJob(ctx, s.job, s.ev, s.attempt, s.node); err != nil && Refusal(err) == "" && ctx.Err() == nil {
			d.log.Warn("scheduler: store progress", "job_id", s.job, "node_id", s.node, "event", s.ev, "err", err)
		}
	}
}

func (d *Dispatcher) rejected(m Envelope, err error) error {
	switch why := Refusal(err); why {
	case RefusedWrongNode, RefusedStaleAttempt, RefusedTransition, RefusedJobNotFound:
		if d.hooks.Rejected != nil {
			d.hooks.Rejected(m.Type, why)
		}
	}
	return err
}

// modelNotAvailable reports the node's model to the storm guard and sends
// the job elsewhere.
func (d *Dispatcher) modelNotAvailable(ctx context.Context, m Envelope) error {
	rec, err := d.st.Jobs.Job(ctx, m.JobID)
	if err != nil {
		return d.rejected(m, err)
	}
	if rec.NodeID != m.NodeID {
		return d.rejected(m, fmt.Errorf("job %s: %w", m.JobID, ErrWrongNode))
	}
	if rec.Attempt != m.Attempt {
		return d.rejected(m, &fsm.TransitionError{Job: rec.Job, Event: fsm.Failover, Attempt: m.Attempt, Err: fsm.ErrStaleAttempt})
	}
	model := m.Model
	if model == "" {
		if entry, err := d.st.Jobs.Entry(ctx, m.JobID); err == nil {
			model = entry.Spec.Model
		}
	}
	if model != "" {
		dec, err := d.st.Storm.Report(ctx, m.NodeID, model)
		if err != nil {
			return err
		}
		d.tallyStorm(m.NodeID, model, dec)
		if d.hooks.Storm != nil {
			d.hooks.Storm(m.NodeID, model, dec)
		}
	}
	if !rec.State.Active() {
		return nil
	}
	return d.endAttempt(ctx, rec, fsm.Failover, CancelNodeStorm)
}
