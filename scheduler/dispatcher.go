package scheduler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/ksana-dev/ksana/affinity"
	"github.com/ksana-dev/ksana/fsm"
	"golang.org/x/sync/errgroup"
)

// Stores are the shared stores a [Dispatcher] works over. Every instance
// of one plane gets stores over the same backend: [NewMemStores] for a
// single process without Redis, store/redisstore.NewStores for Redis.
type Stores struct {
	Presence     Presence
	Owners       Owners
	Snapshots    NodeSnapshots
	Sender       Sender
	Inbox        func(instanceID string) Inbox // the inbox of an instance, read by its consumer group
	Jobs         JobStore
	Book         JobBook
	Due          DueIndex
	Reservations ReservationStore
	Turns        TurnStore
	Storm        StormGuard
}

func (s Stores) check() error {
	switch {
	case s.Presence == nil:
		return errors.New("scheduler: Stores.Presence is nil")
	case s.Owners == nil:
		return errors.New("scheduler: Stores.Owners is nil")
	case s.Snapshots == nil:
		return errors.New("scheduler: Stores.Snapshots is nil")
	case s.Sender == nil:
		return errors.New("scheduler: Stores.Sender is nil")
	case s.Inbox == nil:
		return errors.New("scheduler: Stores.Inbox is nil")
	case s.Jobs == nil:
		return errors.New("scheduler: Stores.Jobs is nil")
	case s.Book == nil:
		return errors.New("scheduler: Stores.Book is nil")
	case s.Due == nil:
		return errors.New("scheduler: Stores.Due is nil")
	case s.Reservations == nil:
		return errors.New("scheduler: Stores.Reservations is nil")
	case s.Turns == nil:
		return errors.New("scheduler: Stores.Turns is nil")
	case s.Storm == nil:
		return errors.New("scheduler: Stores.Storm is nil")
	}
	return nil
}

// NodeConn is a node's connection to this instance: the Dispatcher sends
// it job_assign and job_cancel. Send must not block for long (queue, or
// fail); an error is taken as the node being gone for that job, which
// then goes to another node.
type NodeConn interface {
	Send(ctx context.Context, m Envelope) error
}

// SessionConn is a session's connection to this instance: the Dispatcher
// sends it job_result and job_failed, one per request.
type SessionConn interface {
	Send(ctx context.Context, m Envelope) error
}

// NodeInfo is what a node says about itself when it attaches.
type NodeInfo struct {
	NodeID string
	// Pools are the pools (such as language pairs) the node serves; a job
	// with a pool goes only to a node that lists it.
	Pools []string
	// Models are the models installed; a job with a model goes only to a
	// node that lists it.
	Models []string
	// Capacity is the number of jobs it runs at once. Zero means
	// DispatchConfig.DefaultCapacity.
	Capacity int
	// Status is the node's own status word, shown in the fleet view.
	Status string
}

// Request is a session's request for a job.
type Request struct {
	// RequestID makes the request idempotent across instances: every
	// request with one id, from any session on any instance, gets the one
	// job made for the first and its one answer. Required.
	RequestID string
	// TurnID groups a turn's jobs: they go to the node of the turn's first
	// job while it can take them (turn affinity). Optional.
	TurnID string
	// Pool and Model restrict the nodes the job may go to. Optional.
	Pool  string
	Model string
	// Reason is the finalize reason: "manual" or "timeout" end the turn
	// (its affinity is cleared once this job is dispatched),
	// "max_duration" or "" keep it going.
	Reason  string
	Payload []byte
}

// Errors of the Dispatcher's entry points.
var (
	// ErrNotAttached: the session or node is not attached to this instance.
	ErrNotAttached = errors.New("not attached to this instance")
	// ErrStopped: the Dispatcher's Run has ended.
	ErrStopped = errors.New("dispatcher stopped")
	// ErrWrongNode: a node reported on a job that is not assigned to it.
	ErrWrongNode = errors.New("job is not assigned to this node")
)

// Reasons written in job_failed and job_cancel messages.
const (
	FailNoNode      = "no_node"      // no eligible node took the job within Dispatch.QueueTimeout
	FailAttempts    = "max_attempts" // every attempt timed out or failed over
	FailTimeout     = "timeout"      // no answer reached the session within Dispatch.RequestTimeout
	FailResultLost  = "result_lost"  // the job's outcome was not found once it finished (its store lost it)
	CancelFailover  = "failover"     // the job went to another node
	CancelTimeout   = "timeout"      // the attempt took too long
	CancelNodeStorm = "model_not_available"
)

