package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ksana-dev/ksana/fsm"
)

// Routing: messages to nodes and answers to sessions, here or through the
// inbox of the instance that holds them.

// toNode delivers a job_assign or job_cancel to its node: on this
// instance directly, else through the inbox of the instance holding the
// node. A job_assign that cannot reach its node puts the job back to wait
// for a node, in the same attempt (see requeue).
func (d *Dispatcher) toNode(ctx context.Context, m Envelope) error {
	d.mu.Lock()
	n := d.nodes[m.NodeID]
	var conn NodeConn
	if n != nil {
		conn = n.conn
		if m.Type == TypeJobAssign {
			n.jobs[m.JobID] = &localJob{attempt: m.Attempt, assigned: time.Now()}
		} else {
			delete(n.jobs, m.JobID)
		}
	}
	d.mu.Unlock()
	var err error
	if conn != nil {
		if err = conn.Send(ctx, m); err == nil {
			return nil
		}
		err = fmt.Errorf("send to node %s: %w", m.NodeID, err)
	} else if m.Hops >= maxHops {
		err = fmt.Errorf("node %s not reached after %d hops", m.NodeID, m.Hops)
	} else {
		m.Hops++
		// The fleet view names the instance that published the node; a
		// stale one passes the message on. The owner binding is asked when
		// the view has none.
		owner := d.holder(m.NodeID)
		if owner == "" || owner == d.id {
			owner, err = d.st.Owners.Owner(ctx, OwnerNode, m.NodeID)
		}
		switch {
		case errors.Is(err, ErrNoOwner):
			err = fmt.Errorf("node %s is not connected", m.NodeID)
		case err != nil:
			return err
		case owner == d.id:
			err = fmt.Errorf("node %s is bound here but not attached", m.NodeID)
		case !d.instanceAlive(ctx, owner):
			err = fmt.Errorf("instance %s of node %s is not alive", owner, m.NodeID)
		default:
			if _, err = d.st.Sender.Send(ctx, owner, m.Fields()); err == nil {
				return nil
			}
		}
	}
	if m.Type != TypeJobAssign {
		return nil // a cancel that cannot reach its node has nothing to stop
	}
	if conn == nil {
		// Until the next fleet refresh says otherwise, the node is out of
		// reach: the job is dispatched elsewhere, or waits for a node.
		d.mu.Lock()
		if d.nodes[m.NodeID] == nil {
			d.markOffline(m.NodeID)
		}
		d.mu.Unlock()
	}
	rec, jerr := d.st.Jobs.Job(ctx, m.JobID)
	if jerr != nil {
		return errors.Join(err, jerr)
	}
	if rec.NodeID != m.NodeID || rec.Attempt != m.Attempt || rec.State != fsm.Dispatched {
		return nil // moved on, or the node has it after all
	}
	return d.requeue(ctx, rec, err)
}

// requeue puts a job whose job_assign could not reach its node back to
// wait for a node, in the same attempt (the node never began it), and
// frees the node's slot. The sweeper dispatches it again after
// RetryInterval, to another node while one is eligible; it fails with
// no_node once none took it within QueueTimeout.
func (d *Dispatcher) requeue(ctx context.Context, rec JobRecord, cause error) error {
	return d.requeueLogged(ctx, rec, "scheduler: job_assign undeliverable; the job waits for a node", "cause", cause)
}

// requeueLogged is requeue with its log line: msg and args.
func (d *Dispatcher) requeueLogged(ctx context.Context, rec JobRecord, msg string, args ...any) error {
	tr, err := d.st.Jobs.ApplyJob(ctx, rec.ID, fsm.Undelivered, rec.Attempt, rec.NodeID)
	if err != nil {
		if Refusal(err) != "" {
			return nil // someone else moved it first
		}
		return err
	}
	if tr.Duplicate {
		return nil
	}
	d.log.Info(msg, append([]any{"job_id", rec.ID, "node_id", rec.NodeID, "attempt", rec.Attempt}, args...)...)
	d.enter(tr.Job.State)
	if tr.FreeNode != "" {
		if _, err := d.st.Reservations.Release(ctx, tr.FreeNode, rec.ID); err != nil {
			d.log.Warn("scheduler: release", "job_id", rec.ID, "node_id", tr.FreeNode, "err", err)
		}
		d.untrack(tr.FreeNode, rec.ID)
		d.wakeQueues()
	}
	return d.st.Due.Set(ctx, rec.ID, time.Now().Add(d.dc.RetryInterval))
}

// maxHops bounds how often a message is passed between instances.
const maxHops = 2

// holder returns the instance the fleet view says holds nodeID.
func (d *Dispatcher) holder(nodeID string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.fleet[nodeID]; ok && s.Online {
		return s.InstanceID
	}
	return ""
}

