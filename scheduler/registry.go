package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/ksana-dev/ksana/fsm"
)

// The registry: the nodes and sessions attached to this instance, and
// its view of the fleet.

// markOffline takes a node out of this instance's view of the fleet until
// the next refresh; d.mu is held.
func (d *Dispatcher) markOffline(nodeID string) {
	if s, ok := d.fleet[nodeID]; ok && s.Online {
		s.Online = false
		d.fleet[nodeID] = s
		d.fleetChanged()
	}
}

// checkNodeInfo validates and completes what a node says about itself.
func (d *Dispatcher) checkNodeInfo(info NodeInfo) (NodeInfo, error) {
	if err := CheckID("node_id", info.NodeID); err != nil {
		return info, err
	}
	for i, p := range info.Pools {
		if err := CheckID(fmt.Sprintf("pools[%d]", i), p); err != nil {
			return info, err
		}
	}
	for i, m := range info.Models {
		if err := CheckID(fmt.Sprintf("models[%d]", i), m); err != nil {
			return info, err
		}
	}
	if len(info.Pools) > 256 || len(info.Models) > 256 {
		return info, msgErr("pools", "more than 256 pools or models")
	}
	if info.Capacity < 0 || info.Capacity > MaxCapacity {
		return info, msgErr("capacity", "%d is outside 0..%d", info.Capacity, MaxCapacity)
	}
	if info.Capacity == 0 {
		info.Capacity = d.dc.DefaultCapacity
	}
	if len(info.Status) > MaxIDLen {
		return info, msgErr("status", "longer than %d bytes", MaxIDLen)
	}
	if len(info.Jobs) > MaxCapacity {
		return info, msgErr("jobs", "more than %d jobs", MaxCapacity)
	}
	for i, j := range info.Jobs {
		if err := CheckID(fmt.Sprintf("jobs[%d]", i), j); err != nil {
			return info, err
		}
	}
	info.Pools = slices.Clone(info.Pools)
	info.Models = slices.Clone(info.Models)
	if info.Jobs != nil {
		info.Jobs = slices.Clone(info.Jobs)
	}
	return info, nil
}

func (d *Dispatcher) snapshotOf(info NodeInfo) NodeSnapshot {
	return NodeSnapshot{
		NodeID: info.NodeID, InstanceID: d.id, Status: info.Status, Pools: info.Pools, Models: info.Models,
		MaxConcurrency: info.Capacity, Online: true,
	}
}

// AttachNode attaches a node connected to this instance: it binds the
// node's owner to this instance (a newer connection, here or on another
// instance, always wins), publishes its snapshot and makes it selectable
// at once. Attaching a node id that is attached already replaces the old
// connection. The node's jobs stay on it and are followed from here,
// except those it acknowledged and does not list in info.Jobs (when it
// lists its jobs): it lost them, and they go to other nodes before
// AttachNode returns.
func (d *Dispatcher) AttachNode(ctx context.Context, info NodeInfo, conn NodeConn) error {
	if conn == nil {
		return errors.New("scheduler: AttachNode: nil conn")
	}
	info, err := d.checkNodeInfo(info)
	if err != nil {
		return err
	}
	if err := d.live(); err != nil {
		return err
	}
	if err := d.binds.Connect(ctx, OwnerNode, info.NodeID); err != nil {
		return err
	}
	snap := d.snapshotOf(info)
	ns := d.cfg.Fleet
	if err := d.st.Snapshots.Upsert(ctx, time.Now(), ns.PresenceTTL, ns.RemoveStaleAfter, snap); err != nil {
		return fmt.Errorf("scheduler: publish node %s: %w", info.NodeID, err)
	}
	d.mu.Lock()
	n := d.nodes[info.NodeID]
	fresh := n == nil
	if fresh {
		n = &localNode{jobs: map[string]*localJob{}}
		d.nodes[info.NodeID] = n
	}
	n.info, n.conn = info, conn
	if old, ok := d.fleet[info.NodeID]; !ok || !sameEligibility(old, snap) {
		d.fleetChanged()
	}
	d.fleet[info.NodeID] = snap
	var known []string
	var steps []progressKey
	if !fresh && info.Jobs != nil {
		for id, j := range n.jobs {
			known = append(known, id)
			steps = n.unstored(steps, id, j.attempt)
		}
	}
	d.mu.Unlock()
	// The progress seen here goes to the records first, so that a job the
	// node acknowledged here and now forgot is known as acknowledged.
	d.writeProgress(ctx, steps)
	if fresh || info.Jobs != nil {
		d.takeJobs(ctx, info.NodeID, n, known, info.Jobs)
	}
	d.wakeSweeper() // jobs waiting for a node may take this one
	d.wakeQueues()
	return nil
}