// Limits of the Dispatcher's own bookkeeping.
const (
	sweepBatch     = 256              // jobs settled per sweep round trip
	answeredMemory = 10 * time.Minute // how long a session's answered jobs are remembered
)

// JobIDFor returns the job id of a request id: "j" and the first 32 hex
// digits of the SHA-256 of the request id. Deriving the job from the
// request makes creation idempotent without a lock: however often, and
// wherever, a request id arrives, it names one job.
func JobIDFor(requestID string) string {
	h := sha256.Sum256([]byte(requestID))
	return "j" + hex.EncodeToString(h[:16])
}

// Dispatcher is one dispatch instance: it holds the connections of the
// nodes and sessions attached to it, turns each session request into a
// job, selects a node, reserves one of its slots, sends the job to the
// node (directly, or through the inbox of the instance holding the node),
// follows the node's job_ack, job_started and job_result, and routes the
// answer to the instance holding the session. Several Dispatchers over one
// set of [Stores] form one plane; see the package documentation for the
// guarantees.
type Dispatcher struct {
	st    Stores
	cfg   Config
	dc    DispatchConfig
	id    string
	log   *slog.Logger
	hooks Hooks
	max   int

	hb    *Heartbeat
	binds *Bindings
	sync  *SnapshotSync
	deliv *Deliverer
	kick  chan struct{}

	mu       sync.Mutex
	nodes    map[string]*localNode
	sessions map[string]*localSession
	fleet    map[string]NodeSnapshot
	alive    map[string]aliveEntry
	pending  map[pendingKey]pendingReq // requests waiting for their answer
	stopped  bool

	turnMu sync.Mutex
	turns  map[string]*turnLock // turns being dispatched here
}

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

type localNode struct {
	info NodeInfo
	conn NodeConn
	jobs map[string]*localJob
}

type localJob struct {
	attempt  int
	acked    bool
	assigned time.Time
}

type localSession struct {
	conn     SessionConn
	answered map[string]time.Time // job id -> when answered
}

type aliveEntry struct {
	alive bool
	at    time.Time
}

type pendingKey struct{ session, job string }

type pendingReq struct {
	requestID string
	deadline  time.Time
}

// NewDispatcher returns the dispatcher of cfg.InstanceID over st. cfg gets
// its defaults ([Config.WithDefaults]) and is validated; the error is a
// [*ConfigError] naming the bad field.
func NewDispatcher(st Stores, cfg Config) (*Dispatcher, error) {
	if err := st.check(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkInstanceID(cfg.InstanceID); err != nil {
		return nil, err
	}
	d := &Dispatcher{
		st: st, cfg: cfg, dc: cfg.Dispatch, id: cfg.InstanceID, log: logger(cfg.Logger), hooks: cfg.Hooks,
		max:   fsm.Machine{MaxAttempts: cfg.Dispatch.MaxAttempts}.Max(),
		kick:  make(chan struct{}, 1),
		nodes: map[string]*localNode{}, sessions: map[string]*localSession{}, fleet: map[string]NodeSnapshot{},
		alive: map[string]aliveEntry{}, pending: map[pendingKey]pendingReq{},
		turns: map[string]*turnLock{},
	}
	var err error
	if d.hb, err = NewHeartbeat(st.Presence, cfg); err != nil {
		return nil, err
	}
	if d.binds, err = NewBindings(st.Owners, cfg, d.lostBinding); err != nil {
		return nil, err
	}
	if d.sync, err = NewSnapshotSync(st.Snapshots, cfg, d.localSnapshots, d.applyFleet); err != nil {
		return nil, err
	}
	if d.deliv, err = NewDeliverer(st.Inbox(d.id), d.id, d.handle, cfg); err != nil {
		return nil, err
	}
	return d, nil
}

// InstanceID returns the instance's id.
func (d *Dispatcher) InstanceID() string { return d.id }

// Config returns the effective configuration (defaults applied).
func (d *Dispatcher) Config() Config { return d.cfg }

// Run runs the instance's loops until ctx ends: the presence heartbeat,
// the renewal of owner bindings, the node snapshot sync, the inbox
// deliverer, the deadline sweeper, the lease renewal, the adoption of dead
// instances' inboxes and the request timeouts. It returns nil after a
// clean stop, or the error that kept it from starting (the first presence
// announcement failed). Errors of the stores while running are logged and
// retried, so a Redis restart or failover needs no restart of Run.
func (d *Dispatcher) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return d.hb.Run(gctx) })
	g.Go(func() error { return d.binds.Run(gctx) })
	if !d.cfg.Fleet.Off {
		g.Go(func() error { return d.sync.Run(gctx) })
	}
	g.Go(func() error { return d.deliv.Run(gctx) })
	g.Go(func() error { d.loop(gctx, d.dc.SweepInterval, d.kick, d.sweep); return nil })
	g.Go(func() error { d.loop(gctx, d.dc.Lease/3, nil, d.renewLeases); return nil })
	g.Go(func() error { d.loop(gctx, d.cfg.OwnerTTL/3, nil, d.adoptDead); return nil })
	g.Go(func() error { d.loop(gctx, d.dc.SweepInterval, nil, d.expireRequests); return nil })
	err := g.Wait()
	d.mu.Lock()
	d.stopped = true
	nodes := make([]string, 0, len(d.nodes))
	for id := range d.nodes {
		nodes = append(nodes, id)
	}
	d.mu.Unlock()
	// Let the fleet know at once that this instance's nodes are gone.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	for _, id := range nodes {
		d.st.Snapshots.Offline(sctx, id, d.id)
	}
	return err
}