// instanceAlive reports whether an instance announced its presence. A
// yes is remembered for aliveMemory (an instance that dies meanwhile has
// its inbox adopted, so nothing sent to it is lost); a no is not
// remembered, so that an instance that (re)starts is routed to as soon as
// it announced itself.
func (d *Dispatcher) instanceAlive(ctx context.Context, id string) bool {
	if id == d.id {
		return true
	}
	now := time.Now()
	d.mu.Lock()
	at, ok := d.alive[id]
	d.mu.Unlock()
	if ok && now.Sub(at) < aliveMemory {
		return true
	}
	alive, err := d.st.Presence.Alive(ctx, id)
	if err != nil {
		return true // let the inbox keep it; adoption follows if it is dead
	}
	d.mu.Lock()
	if alive {
		d.alive[id] = now
	} else {
		delete(d.alive, id)
	}
	if len(d.alive) > aliveKept {
		// Forget the instances not asked about lately: the map holds the
		// instances routed to now, not every one ever seen.
		for k, t := range d.alive {
			if now.Sub(t) >= aliveMemory {
				delete(d.alive, k)
			}
		}
	}
	d.mu.Unlock()
	return alive
}

// How long a live instance is taken for alive without asking, and how
// many remembered instances make instanceAlive forget the stale ones.
const (
	aliveMemory = time.Second
	aliveKept   = 64
)

// answer routes an answer to a session: on this instance directly, else
// through the inbox of the instance holding the session (or, when no
// instance holds it, of via, the instance the request came through). A
// session connected nowhere is not answered now: the outcome stays
// stored, and the session gets it when it sends the request again.
func (d *Dispatcher) answer(ctx context.Context, sessionID, via string, m Envelope) {
	if d.deliver(ctx, sessionID, m) {
		return
	}
	if m.Hops >= maxHops {
		d.log.Info("scheduler: answer passed on too often; kept for a repeated request", "session_id", sessionID, "job_id", m.JobID)
		return
	}
	m.Hops++
	// The instance the request came through most likely still holds the
	// session: send there without asking the owner binding (it passes the
	// answer on if the session moved).
	if via != "" && via != d.id && m.Hops == 1 && d.instanceAlive(ctx, via) {
		if _, err := d.st.Sender.Send(ctx, via, m.Fields()); err == nil {
			return
		}
	}
	owner, err := d.st.Owners.Owner(ctx, OwnerSession, sessionID)
	if errors.Is(err, ErrNoOwner) && via != "" {
		owner, err = via, nil
	}
	switch {
	case errors.Is(err, ErrNoOwner), err == nil && owner == d.id:
		d.log.Info("scheduler: session not connected; answer kept for a repeated request", "session_id", sessionID, "job_id", m.JobID)
	case err != nil:
		d.log.Warn("scheduler: owner of session", "session_id", sessionID, "err", err)
	case !d.instanceAlive(ctx, owner):
		d.log.Info("scheduler: instance of session not alive; answer kept for a repeated request", "session_id", sessionID, "instance_id", owner)
	default:
		if _, err := d.st.Sender.Send(ctx, owner, m.Fields()); err != nil {
			d.log.Warn("scheduler: route answer", "session_id", sessionID, "instance_id", owner, "err", err)
		}
	}
}

// deliver hands an answer to a session attached here, once per job and
// session. It reports whether the session is attached here.
func (d *Dispatcher) deliver(ctx context.Context, sessionID string, m Envelope) bool {
	d.mu.Lock()
	s := d.sessions[sessionID]
	if s == nil {
		d.mu.Unlock()
		return false
	}
	if _, done := s.answered[m.JobID]; done {
		d.mu.Unlock()
		return true
	}
	s.markAnswered(m.JobID, time.Now())
	delete(d.pending, pendingKey{sessionID, m.JobID})
	conn := s.conn
	d.mu.Unlock()
	if err := conn.Send(ctx, m); err != nil {
		d.log.Info("scheduler: send answer", "session_id", sessionID, "job_id", m.JobID, "err", err)
	}
	if d.hooks.Answered != nil {
		d.hooks.Answered(m.Type)
	}
	return true
}

// handle is the inbox handler: job_assign and job_cancel go to a node
// attached here (or on to the node's instance now), answers to a session
// attached here (or on), and node events are applied.
func (d *Dispatcher) handle(ctx context.Context, msg Message) error {
	m, err := DecodeEnvelope(msg.Fields)
	if err != nil {
		return err
	}
	switch m.Type {
	case TypeJobAssign, TypeJobCancel:
		if m.Type == TypeJobAssign && msg.Redelivered {
			// It waited in an inbox (taken over from a dead consumer or
			// instance): its attempt may be over.
			rec, err := d.st.Jobs.Job(ctx, m.JobID)
			if err != nil && !errors.Is(err, ErrJobNotFound) {
				return err
			}
			if err != nil || rec.NodeID != m.NodeID || rec.Attempt != m.Attempt || !rec.State.Active() {
				d.log.Info("scheduler: dropping an outdated job_assign", "job_id", m.JobID, "node_id", m.NodeID, "attempt", m.Attempt)
				return nil
			}
		}
		return d.toNode(ctx, m)
	case TypeJobResult, TypeJobFailed:
		if m.SessionID == "" {
			return fmt.Errorf("%w: %s without session_id", ErrMalformed, m.Type)
		}
		d.answer(ctx, m.SessionID, "", m)
		return nil
	default:
		if m.NodeID == "" {
			return fmt.Errorf("%w: %s without node_id", ErrMalformed, m.Type)
		}
		err := d.NodeEvent(ctx, m.NodeID, m)
		if why := Refusal(err); why != "" && why != RefusedStopping {
			return nil // refused and counted; nothing to retry
		}
		return err
	}
}