// takeJobs makes this instance follow the jobs a node attaching here
// already runs (it moved from another instance, or this instance
// restarted): their leases are renewed here from now on, so that they are
// not timed out while the node works on them. With listed not nil (the
// node said what it runs), a job the node acknowledged and does not list
// is one it lost: it goes to another node at once, instead of holding its
// slot, renewed here, until the run timeout. known are jobs this instance
// followed on the node before, besides those of its reservations.
func (d *Dispatcher) takeJobs(ctx context.Context, nodeID string, n *localNode, known, listed []string) {
	ids, err := d.st.Reservations.Jobs(ctx, nodeID)
	if err != nil {
		d.log.Warn("scheduler: jobs of an attaching node", "node_id", nodeID, "err", err)
		if listed == nil {
			return
		}
	}
	for _, id := range known {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		rec, err := d.st.Jobs.Job(ctx, id)
		if err != nil || rec.NodeID != nodeID || !rec.State.Active() {
			continue
		}
		if listed != nil && rec.State != fsm.Dispatched && !slices.Contains(listed, id) {
			d.untrack(nodeID, id)
			d.log.Info("scheduler: an attaching node does not run a job it acknowledged; the job goes to another node", "job_id", id, "node_id", nodeID, "attempt", rec.Attempt)
			if err := d.endAttempt(ctx, rec, fsm.Failover, CancelFailover); err != nil {
				d.log.Warn("scheduler: fail over a job its node lost", "job_id", id, "node_id", nodeID, "err", err)
			}
			continue
		}
		d.mu.Lock()
		if d.nodes[nodeID] == n && n.jobs[id] == nil {
			n.jobs[id] = &localJob{attempt: rec.Attempt, acked: rec.State != fsm.Dispatched, started: rec.State == fsm.Running, assigned: rec.DispatchedAt}
		}
		d.mu.Unlock()
	}
}

// DetachNode detaches the node's connection conn (a newer connection of
// the same node is left alone): it releases the owner binding if this
// instance still holds it and takes the node's presence away so that no
// instance selects it. Unless the node is attached to another instance by
// then (it moved: its jobs go on there), every job on the node goes to
// another node at once.
func (d *Dispatcher) DetachNode(ctx context.Context, nodeID string, conn NodeConn) error {
	d.mu.Lock()
	n := d.nodes[nodeID]
	if n == nil || n.conn != conn {
		d.mu.Unlock()
		return nil
	}
	delete(d.nodes, nodeID)
	d.markOffline(nodeID)
	var jobs []string
	var steps []progressKey
	for id, j := range n.jobs {
		jobs = append(jobs, id)
		steps = n.unstored(steps, id, j.attempt)
	}
	d.mu.Unlock()
	// The progress seen here goes to the records first: should the node
	// be attached elsewhere, that instance follows its jobs from there.
	d.writeProgress(ctx, steps)
	var errs []error
	released, err := d.binds.Disconnect(ctx, OwnerNode, nodeID)
	if err != nil {
		errs = append(errs, err)
	}
	if err := d.st.Snapshots.Offline(ctx, nodeID, d.id); err != nil {
		errs = append(errs, err)
	}
	if !released && err == nil {
		// The binding was not ours any more: the node reconnected to
		// another instance (or its binding expired). Its jobs stay on it
		// while it is attached there.
		if owner, oerr := d.st.Owners.Owner(ctx, OwnerNode, nodeID); oerr == nil && owner != d.id {
			d.log.Info("scheduler: node detached here but attached to another instance; its jobs stay", "node_id", nodeID, "instance_id", owner)
			return errors.Join(errs...)
		}
	}
	if err := d.failoverNode(ctx, nodeID, jobs, CancelFailover); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// failoverNode sends every active job of nodeID (those it holds a
// reservation for, plus known) to another node: a job the node
// acknowledged as a new attempt, one it never acknowledged in the same
// attempt.
func (d *Dispatcher) failoverNode(ctx context.Context, nodeID string, known []string, why string) error {
	jobs, err := d.st.Reservations.Jobs(ctx, nodeID)
	if err != nil {
		err = fmt.Errorf("scheduler: jobs of node %s: %w", nodeID, err)
	}
	for _, j := range known {
		if !slices.Contains(jobs, j) {
			jobs = append(jobs, j)
		}
	}
	for _, j := range jobs {
		rec, jerr := d.st.Jobs.Job(ctx, j)
		if errors.Is(jerr, ErrJobNotFound) {
			d.st.Reservations.Release(ctx, nodeID, j)
			continue
		}
		if jerr != nil {
			err = errors.Join(err, jerr)
			continue
		}
		if rec.NodeID != nodeID || !rec.State.Active() {
			if rec.NodeID != nodeID {
				d.st.Reservations.Release(ctx, nodeID, j)
			}
			continue
		}
		if rec.State == fsm.Dispatched {
			// The node never acknowledged the job: it goes back to wait for
			// a node in the same attempt, as an undeliverable job_assign
			// does, so that nodes going away spend no attempts. Its wait
			// for a node still counts from when it began (QueueTimeout).
			if ferr := d.requeueLogged(ctx, rec, "scheduler: job taken off its node", "reason", why, "state", fsm.Created, "acknowledged", false); ferr != nil {
				err = errors.Join(err, ferr)
			}
			continue
		}
		if ferr := d.endAttempt(ctx, rec, fsm.Failover, why); ferr != nil {
			err = errors.Join(err, ferr)
		}
	}
	return err
}

// AttachSession attaches a session connected to this instance and binds
// its owner here, so that answers reach it.
func (d *Dispatcher) AttachSession(ctx context.Context, sessionID string, conn SessionConn) error {
	if conn == nil {
		return errors.New("scheduler: AttachSession: nil conn")
	}
	if err := CheckID("session_id", sessionID); err != nil {
		return err
	}
	if err := d.live(); err != nil {
		return err
	}
	if err := d.binds.Connect(ctx, OwnerSession, sessionID); err != nil {
		return err
	}
	d.mu.Lock()
	s := d.sessions[sessionID]
	if s == nil {
		s = &localSession{answered: map[string]time.Time{}}
		d.sessions[sessionID] = s
	}
	s.conn = conn
	d.mu.Unlock()
	return nil
}

// DetachSession detaches the session's connection conn (a newer one is
// left alone) and releases its owner binding if this instance holds it.
// Its jobs go on: a session that reconnects and sends a request id again
// gets the answer.
func (d *Dispatcher) DetachSession(ctx context.Context, sessionID string, conn SessionConn) error {
	d.mu.Lock()
	s := d.sessions[sessionID]
	if s == nil || s.conn != conn {
		d.mu.Unlock()
		return nil
	}
	delete(d.sessions, sessionID)
	for k := range d.pending {
		if k.session == sessionID {
			delete(d.pending, k)
		}
	}
	d.mu.Unlock()
	_, err := d.binds.Disconnect(ctx, OwnerSession, sessionID)
	return err
}

// lostBinding drops a node or session that reconnected to another instance.
func (d *Dispatcher) lostBinding(kind OwnerKind, id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch kind {
	case OwnerNode:
		delete(d.nodes, id)
	case OwnerSession:
		delete(d.sessions, id)
	}
}

func (d *Dispatcher) localSnapshots() []NodeSnapshot {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]NodeSnapshot, 0, len(d.nodes))
	for _, n := range d.nodes {
		s := d.snapshotOf(n.info)
		s.Running = len(n.jobs)
		out = append(out, s)
	}
	return out
}