func (d *Dispatcher) loop(ctx context.Context, every time.Duration, wake <-chan struct{}, f func(context.Context)) {
	t := time.NewTicker(max(every, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
		f(ctx)
	}
}

func (d *Dispatcher) wakeSweeper() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// live returns [ErrStopped] once Run has ended.
func (d *Dispatcher) live() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return ErrStopped
	}
	return nil
}

// markOffline takes a node out of this instance's view of the fleet until
// the next refresh; d.mu is held.
func (d *Dispatcher) markOffline(nodeID string) {
	if s, ok := d.fleet[nodeID]; ok {
		s.Online = false
		d.fleet[nodeID] = s
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
	info.Pools = slices.Clone(info.Pools)
	info.Models = slices.Clone(info.Models)
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
// connection; jobs on the node stay.
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
	if n == nil {
		n = &localNode{jobs: map[string]*localJob{}}
		d.nodes[info.NodeID] = n
	}
	n.info, n.conn = info, conn
	d.fleet[info.NodeID] = snap
	d.mu.Unlock()
	d.wakeSweeper() // jobs waiting for a node may take this one
	return nil
}

// DetachNode detaches the node's connection conn (a newer connection of
// the same node is left alone): it releases the owner binding if this
// instance still holds it, takes the node's presence away so that no
// instance selects it, and sends every job on the node to another node at
// once.
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
	for id := range n.jobs {
		jobs = append(jobs, id)
	}
	d.mu.Unlock()
	var errs []error
	if _, err := d.binds.Disconnect(ctx, OwnerNode, nodeID); err != nil {
		errs = append(errs, err)
	}
	if err := d.st.Snapshots.Offline(ctx, nodeID, d.id); err != nil {
		errs = append(errs, err)
	}
	if err := d.failoverNode(ctx, nodeID, jobs, CancelFailover); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// failoverNode sends every active job of nodeID (those it holds a
// reservation for, plus known) to another node.
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
	d.pending[pendingKey{sessionID, jobID}] = pendingReq{req.RequestID, now.Add(d.dc.RequestTimeout)}
	d.mu.Unlock()
	spec := JobSpec{
		RequestID: req.RequestID, SessionID: sessionID, TurnID: req.TurnID, Pool: req.Pool,
		Model: req.Model, Reason: req.Reason, Payload: req.Payload, Instance: d.id,
	}
	// The deadline goes in first: whatever stops this call from here on,
	// a sweeper finds the job and carries it on.
	if err := d.st.Due.Add(ctx, jobID, now.Add(d.dc.AckTimeout)); err != nil {
		return "", d.submitFailed(sessionID, jobID, err)
	}
	entry, created, err := d.st.Book.Open(ctx, jobID, spec, d.jobTTL())
	if err != nil {
		return "", d.submitFailed(sessionID, jobID, err)
	}
	if !created {
		out, done, err := d.st.Book.Watch(ctx, jobID, sessionID)
		if err != nil {
			return "", d.submitFailed(sessionID, jobID, err)
		}
		if done {
			d.deliver(ctx, sessionID, answerOf(jobID, entry.Spec, sessionID, out))
			return jobID, nil
		}
		d.awaitTurnNode(ctx, req, jobID)
		return jobID, nil
	}
	rec, _, err := d.st.Jobs.CreateJob(ctx, jobID)
	if err != nil {
		// The sweeper creates it from the book.
		d.log.Warn("scheduler: create job", "job_id", jobID, "err", err)
		return jobID, nil
	}
	d.enter(fsm.Created)
	if err := d.dispatchFresh(ctx, rec, entry); err != nil {
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

func (d *Dispatcher) jobTTL() time.Duration { return d.dc.JobTTL }

func (d *Dispatcher) enter(s fsm.State) {
	if d.hooks.JobState != nil {
		d.hooks.JobState(s)
	}
}

// candidates returns the nodes a job may go to, sorted: online, in the
// job's pool, with its model, not excluded.
func (d *Dispatcher) candidates(spec JobSpec, exclude map[string]bool) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for id, n := range d.fleet {
		if !n.Online || exclude[id] {
			continue
		}
		if spec.Pool != "" && !slices.Contains(n.Pools, spec.Pool) {
			continue
		}
		if spec.Model != "" && !slices.Contains(n.Models, spec.Model) {
			continue
		}
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

func (d *Dispatcher) capacity(nodeID string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.fleet[nodeID].MaxConcurrency; c > 0 {
		return c
	}
	return d.dc.DefaultCapacity
}

// choose applies the turn's affinity, then the configured strategy.
func (d *Dispatcher) choose(ctx context.Context, spec JobSpec, cands []string) (affinity.Decision, error) {
	aff := ""
	if spec.TurnID != "" {
		var err error
		if aff, err = d.st.Turns.TurnAffinity(ctx, spec.TurnID); err != nil {
			return affinity.Decision{}, err
		}
	}
	yes := func(string) bool { return true }
	dec, err := affinity.Select(spec.TurnID, aff, cands, yes, affinity.Random{})
	if err != nil || dec.Affinity || d.dc.Selection != SelectTwoChoices || len(cands) < 2 {
		return dec, err
	}
	i := rand.IntN(len(cands))
	j := rand.IntN(len(cands) - 1)
	if j >= i {
		j++
	}
	a, b := cands[i], cands[j]
	na, err := d.st.Reservations.Count(ctx, a)
	if err != nil {
		return affinity.Decision{}, err
	}
	nb, err := d.st.Reservations.Count(ctx, b)
	if err != nil {
		return affinity.Decision{}, err
	}
	if float64(nb)/float64(d.capacity(b)) < float64(na)/float64(d.capacity(a)) {
		a = b
	}
	return affinity.Decision{NodeID: a}, nil
}

func (d *Dispatcher) reserveTTL() time.Duration {
	return d.dc.AckTimeout + d.dc.RunTimeout + d.dc.Lease
}

// dispatchFresh is dispatch for a job Submit just created: its deadline,
// set by Submit a moment ago, stands for the ack deadline.
func (d *Dispatcher) dispatchFresh(ctx context.Context, rec JobRecord, entry BookEntry) error {
	return d.dispatchJob(ctx, rec, entry, true)
}

// dispatch sends a job in CREATED to a node: select, reserve, record the
// dispatch, write or clear the turn's affinity, send job_assign.
func (d *Dispatcher) dispatch(ctx context.Context, rec JobRecord, entry BookEntry) error {
	return d.dispatchJob(ctx, rec, entry, false)
}

func (d *Dispatcher) dispatchJob(ctx context.Context, rec JobRecord, entry BookEntry, fresh bool) error {
	spec := entry.Spec
	unlock := d.lockTurn(spec.TurnID)
	locked := true
	defer func() {
		if locked {
			unlock()
		}
	}()
	// Nodes refused in this round (storm-marked, full) stay out; the nodes
	// of earlier attempts are passed over while another node can take the
	// job, and tried again when none can.
	skip := map[string]bool{}
	tried := map[string]bool{}
	for _, n := range entry.Tried {
		tried[n] = true
	}
	for {
		exclude := skip
		if len(tried) > 0 {
			exclude = maps.Clone(skip)
			maps.Copy(exclude, tried)
		}
		cands := d.candidates(spec, exclude)
		if len(cands) == 0 && len(tried) > 0 {
			clear(tried)
			continue
		}
		if len(cands) == 0 {
			if d.hooks.SelectionMiss != nil {
				d.hooks.SelectionMiss(spec.Pool, spec.Model)
			}
			if time.Since(rec.UpdatedAt) >= d.dc.QueueTimeout {
				return d.fail(ctx, rec, FailNoNode, fmt.Sprintf("no node in pool %q with model %q took the job within %v", spec.Pool, spec.Model, d.dc.QueueTimeout))
			}
			return d.st.Due.Set(ctx, rec.ID, time.Now().Add(d.dc.RetryInterval))
		}
		dec, err := d.choose(ctx, spec, cands)
		if err != nil {
			return err
		}
		node := dec.NodeID
		if spec.Model != "" {
			off, err := d.st.Storm.Unavailable(ctx, node, spec.Model)
			if err != nil {
				return err
			}
			if off {
				skip[node] = true
				continue
			}
		}
		if spec.TurnID != "" && !dec.Affinity {
			// The turn's first node is written before the job moves, and the
			// first write wins: two jobs of one turn dispatched at once, here
			// and on another instance, both follow the node written first.
			if ends, _ := affinity.EndsTurn(affinity.Reason(spec.Reason)); !ends {
				aff, wrote, err := d.st.Turns.SetTurnAffinity(ctx, spec.SessionID, spec.TurnID, node)
				switch {
				case err != nil:
					d.log.Warn("scheduler: turn affinity", "turn_id", spec.TurnID, "err", err)
				case !wrote && aff != "" && aff != node && slices.Contains(cands, aff):
					node = aff
				}
				dec.Affinity = true // written (or followed): nothing to write after the move
			}
		}
		if err := d.st.Reservations.Reserve(ctx, node, rec.ID, d.capacity(node), d.reserveTTL()); err != nil {
			if errors.Is(err, ErrNodeFull) {
				skip[node] = true
				continue
			}
			return err
		}
		if err := d.st.Book.AddTried(ctx, rec.ID, node); err != nil {
			d.st.Reservations.Release(ctx, node, rec.ID)
			return err
		}
		tr, err := d.st.Jobs.ApplyJob(ctx, rec.ID, fsm.Dispatch, rec.Attempt, node)
		if err != nil || tr.Duplicate {
			// Another instance moved the job first.
			d.st.Reservations.Release(ctx, node, rec.ID)
			var te *fsm.TransitionError
			if errors.As(err, &te) {
				return nil
			}
			return err
		}
		d.enter(fsm.Dispatched)
		if !fresh {
			if err := d.st.Due.Set(ctx, rec.ID, time.Now().Add(d.dc.AckTimeout)); err != nil {
				d.log.Warn("scheduler: set deadline", "job_id", rec.ID, "err", err)
			}
		}
		// A turn's affinity was written before the move; a finalize clears it.
		if spec.TurnID != "" {
			if ends, _ := affinity.EndsTurn(affinity.Reason(spec.Reason)); ends {
				if err := d.st.Turns.ClearTurnAffinity(ctx, spec.TurnID); err != nil {
					d.log.Warn("scheduler: turn affinity", "turn_id", spec.TurnID, "err", err)
				}
			}
		}
		locked = false
		unlock() // toNode may fail the job over, which dispatches again
		assign := Envelope{
			Type: TypeJobAssign, JobID: rec.ID, Attempt: rec.Attempt, NodeID: node, SessionID: spec.SessionID,
			RequestID: spec.RequestID, TurnID: spec.TurnID, Pool: spec.Pool, Model: spec.Model,
			Reason: spec.Reason, Payload: spec.Payload,
		}
		return d.toNode(ctx, assign)
	}
}

// toNode delivers a job_assign or job_cancel to its node: on this
// instance directly, else through the inbox of the instance holding the
// node. A job_assign that cannot reach its node fails the attempt over.
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
	d.log.Info("scheduler: job_assign undeliverable; failing over", "job_id", m.JobID, "node_id", m.NodeID, "err", err)
	if conn == nil {
		// Until the next fleet refresh says otherwise, the node is out of
		// reach: the job's next attempt waits for a node rather than
		// spending every attempt on this one at once.
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
	if rec.NodeID != m.NodeID || rec.Attempt != m.Attempt || !rec.State.Active() {
		return nil
	}
	return d.endAttempt(ctx, rec, fsm.Failover, CancelFailover)
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

// instanceAlive reports whether an instance announced its presence,
// remembering the answer for a second.
func (d *Dispatcher) instanceAlive(ctx context.Context, id string) bool {
	if id == d.id {
		return true
	}
	d.mu.Lock()
	e, ok := d.alive[id]
	d.mu.Unlock()
	if ok && time.Since(e.at) < time.Second {
		return e.alive
	}
	alive, err := d.st.Presence.Alive(ctx, id)
	if err != nil {
		return true // let the inbox keep it; adoption follows if it is dead
	}
	d.mu.Lock()
	d.alive[id] = aliveEntry{alive, time.Now()}
	d.mu.Unlock()
	return alive
}

// endAttempt ends a job's current attempt on its node with a timeout or
// failover, frees the node's slot, tells the node, and sends the job on
// (or fails it once its attempts are used up).
func (d *Dispatcher) endAttempt(ctx context.Context, rec JobRecord, ev fsm.Event, why string) error {
	tr, err := d.st.Jobs.ApplyJob(ctx, rec.ID, ev, rec.Attempt, rec.NodeID)
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
	}
	d.enter(tr.Job.State)
	return d.settleRecord(ctx, tr.Job, false)
}

// fail ends a job in CREATED that no node could take.
func (d *Dispatcher) fail(ctx context.Context, rec JobRecord, code, detail string) error {
	tr, err := d.st.Jobs.ApplyJob(ctx, rec.ID, fsm.Fail, rec.Attempt, "")
	if err != nil {
		var te *fsm.TransitionError
		if errors.As(err, &te) {
			return nil
		}
		return err
	}
	if !tr.Duplicate {
		d.enter(fsm.Failed)
	}
	return d.finish(ctx, tr.Job, Outcome{Status: OutcomeFailed, Attempt: rec.Attempt, Error: code + ": " + detail})
}

// finish stores a job's outcome, answers its waiters, frees its node's
// slot and takes it out of the deadline index. Each step is idempotent, so
// a sweeper may run it again after a crash.
func (d *Dispatcher) finish(ctx context.Context, rec JobRecord, out Outcome) error {
	entry, err := d.st.Book.Finish(ctx, rec.ID, out)
	if err != nil {
		return err
	}
	return d.finishStored(ctx, rec, entry)
}

// finishStored is finish once the outcome is stored.
func (d *Dispatcher) finishStored(ctx context.Context, rec JobRecord, entry BookEntry) error {
	for _, s := range entry.Waiters {
		via := ""
		if s == entry.Spec.SessionID {
			via = entry.Spec.Instance
		}
		d.answer(ctx, s, via, answerOf(rec.ID, entry.Spec, s, *entry.Outcome))
	}
	if rec.NodeID != "" {
		if _, err := d.st.Reservations.Release(ctx, rec.NodeID, rec.ID); err != nil {
			return err
		}
		d.untrack(rec.NodeID, rec.ID)
		d.wakeSweeper()
	}
	if rec.State == fsm.Finished {
		tr, err := d.st.Jobs.ApplyJob(ctx, rec.ID, fsm.Release, rec.Attempt, "")
		if err != nil {
			return err
		}
		if !tr.Duplicate {
			d.enter(fsm.Released)
		}
	}
	return d.st.Due.Remove(ctx, rec.ID)
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
	s.answered[m.JobID] = time.Now()
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
	var stored *BookEntry
	if ev == fsm.Result {
		// The outcome is stored before the lifecycle moves, so that an
		// instance stopping in between loses no result: whoever carries
		// the job on finds it. Only the node and attempt the job is on
		// may store it; anything else is left to ApplyJob to refuse.
		rec, err := d.st.Jobs.Job(ctx, m.JobID)
		if err != nil {
			return d.rejected(m, err)
		}
		if rec.NodeID == nodeID && rec.Attempt == m.Attempt && (rec.State.Active() || rec.State == fsm.Finished) {
			e, err := d.st.Book.Finish(ctx, m.JobID, Outcome{Status: OutcomeResult, NodeID: nodeID, Attempt: m.Attempt, Payload: m.Payload})
			if err != nil {
				return err
			}
			stored = &e
		}
	}
	tr, err := d.st.Jobs.ApplyJob(ctx, m.JobID, ev, m.Attempt, nodeID)
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
		d.mu.Lock()
		leased := false
		if n := d.nodes[nodeID]; n != nil {
			j := n.jobs[m.JobID]
			if j == nil || j.attempt != m.Attempt {
				j = &localJob{attempt: m.Attempt, assigned: tr.Job.UpdatedAt}
				n.jobs[m.JobID] = j
			}
			// The lease taken at job_ack stands for job_started too.
			leased = j.acked
			j.acked = true
		}
		d.mu.Unlock()
		if leased {
			return nil
		}
		return d.st.Due.Set(ctx, m.JobID, time.Now().Add(d.dc.Lease))
	default: // result
		if !tr.Duplicate {
			d.enter(fsm.Finished)
		}
		if tr.Job.State == fsm.Released {
			return nil
		}
		if stored != nil {
			return d.finishStored(ctx, tr.Job, *stored)
		}
		return d.finish(ctx, tr.Job, Outcome{Status: OutcomeResult, NodeID: nodeID, Attempt: m.Attempt, Payload: m.Payload})
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
		if entry, err := d.st.Book.Entry(ctx, m.JobID); err == nil {
			model = entry.Spec.Model
		}
	}
	if model != "" {
		dec, err := d.st.Storm.Report(ctx, m.NodeID, model)
		if err != nil {
			return err
		}
		if d.hooks.Storm != nil {
			d.hooks.Storm(m.NodeID, model, dec)
		}
	}
	if !rec.State.Active() {
		return nil
	}
	return d.endAttempt(ctx, rec, fsm.Failover, CancelNodeStorm)
}

// settleRecord carries a job on from its state; claimed means its
// deadline passed.
func (d *Dispatcher) settleRecord(ctx context.Context, rec JobRecord, claimed bool) error {
	switch rec.State {
	case fsm.Created:
		entry, err := d.st.Book.Entry(ctx, rec.ID)
		if err != nil {
			return err
		}
		return d.dispatch(ctx, rec, entry)
	case fsm.Dispatched, fsm.Accepted, fsm.Running:
		if !claimed {
			return nil
		}
		return d.endAttempt(ctx, rec, fsm.Timeout, CancelTimeout)
	case fsm.Finished:
		entry, err := d.st.Book.Entry(ctx, rec.ID)
		if err != nil {
			return err
		}
		out := Outcome{Status: OutcomeFailed, Attempt: rec.Attempt, Error: FailResultLost}
		if entry.Outcome != nil {
			out = *entry.Outcome
		}
		return d.finish(ctx, rec, out)
	case fsm.Failed:
		return d.finish(ctx, rec, Outcome{Status: OutcomeFailed, Attempt: rec.Attempt, Error: FailAttempts + ": the job failed on " + fmt.Sprint(rec.Attempt) + " nodes"})
	default: // Released
		return d.st.Due.Remove(ctx, rec.ID)
	}
}

// settle carries on a job whose deadline passed.
func (d *Dispatcher) settle(ctx context.Context, jobID string) error {
	rec, err := d.st.Jobs.Job(ctx, jobID)
	if errors.Is(err, ErrJobNotFound) {
		// Opened, but the lifecycle was never created (or expired).
		entry, berr := d.st.Book.Entry(ctx, jobID)
		if errors.Is(berr, ErrJobNotFound) || (berr == nil && entry.Outcome != nil) {
			return d.st.Due.Remove(ctx, jobID)
		}
		if berr != nil {
			return berr
		}
		if rec, _, err = d.st.Jobs.CreateJob(ctx, jobID); err != nil {
			return err
		}
		return d.dispatch(ctx, rec, entry)
	}
	if err != nil {
		return err
	}
	return d.settleRecord(ctx, rec, true)
}

// sweep claims the jobs whose deadline passed and settles them.
func (d *Dispatcher) sweep(ctx context.Context) {
	for ctx.Err() == nil {
		ids, err := d.st.Due.Claim(ctx, time.Now(), 5*time.Second, sweepBatch)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("scheduler: claim due jobs", "err", err)
			}
			return
		}
		for _, id := range ids {
			if err := d.settle(ctx, id); err != nil && ctx.Err() == nil {
				d.log.Warn("scheduler: settle job", "job_id", id, "err", err)
			}
		}
		if len(ids) < sweepBatch {
			return
		}
	}
}

