package scheduler

import (
	"context"
	"errors"
	"time"

	"github.com/ksana-dev/ksana/fsm"
	"golang.org/x/sync/errgroup"
)

// The sweeper: jobs whose deadline passed, leases, overdue requests.

// settleRecord carries a job on from its state; claimed means its
// deadline passed.
func (d *Dispatcher) settleRecord(ctx context.Context, rec JobRecord, claimed bool) error {
	switch rec.State {
	case fsm.Created:
		entry, err := d.st.Jobs.Entry(ctx, rec.ID)
		if err != nil {
			return err
		}
		return d.dispatch(ctx, rec, entry)
	case fsm.Dispatched, fsm.Accepted, fsm.Running:
		if !claimed {
			return nil
		}
		// The index holds the job's ack deadline until its node's instance
		// first renews the lease; the lease taken at job_ack (or
		// job_started) runs from the step's time, never past the run
		// timeout of the attempt.
		if rec.State != fsm.Dispatched && !rec.DispatchedAt.IsZero() {
			if until := d.leaseUntil(rec.UpdatedAt, rec.DispatchedAt); until.After(time.Now()) {
				return d.st.Due.Set(ctx, rec.ID, until)
			}
		}
		return d.endAttempt(ctx, rec, fsm.Timeout, CancelTimeout)
	case fsm.Finished, fsm.Failed:
		// The step that ended the job stored its outcome.
		entry, err := d.st.Jobs.Entry(ctx, rec.ID)
		if err != nil {
			return err
		}
		return d.finishStored(ctx, rec, entry)
	default: // Released
		return d.st.Due.Remove(ctx, rec.ID)
	}
}

// settle carries on a job whose deadline passed.
func (d *Dispatcher) settle(ctx context.Context, jobID string) error {
	rec, err := d.st.Jobs.Job(ctx, jobID)
	if errors.Is(err, ErrJobNotFound) {
		// Never opened (Submit stopped between its deadline and Open), or
		// expired: nothing to carry on.
		return d.st.Due.Remove(ctx, jobID)
	}
	if err != nil {
		return err
	}
	return d.settleRecord(ctx, rec, true)
}

// releaseOver frees the slots of the jobs that ended here since the last
// call, releases them and takes their deadlines out of the index: one
// call for each, whatever the number of jobs. A job whose release fails keeps its deadline, so a
// sweeper carries it on.
func (d *Dispatcher) releaseOver(ctx context.Context) {
	d.mu.Lock()
	over := d.over
	d.over = nil
	d.mu.Unlock()
	if len(over) == 0 {
		return
	}
	var rel []JobAttempt
	var slots []Slot
	for _, o := range over {
		if o.release {
			rel = append(rel, o.JobAttempt)
		}
		if o.node != "" {
			slots = append(slots, Slot{o.node, o.ID})
		}
	}
	if len(slots) > 0 {
		if err := d.st.Reservations.ReleaseSlots(ctx, slots); err != nil && ctx.Err() == nil {
			// The slots expire with their reservations' TTL.
			d.log.Warn("scheduler: free slots", "slots", len(slots), "err", err)
		}
		d.wakeQueues()
	}
	failed := map[string]bool{}
	if len(rel) > 0 {
		trs, errs := d.st.Jobs.ReleaseJobs(ctx, rel)
		for i, err := range errs {
			switch {
			case err != nil:
				failed[rel[i].ID] = true
				if ctx.Err() == nil {
					d.log.Warn("scheduler: release job", "job_id", rel[i].ID, "err", err)
				}
			case !trs[i].Duplicate:
				d.enter(fsm.Released)
			}
		}
	}
	ids := make([]string, 0, len(over))
	for _, o := range over {
		if !failed[o.ID] {
			ids = append(ids, o.ID)
		}
	}
	if len(ids) > 0 {
		if err := d.st.Due.Remove(ctx, ids...); err != nil && ctx.Err() == nil {
			d.log.Warn("scheduler: remove deadlines", "jobs", len(ids), "err", err)
		}
	}
}

