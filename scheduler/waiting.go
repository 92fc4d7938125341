package scheduler

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Waiting: a job that found no node (no eligible node with a free slot)
// waits on the instance that tried to place it, in its pool's queue,
// oldest first. The queues are tried again when a slot frees here, when
// a node attaches here or the fleet view shows a node with more room, and
// every RetryInterval otherwise; a round stops trying a (pool, model) at
// its first miss, so a full pool costs one selection per round, not one
// per waiting job. A job waiting longer than QueueTimeout fails with
// no_node. Its deadline in the DueIndex is the end of its wait plus
// SweepInterval, so that if this instance stops, another one's sweeper
// dispatches or fails it (a clean stop hands them over at once).

// waitingJob is a job in a queue: its record and book as they were when
// it began to wait. A step refused on that record means the job moved on.
type waitingJob struct {
	rec   JobRecord
	entry BookEntry
}

// waitQueue is one pool's queue on this instance. Guarded by Dispatcher.mu.
type waitQueue struct {
	jobs   []waitingJob   // oldest first
	models map[string]int // number of jobs per model
	// joining counts the requests admitted to queue behind the jobs
	// waiting (see admit) and not yet queued: they count against
	// QueueLimit already.
	joining int
}

// QueueStat describes the queue of one pool on this instance
// ([Dispatcher.Queues]).
type QueueStat struct {
	Pool   string
	Depth  int       // jobs waiting for a node
	Oldest time.Time // when the oldest of them began to wait
}

// queue returns pool's queue, made if needed. d.mu is held.
func (d *Dispatcher) queue(pool string) *waitQueue {
	q := d.waiting[pool]
	if q == nil {
		q = &waitQueue{models: map[string]int{}}
		d.waiting[pool] = q
	}
	return q
}

// dropIdle forgets pool's queue once nothing is in it. d.mu is held.
func (d *Dispatcher) dropIdle(pool string) {
	if q := d.waiting[pool]; q != nil && len(q.jobs) == 0 && q.joining == 0 {
		delete(d.waiting, pool)
	}
}

// admit checks a new request against its pool's QueueLimit. ok is false
// when the pool's queue is full. behind is true when jobs of the same
// pool and model already wait here: the new job queues behind them
// without trying to place itself, and counts against the bound from now
// on. A request that tries a selection counts once it found no node, so
// that requests submitted at the same instant, which nodes with room
// take, are never refused; the bound may thus be passed by as many
// requests as miss a node at the same instant. The caller calls done
// once the job is placed or queued (done may be called more than once).
func (d *Dispatcher) admit(pool, model string) (ok, behind bool, done func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	q := d.queue(pool)
	if len(q.jobs)+q.joining >= d.dc.QueueLimit {
		d.dropIdle(pool)
		return false, false, nil
	}
	if q.models[model] == 0 {
		d.dropIdle(pool)
		return true, false, func() {}
	}
	q.joining++
	var once sync.Once
	return true, true, func() {
		once.Do(func() {
			d.mu.Lock()
			q.joining--
			d.dropIdle(pool)
			d.mu.Unlock()
		})
	}
}

// queueDue is the deadline a waiting job has in the DueIndex: past it,
// any instance's sweeper carries the job on.
func (d *Dispatcher) queueDue(since time.Time) time.Time {
	return since.Add(d.dc.QueueTimeout + d.dc.SweepInterval)
}

// hold puts a job that found no node in its pool's queue here (once).
func (d *Dispatcher) hold(rec JobRecord, entry BookEntry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.queued[rec.ID]; ok {
		return
	}
	pool := entry.Spec.Pool
	d.queued[rec.ID] = pool
	q := d.queue(pool)
	q.jobs = append(q.jobs, waitingJob{rec, entry})
	q.models[entry.Spec.Model]++
}

// wait queues a job that found no node and gives it the queue's deadline.
func (d *Dispatcher) wait(ctx context.Context, rec JobRecord, entry BookEntry) error {
	d.hold(rec, entry)
	return d.st.Due.Set(ctx, rec.ID, d.queueDue(rec.WaitingSince()))
}

// unqueue takes the jobs out of their queues.
func (d *Dispatcher) unqueue(ids map[string]bool) {
	if len(ids) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	pools := map[string]bool{}
	for id := range ids {
		if pool, ok := d.queued[id]; ok {
			pools[pool] = true
			delete(d.queued, id)
		}
	}
	for pool := range pools {
		q := d.waiting[pool]
		if q == nil {
			continue
		}
		kept := q.jobs[:0]
		for _, w := range q.jobs {
			if ids[w.rec.ID] {
				if q.models[w.entry.Spec.Model]--; q.models[w.entry.Spec.Model] <= 0 {
					delete(q.models, w.entry.Spec.Model)
				}
				continue
			}
			kept = append(kept, w)
		}
		clear(q.jobs[len(kept):])
		q.jobs = kept
		d.dropIdle(pool)
	}
}

// handOver makes the jobs waiting here due now, as Run ends, so that
// the sweepers of the other instances carry them on at once rather than
// at the end of their wait.
func (d *Dispatcher) handOver(ctx context.Context) {
	d.mu.Lock()
	ids := make([]string, 0, len(d.queued))
	for id := range d.queued {
		ids = append(ids, id)
	}
	d.mu.Unlock()
	now := time.Now()
	for _, id := range ids {
		if err := d.st.Due.Set(ctx, id, now); err != nil {
			return // their deadlines stand: the end of their wait
		}
	}
}

