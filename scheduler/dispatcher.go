package scheduler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

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
	// Jobs lists the jobs (their ids) the node still runs as it attaches,
	// which is what a node that reconnects knows and the plane does not:
	// every job that the node had acknowledged (ACCEPTED or RUNNING on
	// it) and does not list is one it lost with its connection, and goes
	// to another node at once ([CancelFailover]; the node gets job_cancel).
	// A job dispatched to it and not yet acknowledged is left to its ack
	// deadline, since its job_assign may still be on its way. Nil means the
	// node does not say: its jobs stay on it, and this instance renews
	// their leases until their results come or the run timeout ends them.
	// An empty, non-nil list says the node runs nothing.
	Jobs []string
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
	FailQueueFull   = "queue_full"   // the job's pool had Dispatch.QueueLimit jobs waiting on the instance
	FailAttempts    = "max_attempts" // every attempt timed out or failed over
	FailTimeout     = "timeout"      // no answer reached the session within Dispatch.RequestTimeout
	CancelFailover  = "failover"     // the job went to another node
	CancelTimeout   = "timeout"      // the attempt took too long
	CancelNodeStorm = "model_not_available"
)

// Limits of the Dispatcher's own bookkeeping.
const (
	sweepBatch     = 256              // jobs settled per sweep round trip
	sweepSettlers  = 16               // jobs of a batch settled at once
	sweepLease     = 5 * time.Second  // how long a claimed deadline is held off the other sweepers
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

	hb    *Heartbeat
	binds *Bindings
	sync  *SnapshotSync
	deliv *Deliverer
	kick  chan struct{} // wakes the sweeper: a whole sweep
	ended chan struct{} // wakes the release of the jobs that ended here
	slots chan struct{} // wakes the queues of waiting jobs: a slot may be free

	mu       sync.Mutex
	nodes    map[string]*localNode
	sessions map[string]*localSession
	fleet    map[string]NodeSnapshot
	index    fleetIndex                // the candidates of selection (selection.go)
	alive    map[string]time.Time      // instances found alive, and when
	pending  map[pendingKey]pendingReq // requests waiting for their answer
	waiting  map[string]*waitQueue     // jobs waiting here for a node, by pool (waiting.go)
	queued   map[string]string         // the pool of each job in waiting
	stopped  bool
	// over are the jobs that ended here, answered: the next sweep frees
	// their slots, releases those FINISHED and takes every one's deadline
	// out of the index, in one call each (what a stop leaves behind,
	// whichever sweeper claims the deadline carries on; a slot expires).
	over []overJob
	// progress are the job_ack and job_started taken here and not yet
	// written to their jobs' records: [0] since the last tick of
	// storeProgress, [1] those of the tick before, written at the next.
	progress [2][]progressKey
	// storm counts the storm guard's decisions taken here ([Dispatcher.Overview]).
	storm map[stormKey]*StormCount

	turnMu sync.Mutex
	turns  map[string]*turnLock // turns being dispatched here

	rndMu sync.Mutex
	rnd   *rand.Rand // selection's random source
}

type overJob struct {
	JobAttempt
	release bool   // FINISHED: to be released
	node    string // the node whose slot it held, or ""
}

type localNode struct {
	info NodeInfo
	conn NodeConn
	jobs map[string]*localJob
}

type localJob struct {
	attempt int
	acked   bool // job_ack or job_started seen
	started bool // job_started seen
	// unstored: the progress seen (acked, started) is not yet written to
	// the job's record; storeProgress writes it, unless the result's step
	// comes first and makes it moot.
	unstored bool
	assigned time.Time
}

// progressKey names a job's progress taken here; ev is the step that
// writes it, once known.
type progressKey struct {
	node, job string
	attempt   int
	ev        fsm.Event
}

type localSession struct {
	conn     SessionConn
	answered map[string]time.Time // job id -> when answered
	// order lists the answered jobs oldest first (from head on), so
	// that forgetting the old ones costs what is forgotten, not a walk
	// over every job answered within answeredMemory.
	order []answeredJob
	head  int
}