// sweep releases the jobs that ended here, then claims the jobs whose
// deadline passed and settles them, up to sweepSettlers at once. After
// each batch it releases the jobs that batch ended, so that a backlog
// longer than the claim's lease to settle still drains: without it the
// first jobs of the backlog would come due again before their release,
// and the sweep would go round them for ever.
func (d *Dispatcher) sweep(ctx context.Context) {
	d.releaseOver(ctx)
	for ctx.Err() == nil {
		ids, err := d.st.Due.Claim(ctx, time.Now(), sweepLease, sweepBatch)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("scheduler: claim due jobs", "err", err)
			}
			return
		}
		var g errgroup.Group
		g.SetLimit(sweepSettlers)
		for _, id := range ids {
			g.Go(func() error {
				if err := d.settle(ctx, id); err != nil && ctx.Err() == nil {
					d.log.Warn("scheduler: settle job", "job_id", id, "err", err)
				}
				return nil
			})
		}
		_ = g.Wait()
		d.releaseOver(ctx)
		if len(ids) < sweepBatch {
			return
		}
	}
}

// renewLeases renews the deadline of every acknowledged job on this
// instance's nodes, never past the job's run timeout: the last renewal
// before it sets the deadline to the run timeout itself, so that the
// sweeper takes the job off its node within SweepInterval of it.
func (d *Dispatcher) renewLeases(ctx context.Context) {
	now := time.Now()
	type lease struct {
		id    string
		until time.Time
	}
	var ls []lease
	d.mu.Lock()
	for _, n := range d.nodes {
		for id, j := range n.jobs {
			if j.acked && now.Sub(j.assigned) < d.dc.RunTimeout {
				ls = append(ls, lease{id, d.leaseUntil(now, j.assigned)})
			}
		}
	}
	d.mu.Unlock()
	for _, l := range ls {
		if err := d.st.Due.Set(ctx, l.id, l.until); err != nil && ctx.Err() == nil {
			d.log.Warn("scheduler: renew lease", "job_id", l.id, "err", err)
			return
		}
	}
}

// leaseUntil is the deadline of an acknowledged job renewed at now: a
// lease from now, but never past the run timeout of its attempt, which was
// assigned to its node at assigned.
func (d *Dispatcher) leaseUntil(now, assigned time.Time) time.Time {
	until, bound := now.Add(d.dc.Lease), assigned.Add(d.dc.RunTimeout)
	if bound.Before(until) {
		return bound
	}
	return until
}

// expireRequests answers job_failed to requests whose answer is overdue,
// and forgets old answers.
func (d *Dispatcher) expireRequests(ctx context.Context) {
	d.watchMoved(ctx)
	now := time.Now()
	type late struct {
		k    pendingKey
		req  string
		conn SessionConn
	}
	var lates []late
	d.mu.Lock()
	for k, p := range d.pending {
		if now.After(p.deadline) {
			delete(d.pending, k)
			if s := d.sessions[k.session]; s != nil {
				if _, done := s.answered[k.job]; !done {
					s.markAnswered(k.job, now)
					lates = append(lates, late{k, p.requestID, s.conn})
				}
			}
		}
	}
	for _, s := range d.sessions {
		s.forget(now.Add(-answeredMemory))
	}
	d.mu.Unlock()
	for _, l := range lates {
		m := Envelope{Type: TypeJobFailed, JobID: l.k.job, SessionID: l.k.session, RequestID: l.req, Error: FailTimeout + ": no answer within " + d.dc.RequestTimeout.String()}
		l.conn.Send(ctx, m)
		if d.hooks.Answered != nil {
			d.hooks.Answered(m.Type)
		}
	}
}

// watchMoved looks, every SweepInterval, for the outcome of the jobs that
// sessions attached here asked for again after their job was made through
// another instance, and answers those that ended. The job's end routes the
// answer first to the instance the request came through: when that
// instance died, it still counts as alive until its presence runs out, and
// the answer waits in its inbox for the adoption. A session that moved
// here is answered within SweepInterval instead; the answer that comes
// later through the inbox is dropped as given twice. Only such requests
// cost a read, one each per sweep, so the usual answer costs nothing more.
func (d *Dispatcher) watchMoved(ctx context.Context) {
	var moved []pendingKey
	d.mu.Lock()
	for k, p := range d.pending {
		if p.moved {
			moved = append(moved, k)
		}
	}
	d.mu.Unlock()
	for _, k := range moved {
		out, done, err := d.st.Jobs.Watch(ctx, k.job, k.session)
		if err != nil || !done {
			continue
		}
		entry, err := d.st.Jobs.Entry(ctx, k.job)
		if err != nil {
			continue
		}
		d.deliver(ctx, k.session, answerOf(k.job, entry.Spec, k.session, out))
	}
}