// renewLeases renews the deadline of every acknowledged job on this
// instance's nodes, until the job's run timeout.
func (d *Dispatcher) renewLeases(ctx context.Context) {
	now := time.Now()
	var ids []string
	d.mu.Lock()
	for _, n := range d.nodes {
		for id, j := range n.jobs {
			if j.acked && now.Sub(j.assigned) < d.dc.RunTimeout {
				ids = append(ids, id)
			}
		}
	}
	d.mu.Unlock()
	until := now.Add(d.dc.Lease)
	for _, id := range ids {
		if err := d.st.Due.Set(ctx, id, until); err != nil && ctx.Err() == nil {
			d.log.Warn("scheduler: renew lease", "job_id", id, "err", err)
			return
		}
	}
}

// expireRequests answers job_failed to requests whose answer is overdue,
// and forgets old answers.
func (d *Dispatcher) expireRequests(ctx context.Context) {
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
					s.answered[k.job] = now
					lates = append(lates, late{k, p.requestID, s.conn})
				}
			}
		}
	}
	for _, s := range d.sessions {
		for j, at := range s.answered {
			if now.Sub(at) > answeredMemory {
				delete(s.answered, j)
			}
		}
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
		out = append(out, d.snapshotOf(n.info))
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
	d.fleet = next
	d.mu.Unlock()
	for _, id := range gone {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := d.failoverNode(ctx, id, nil, CancelFailover); err != nil {
			d.log.Warn("scheduler: fail over jobs of an offline node", "node_id", id, "err", err)
		}
		cancel()
	}
	if len(fleet) > 0 {
		d.wakeSweeper()
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

// adoptDead takes over the inboxes of instances whose presence expired:
// their messages are routed on (a node or session that reconnected
// elsewhere gets them; a job_assign for a node gone fails over), so that
// nothing sent to a dead instance is lost.
func (d *Dispatcher) adoptDead(ctx context.Context) {
	ids, err := d.st.Presence.Instances(ctx)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("scheduler: list instances", "err", err)
		}
		return
	}
	for _, id := range ids {
		if id == d.id {
			continue
		}
		alive, err := d.st.Presence.Alive(ctx, id)
		if err != nil || alive {
			continue
		}
		ok, err := d.st.Presence.Adopt(ctx, id, d.id, d.cfg.OwnerTTL)
		if err != nil || !ok {
			continue
		}
		d.log.Info("scheduler: adopting the inbox of a dead instance", "instance_id", id)
		if err := d.drain(ctx, id); err != nil {
			if ctx.Err() == nil {
				d.log.Warn("scheduler: adopt inbox", "instance_id", id, "err", err)
			}
			continue
		}
		d.log.Info("scheduler: adopted the inbox of a dead instance", "instance_id", id)
		if d.hooks.Adopted != nil {
			d.hooks.Adopted(id)
		}
	}
}