// wakeQueues makes the queues try their jobs again now: a slot freed, or
// a node came.
func (d *Dispatcher) wakeQueues() {
	select {
	case d.slots <- struct{}{}:
	default:
	}
}

// queueLoop runs the queues every RetryInterval, and when woken.
func (d *Dispatcher) queueLoop(ctx context.Context) {
	t := time.NewTicker(max(d.dc.RetryInterval, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			d.runQueues(ctx, false)
		case <-d.slots:
			d.runQueues(ctx, true)
		}
	}
}

// runQueues fails the jobs that waited QueueTimeout with no_node and
// tries to place the others, oldest first in each pool. A (pool, model)
// is tried until its first miss; the jobs it places in a row are tried
// in growing batches (1, 2, 4, up to sweepSettlers at once), so that a
// round that frees many slots fills them quickly and a full pool costs
// one selection. A round that was woken (a slot freed, a node came)
// tries only the nodes this instance does not believe full, so its miss
// costs no reservation; the round of every RetryInterval tries every
// eligible node, so that a belief gone stale delays a job by at most
// RetryInterval.
func (d *Dispatcher) runQueues(ctx context.Context, woken bool) {
	now := time.Now()
	var expired, todo []waitingJob
	d.mu.Lock()
	for _, q := range d.waiting {
		for _, w := range q.jobs {
			if now.Sub(w.rec.WaitingSince()) >= d.dc.QueueTimeout {
				expired = append(expired, w)
			} else {
				todo = append(todo, w)
			}
		}
	}
	d.mu.Unlock()
	if len(expired) > 0 {
		gone := map[string]bool{}
		for _, w := range expired {
			gone[w.rec.ID] = true
		}
		d.unqueue(gone)
		for _, w := range expired {
			if err := d.failNoNode(ctx, w.rec, w.entry.Spec); err != nil && ctx.Err() == nil {
				d.log.Warn("scheduler: fail waiting job", "job_id", w.rec.ID, "err", err)
			}
		}
	}
	var (
		mu     sync.Mutex
		missed = map[poolModel]bool{}
		done   = map[string]bool{}
	)
	batch := 1
	for len(todo) > 0 && ctx.Err() == nil {
		var g sync.WaitGroup
		n, hit := 0, true
		rest := todo[:0]
		for _, w := range todo {
			k := poolModel{w.entry.Spec.Pool, w.entry.Spec.Model}
			mu.Lock()
			skip := missed[k]
			mu.Unlock()
			if skip {
				continue
			}
			if n == batch {
				rest = append(rest, w)
				continue
			}
			n++
			g.Go(func() {
				placed, err := d.tryDispatch(ctx, w.rec, w.entry, woken)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					hit = false
					if ctx.Err() == nil {
						d.log.Warn("scheduler: dispatch waiting job", "job_id", w.rec.ID, "err", err)
					}
				case placed:
					done[w.rec.ID] = true
				default:
					hit = false
					missed[k] = true
				}
			})
		}
		g.Wait()
		todo = rest
		if hit {
			batch = min(2*batch, sweepSettlers)
		} else {
			batch = 1
		}
	}
	d.unqueue(done)
}

// failNoNode fails a job that no node took within QueueTimeout.
func (d *Dispatcher) failNoNode(ctx context.Context, rec JobRecord, spec JobSpec) error {
	return d.fail(ctx, rec, FailNoNode, fmt.Sprintf("no node in pool %q with model %q had a free slot within %v", spec.Pool, spec.Model, d.dc.QueueTimeout))
}

// refuse answers a request that its pool's full queue refused: job_failed
// with queue_full, sent to the session at once. Nothing is stored and the
// request is not remembered as answered, so the same request id may be
// sent again once the plane has room.
func (d *Dispatcher) refuse(ctx context.Context, sessionID, jobID string, req Request, depth int) {
	d.mu.Lock()
	delete(d.pending, pendingKey{sessionID, jobID})
	var conn SessionConn
	if s := d.sessions[sessionID]; s != nil {
		conn = s.conn
	}
	d.mu.Unlock()
	m := Envelope{
		Type: TypeJobFailed, JobID: jobID, SessionID: sessionID, RequestID: req.RequestID, TurnID: req.TurnID,
		Error: fmt.Sprintf("%s: the queue of pool %q on this instance is full (%d jobs waiting for a node)", FailQueueFull, req.Pool, depth),
	}
	if d.hooks.Shed != nil {
		d.hooks.Shed(req.Pool, FailQueueFull)
	}
	if conn == nil {
		return
	}
	if err := conn.Send(ctx, m); err != nil {
		d.log.Info("scheduler: send answer", "session_id", sessionID, "job_id", jobID, "err", err)
	}
	if d.hooks.Answered != nil {
		d.hooks.Answered(m.Type)
	}
}

// Queues returns the queues of jobs waiting on this instance for a node,
// one per pool with jobs waiting, sorted by pool: what the queue gauges
// of a metrics adapter read.
func (d *Dispatcher) Queues() []QueueStat {
	d.mu.Lock()
	out := make([]QueueStat, 0, len(d.waiting))
	for pool, q := range d.waiting {
		if len(q.jobs) == 0 {
			continue
		}
		s := QueueStat{Pool: pool, Depth: len(q.jobs), Oldest: q.jobs[0].rec.WaitingSince()}
		for _, w := range q.jobs[1:] {
			if t := w.rec.WaitingSince(); t.Before(s.Oldest) {
				s.Oldest = t
			}
		}
		out = append(out, s)
	}
	d.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Pool < out[j].Pool })
	return out
}