// applyFleet takes the shared fleet view; nodes that went offline since
// the last view have their jobs sent elsewhere at once.
func (d *Dispatcher) applyFleet(fleet []NodeSnapshot) {
	d.mu.Lock()
	next := make(map[string]NodeSnapshot, len(fleet))
	for _, s := range fleet {
		next[s.NodeID] = s
	}
	for id, n := range d.nodes {
		next[id] = d.snapshotOf(n.info)
	}
	var gone []string
	for id, old := range d.fleet {
		if old.Online && !next[id].Online {
			gone = append(gone, id)
		}
	}
	// Jobs waiting for a node may take one that came online, or that has
	// more room than before; an unchanged fleet wakes no sweep.
	more := false
	for id, s := range next {
		old, ok := d.fleet[id]
		if s.Online && (!ok || !old.Online || s.MaxConcurrency > old.MaxConcurrency || s.Running < old.Running) {
			more = true
			break
		}
	}
	if len(next) != len(d.fleet) {
		d.fleetChanged()
	} else {
		for id, s := range next {
			if old, ok := d.fleet[id]; !ok || !sameEligibility(old, s) {
				d.fleetChanged()
				break
			}
		}
	}
	d.fleet = next
	d.mu.Unlock()
	for _, id := range gone {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := d.failoverNode(ctx, id, nil, CancelFailover); err != nil {
			d.log.Warn("scheduler: fail over jobs of an offline node", "node_id", id, "err", err)
		}
		cancel()
	}
	if more {
		d.wakeSweeper()
		d.wakeQueues()
	}
}

// Fleet returns this instance's view of the fleet, sorted by node id.
func (d *Dispatcher) Fleet() []NodeSnapshot {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]NodeSnapshot, 0, len(d.fleet))
	for _, s := range d.fleet {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out
}

// Counts reports the nodes and sessions attached to this instance.
func (d *Dispatcher) Counts() (nodes, sessions int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.nodes), len(d.sessions)
}