// drain handles every entry of a dead instance's inbox, pending or new,
// and forgets the instance once its inbox is empty.
func (d *Dispatcher) drain(ctx context.Context, dead string) error {
	in := d.st.Inbox(dead)
	if err := in.EnsureGroup(ctx); err != nil {
		return err
	}
	consumer := d.id + "/adopt"
	count := d.cfg.Inbox.Count
	for ctx.Err() == nil {
		msgs, _, err := in.Reclaim(ctx, consumer, 0, count)
		if err != nil {
			return err
		}
		fresh, err := in.Read(ctx, consumer, count, 0)
		if err != nil {
			return err
		}
		msgs = append(msgs, fresh...)
		if len(msgs) == 0 {
			break
		}
		var done []string
		for _, m := range msgs {
			err := d.handle(ctx, m)
			switch {
			case err == nil:
				done = append(done, m.ID)
			case errors.Is(err, ErrMalformed) && !d.cfg.Inbox.NoDeadLetters:
				if dl, ok, derr := in.DeadLetter(ctx, consumer, m.ID, 0, ReasonMalformed+": "+err.Error()); derr == nil && ok && d.hooks.DLQMoved != nil {
					d.hooks.DLQMoved(dl)
				}
			case errors.Is(err, ErrMalformed):
				done = append(done, m.ID)
			default:
				return err
			}
		}
		if err := in.Ack(ctx, done...); err != nil {
			return err
		}
	}
	n, err := in.Len(ctx)
	if err != nil {
		return err
	}
	if n == 0 {
		return d.st.Presence.Forget(ctx, dead)
	}
	return nil
}