type answeredJob struct {
	job string
	at  time.Time
}

// markAnswered records job as answered at at. The caller holds d.mu.
func (s *localSession) markAnswered(job string, at time.Time) {
	s.answered[job] = at
	s.order = append(s.order, answeredJob{job, at})
}

// forget drops the jobs answered before cutoff. Entries are appended in
// the order of their times (give or take the instants between taking a
// time and taking the lock), so it stops at the first newer one. The
// caller holds d.mu.
func (s *localSession) forget(cutoff time.Time) {
	for s.head < len(s.order) && s.order[s.head].at.Before(cutoff) {
		e := s.order[s.head]
		s.order[s.head] = answeredJob{}
		s.head++
		if at, ok := s.answered[e.job]; ok && at.Equal(e.at) {
			delete(s.answered, e.job)
		}
	}
	if s.head == len(s.order) {
		s.order, s.head = s.order[:0], 0
	} else if s.head > 1024 && s.head > len(s.order)/2 {
		n := copy(s.order, s.order[s.head:])
		clear(s.order[n:])
		s.order, s.head = s.order[:n], 0
	}
}

type pendingKey struct{ session, job string }

type pendingReq struct {
	requestID string
	deadline  time.Time
	// moved: the job was made through another instance, so its answer is
	// routed there first (see watchMoved).
	moved bool
}

// NewDispatcher returns the dispatcher of cfg.InstanceID over st. cfg gets
// its defaults ([Config.WithDefaults]) and is validated; the error is a
// [*ConfigError] naming the bad field. A job store that enforces its own
// number of attempts ([AttemptLimit]) must enforce cfg's
// Dispatch.MaxAttempts: build the stores from the same Config
// ([NewMemStores], store/redisstore.NewStores).
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
	if al, ok := st.Jobs.(AttemptLimit); ok {
		if want, got := (fsm.Machine{MaxAttempts: cfg.Dispatch.MaxAttempts}).Max(), al.MaxAttempts(); got != want {
			return nil, fieldErr("Dispatch.MaxAttempts", "%d, but the job store allows %d attempts: build the stores from the same Config", want, got)
		}
	}
	d := &Dispatcher{
		st: st, cfg: cfg, dc: cfg.Dispatch, id: cfg.InstanceID, log: logger(cfg.Logger), hooks: cfg.Hooks,
		kick: make(chan struct{}, 1), ended: make(chan struct{}, 1), slots: make(chan struct{}, 1),
		nodes: map[string]*localNode{}, sessions: map[string]*localSession{}, fleet: map[string]NodeSnapshot{},
		alive: map[string]time.Time{}, pending: map[pendingKey]pendingReq{},
		waiting: map[string]*waitQueue{}, queued: map[string]string{},
		turns: map[string]*turnLock{},
		rnd:   rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
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
// deliverer, the deadline sweeper, the queues of jobs waiting for a node,
// the lease renewal, the adoption of dead instances' inboxes and the
// request timeouts. It returns nil after a
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
	// A job that ends here is released at once (its slot freed), without
	// a sweep's reads of the deadline index, which the interval paces.
	g.Go(func() error { d.loop(gctx, d.dc.SweepInterval, d.ended, d.releaseOver); return nil })
	g.Go(func() error { d.queueLoop(gctx); return nil })
	g.Go(func() error { d.loop(gctx, d.dc.Lease/3, nil, d.renewLeases); return nil })
	g.Go(func() error { d.loop(gctx, d.progressTick(), nil, d.storeProgress); return nil })
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
	// Let the fleet know at once that this instance's nodes are gone, and
	// release the jobs that ended here.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	d.releaseOver(sctx)
	d.storeProgress(sctx)
	d.storeProgress(sctx)
	d.handOver(sctx)
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

// wakeRelease wakes the release of the jobs that ended here.
func (d *Dispatcher) wakeRelease() {
	select {
	case d.ended <- struct{}{}:
	default:
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
