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

// The read-only views of the plane, for operators (scheduler/console):
// what the Dispatcher holds in memory is copied under its lock and the
// lock released before any store is read, so a view never holds up
// dispatch for longer than a copy.

// DeadLetterAdmin is an optional capability of an [Inbox] whose
// dead-letter queue an operator may act on ([MemInbox] and
// store/redisstore's Inbox have it): put an entry back into the inbox,
// or delete it.
type DeadLetterAdmin interface {
	// RequeueDeadLetter appends the original fields of the dead letter id
	// to the inbox as a new entry and deletes the dead letter, in one
	// atomic step. It returns the new entry's id, or false when the DLQ
	// holds no entry id. A full inbox refuses it with [ErrInboxFull] and
	// the dead letter stays.
	RequeueDeadLetter(ctx context.Context, id string) (newID string, ok bool, err error)
	// DeleteDeadLetter deletes the dead letter id and reports whether it
	// was there.
	DeleteDeadLetter(ctx context.Context, id string) (bool, error)
	// DeadLetterLen returns the number of entries of the DLQ.
	DeadLetterLen(ctx context.Context) (int64, error)
}

// ErrNotSupported: the store does not have the optional capability the
// call needs (such as [DeadLetterAdmin]).
var ErrNotSupported = errors.New("not supported by the store")

// ErrNoDeadLetter: the dead-letter queue holds no entry of that id.
var ErrNoDeadLetter = errors.New("no such dead letter")

// PlaneView is the state of the plane as one instance sees it, returned
// by [Dispatcher.Overview].
type PlaneView struct {
	// InstanceID is the instance that made the view; At when.
	InstanceID string
	At         time.Time
	// Instances are every instance known to [Presence] (alive, or dead
	// with an inbox not yet drained), sorted by id.
	Instances []InstanceView
	// Nodes are the nodes attached to this instance, sorted by id.
	Nodes []LocalNodeView
	// Sessions are the ids of the sessions attached here, sorted.
	Sessions []string
	// Fleet is this instance's view of every node of the plane
	// ([Dispatcher.Fleet]), sorted by id; Running of a node attached here
	// is the count of its jobs followed here.
	Fleet []NodeSnapshot
	// Pools sums the fleet by pool, sorted by name; nodes that list no
	// pool are counted under "".
	Pools []PoolView
	// Storm counts the MODEL_NOT_AVAILABLE decisions taken here since the
	// start, by node and model, sorted.
	Storm []StormCount
	// Errors lists the stores that could not be read for this view.
	Errors []string
}

// InstanceView is one dispatch instance known to [Presence].
type InstanceView struct {
	ID    string
	Alive bool
	Self  bool // the instance that made the view
}

// LocalNodeView is a node attached to this instance and the jobs it is
// followed on here.
type LocalNodeView struct {
	Info NodeInfo
	Jobs []LocalJobView // sorted by job id
}

// LocalJobView is a job this instance follows on one of its nodes, as the
// instance last saw it (the record may be a step ahead).
type LocalJobView struct {
	JobID    string
	Attempt  int
	State    fsm.State // Dispatched, Accepted or Running as seen here
	Assigned time.Time // when the attempt was dispatched
}

// PoolView sums the nodes of one pool.
type PoolView struct {
	Pool     string
	Nodes    int // nodes listing the pool
	Online   int // of which online
	Capacity int // sum of the online nodes' capacities
	Running  int // sum of the online nodes' running jobs
}

// StormCount counts the storm guard's decisions for one node and model
// taken on this instance.
type StormCount struct {
	NodeID, Model string
	Marked        int64 // StormMarked decisions
	Debounced     int64 // StormDebounced decisions
	RateLimited   int64 // StormRateLimited decisions
	Last          time.Time
}

type stormKey struct{ node, model string }

// tallyStorm counts a storm decision taken here.
func (d *Dispatcher) tallyStorm(node, model string, dec StormDecision) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.storm == nil {
		d.storm = map[stormKey]*StormCount{}
	}
	c := d.storm[stormKey{node, model}]
	if c == nil {
		if len(d.storm) >= maxStormTally {
			return
		}
		c = &StormCount{NodeID: node, Model: model}
		d.storm[stormKey{node, model}] = c
	}
	switch dec.Action {
	case StormMarked:
		c.Marked++
	case StormDebounced:
		c.Debounced++
	case StormRateLimited:
		c.RateLimited++
	}
	c.Last = time.Now()
}

// maxStormTally bounds the node and model pairs counted by tallyStorm.
const maxStormTally = 4096

// localState is the state of a job as this instance saw it.
func (j *localJob) localState() fsm.State {
	switch {
	case j.started:
		return fsm.Running
	case j.acked:
		return fsm.Accepted
	}
	return fsm.Dispatched
}

// Overview returns the plane as this instance sees it: the instances,
// the nodes and sessions attached here, the fleet, the pools and the
// storm guard's decisions. Only [Presence] is read from the stores; a
// failed read is named in PlaneView.Errors and the rest returned.
func (d *Dispatcher) Overview(ctx context.Context) (PlaneView, error) {
	v := PlaneView{InstanceID: d.id, At: time.Now()}
	d.mu.Lock()
	for id, n := range d.nodes {
		ln := LocalNodeView{Info: n.info}
		ln.Info.Pools, ln.Info.Models, ln.Info.Jobs = slices.Clone(n.info.Pools), slices.Clone(n.info.Models), nil
		for jid, j := range n.jobs {
			ln.Jobs = append(ln.Jobs, LocalJobView{JobID: jid, Attempt: j.attempt, State: j.localState(), Assigned: j.assigned})
		}
		ln.Info.NodeID = id
		v.Nodes = append(v.Nodes, ln)
	}
	for id := range d.sessions {
		v.Sessions = append(v.Sessions, id)
	}
	running := make(map[string]int, len(d.nodes))
	for id, n := range d.nodes {
		running[id] = len(n.jobs)
	}
	v.Fleet = make([]NodeSnapshot, 0, len(d.fleet))
	for _, s := range d.fleet {
		v.Fleet = append(v.Fleet, s)
	}
	for _, c := range d.storm {
		v.Storm = append(v.Storm, *c)
	}
	d.mu.Unlock()

	sort.Slice(v.Nodes, func(i, j int) bool { return v.Nodes[i].Info.NodeID < v.Nodes[j].Info.NodeID })
	for _, n := range v.Nodes {
		sort.Slice(n.Jobs, func(i, j int) bool { return n.Jobs[i].JobID < n.Jobs[j].JobID })
	}
	sort.Strings(v.Sessions)
	for i, s := range v.Fleet {
		if r, ok := running[s.NodeID]; ok {
			v.Fleet[i].Running = r
		}
	}
	sort.Slice(v.Fleet, func(i, j int) bool { return v.Fleet[i].NodeID < v.Fleet[j].NodeID })
	v.Pools = poolsOf(v.Fleet)
	sort.Slice(v.Storm, func(i, j int) bool {
		a, b := v.Storm[i], v.Storm[j]
		return a.NodeID < b.NodeID || a.NodeID == b.NodeID && a.Model < b.Model
	})

	ids, err := d.st.Presence.Instances(ctx)
	if err != nil {
		v.Errors = append(v.Errors, fmt.Sprintf("instances: %v", err))
	}
	if !slices.Contains(ids, d.id) {
		ids = append(ids, d.id)
		sort.Strings(ids)
	}
	for _, id := range ids {
		iv := InstanceView{ID: id, Self: id == d.id}
		alive, err := d.st.Presence.Alive(ctx, id)
		if err != nil {
			v.Errors = append(v.Errors, fmt.Sprintf("presence of %s: %v", id, err))
		}
		iv.Alive = alive
		v.Instances = append(v.Instances, iv)
	}
	return v, ctx.Err()
}

// poolsOf sums fleet by pool.
func poolsOf(fleet []NodeSnapshot) []PoolView {
	m := map[string]*PoolView{}
	for _, s := range fleet {
		pools := s.Pools
		if len(pools) == 0 {
			pools = []string{""}
		}
		for _, p := range pools {
			pv := m[p]
			if pv == nil {
				pv = &PoolView{Pool: p}
				m[p] = pv
			}
			pv.Nodes++
			if s.Online {
				pv.Online++
				pv.Capacity += s.MaxConcurrency
				pv.Running += s.Running
			}
		}
	}
	out := make([]PoolView, 0, len(m))
	for _, pv := range m {
		out = append(out, *pv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pool < out[j].Pool })
	return out
}

// PoolDetail is one pool and what its nodes run now, returned by
// [Dispatcher.Pool].
type PoolDetail struct {
	PoolView
	Nodes []PoolNode // sorted by node id
	// Errors lists the stores that could not be read for this view.
	Errors []string
}

// PoolNode is one node of a pool: its snapshot, the jobs holding one of
// its slots ([ReservationStore.Jobs]) and the models the storm guard
// marks unavailable on it now.
type PoolNode struct {
	NodeSnapshot
	Local       bool     // attached to this instance
	Jobs        []string // jobs holding a slot, sorted
	Unavailable []string // models marked unavailable, sorted
}

// MaxPoolNodes bounds the nodes [Dispatcher.Pool] reads the slots of.
const MaxPoolNodes = 500

// Pool returns the nodes of the fleet that serve pool ("" for the nodes
// that list none), with the jobs holding their slots and the models the
// storm guard marks unavailable on them: one read of the reservations
// and one per model of the storm guard for each node, for at most
// [MaxPoolNodes] nodes.
func (d *Dispatcher) Pool(ctx context.Context, pool string) (PoolDetail, error) {
	v, err := d.Overview(ctx)
	if err != nil {
		return PoolDetail{}, err
	}
	pd := PoolDetail{PoolView: PoolView{Pool: pool}}
	for _, p := range v.Pools {
		if p.Pool == pool {
			pd.PoolView = p
		}
	}
	local := map[string]bool{}
	for _, n := range v.Nodes {
		local[n.Info.NodeID] = true
	}
	for _, s := range v.Fleet {
		if !(pool == "" && len(s.Pools) == 0 || slices.Contains(s.Pools, pool)) {
			continue
		}
		if len(pd.Nodes) >= MaxPoolNodes {
			pd.Errors = append(pd.Errors, fmt.Sprintf("more than %d nodes: the others are not shown", MaxPoolNodes))
			break
		}
		pn := PoolNode{NodeSnapshot: s, Local: local[s.NodeID]}
		if jobs, err := d.st.Reservations.Jobs(ctx, s.NodeID); err != nil {
			pd.Errors = append(pd.Errors, fmt.Sprintf("slots of %s: %v", s.NodeID, err))
		} else {
			pn.Jobs = jobs
		}
		for _, m := range s.Models {
			if un, err := d.st.Storm.Unavailable(ctx, s.NodeID, m); err != nil {
				pd.Errors = append(pd.Errors, fmt.Sprintf("storm guard of %s/%s: %v", s.NodeID, m, err))
			} else if un {
				pn.Unavailable = append(pn.Unavailable, m)
			}
		}
		sort.Strings(pn.Unavailable)
		pd.Nodes = append(pd.Nodes, pn)
	}
	return pd, ctx.Err()
}

// JobQuery selects a page of [Dispatcher.Jobs].
type JobQuery struct {
	// State keeps the jobs in this state; "" keeps every one.
	State fsm.State
	// After is the cursor: the page starts after this job id.
	After string
	// Limit is the page size. Default (0): 50; at most 500.
	Limit int
}

// JobView is one job in flight.
type JobView struct {
	JobRecord
	Spec JobSpec // its spec without its payload
	// Affinity is the affinity node of the job's turn, "" without one.
	Affinity string
	// Local: this instance follows it on one of its nodes.
	Local bool
}

// JobPage is a page of jobs in flight.
type JobPage struct {
	Jobs []JobView
	// Next is the cursor of the next page, "" on the last one.
	Next string
	// Counts are the jobs in flight by state, over every job found
	// (at most MaxJobScan).
	Counts map[fsm.State]int
	// Scanned is the number of jobs found; Truncated is set when more
	// than MaxJobScan were, and the others are left out.
	Scanned   int
	Truncated bool
	// Errors lists the stores that could not be read for this page.
	Errors []string
}

// MaxJobScan bounds the jobs [Dispatcher.Jobs] reads the records of.
const MaxJobScan = 5000

// Jobs returns a page of the jobs in flight, sorted by id, and their
// counts by state. The jobs in flight are those holding a slot on a node
// of the fleet ([ReservationStore.Jobs], one read per node), those this
// instance follows on its nodes, and those its sessions wait for; jobs
// waiting for a node that were requested through another instance are
// not found. Each is read from the [JobStore] (at most [MaxJobScan]); the
// jobs of the page also with their book and their turn's affinity. Jobs
// that are over (released or failed) are left out.
func (d *Dispatcher) Jobs(ctx context.Context, q JobQuery) (JobPage, error) {
	if q.Limit <= 0 {
		q.Limit = 50
	}
	q.Limit = min(q.Limit, 500)
	if q.State != "" && !q.State.Valid() {
		return JobPage{}, argErr("state", fmt.Sprintf("unknown state %q", q.State))
	}
	page := JobPage{Counts: map[fsm.State]int{}}
	set := map[string]bool{}
	local := map[string]bool{}
	d.mu.Lock()
	fleet := make([]string, 0, len(d.fleet))
	for id := range d.fleet {
		fleet = append(fleet, id)
	}
	for _, n := range d.nodes {
		for id := range n.jobs {
			set[id], local[id] = true, true
		}
	}
	for k := range d.pending {
		set[k.job] = true
	}
	d.mu.Unlock()
	sort.Strings(fleet)
	for _, n := range fleet {
		jobs, err := d.st.Reservations.Jobs(ctx, n)
		if err != nil {
			page.Errors = append(page.Errors, fmt.Sprintf("slots of %s: %v", n, err))
			continue
		}
		for _, j := range jobs {
			set[j] = true
		}
	}
	ids := make([]string, 0, len(set))
	for id := range set {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if len(ids) > MaxJobScan {
		ids, page.Truncated = ids[:MaxJobScan], true
	}
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return page, err
		}
		rec, err := d.st.Jobs.Job(ctx, id)
		if errors.Is(err, ErrJobNotFound) {
			continue
		}
		if err != nil {
			page.Errors = append(page.Errors, fmt.Sprintf("job %s: %v", id, err))
			continue
		}
		if rec.State.Terminal() {
			continue
		}
		page.Scanned++
		page.Counts[rec.State]++
		if q.State != "" && rec.State != q.State || id <= q.After {
			continue
		}
		if len(page.Jobs) == q.Limit {
			page.Next = page.Jobs[len(page.Jobs)-1].ID
			continue
		}
		page.Jobs = append(page.Jobs, JobView{JobRecord: rec, Local: local[id]})
	}
	for i := range page.Jobs {
		j := &page.Jobs[i]
		e, err := d.st.Jobs.Entry(ctx, j.ID)
		if err != nil {
			page.Errors = append(page.Errors, fmt.Sprintf("book of %s: %v", j.ID, err))
			continue
		}
		j.Spec = e.Spec
		j.Spec.Payload = nil
		if e.Spec.TurnID != "" {
			if j.Affinity, err = d.st.Turns.TurnAffinity(ctx, e.Spec.TurnID); err != nil {
				page.Errors = append(page.Errors, fmt.Sprintf("turn %s: %v", e.Spec.TurnID, err))
			}
		}
	}
	return page, nil
}

// InboxView is one instance's inbox: its length, the entries delivered
// and not acknowledged, and its dead-letter queue's length.
type InboxView struct {
	InstanceID string
	Alive      bool
	Len        int64 // entries in the inbox, handled or not
	Pending    int64 // delivered and not acknowledged
	// Entries are the oldest pending entries (at most the count asked).
	Entries []PendingEntry
	// DeadLetters is the DLQ's length; -1 when the store cannot say.
	DeadLetters int64
	// Error is set when the inbox could not be read.
	Error string
}

// Inboxes returns the inbox of every instance known to [Presence],
// sorted by instance id, each with up to entries of its pending entries.
// A group not created yet reads as empty.
func (d *Dispatcher) Inboxes(ctx context.Context, entries int) ([]InboxView, error) {
	ov, err := d.Overview(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]InboxView, 0, len(ov.Instances))
	for _, inst := range ov.Instances {
		iv := InboxView{InstanceID: inst.ID, Alive: inst.Alive, DeadLetters: -1}
		in := d.st.Inbox(inst.ID)
		var errs []error
		n, err := in.Len(ctx)
		errs = append(errs, err)
		iv.Len = n
		if p, err := in.Pending(ctx); !errors.Is(err, ErrNoGroup) {
			errs = append(errs, err)
			iv.Pending = p
		}
		if entries > 0 && iv.Pending > 0 {
			es, err := in.PendingIdle(ctx, 0, entries)
			if !errors.Is(err, ErrNoGroup) {
				errs = append(errs, err)
			}
			iv.Entries = es
		}
		if a, ok := in.(DeadLetterAdmin); ok {
			n, err := a.DeadLetterLen(ctx)
			errs = append(errs, err)
			iv.DeadLetters = n
		}
		if err := errors.Join(errs...); err != nil {
			iv.Error = err.Error()
		}
		out = append(out, iv)
	}
	return out, ctx.Err()
}

// DeadLetters returns up to count entries of instanceID's dead-letter
// queue, oldest first.
func (d *Dispatcher) DeadLetters(ctx context.Context, instanceID string, count int) ([]DeadLetter, error) {
	if err := CheckID("instance_id", instanceID); err != nil {
		return nil, err
	}
	return d.st.Inbox(instanceID).DeadLetters(ctx, count)
}

// RequeueDeadLetter puts the dead letter id of instanceID's dead-letter
// queue back into that instance's inbox, as a new entry with its original
// fields, and returns the new entry's id. It is [ErrNoDeadLetter] when
// the entry is gone, and [ErrNotSupported] when the inbox store is no
// [DeadLetterAdmin].
func (d *Dispatcher) RequeueDeadLetter(ctx context.Context, instanceID, id string) (string, error) {
	a, err := d.dlqAdmin(instanceID, id)
	if err != nil {
		return "", err
	}
	newID, ok, err := a.RequeueDeadLetter(ctx, id)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("scheduler: dead letter %s of %s: %w", id, instanceID, ErrNoDeadLetter)
	}
	d.log.Info("scheduler: dead letter requeued", "instance_id", instanceID, "id", id, "new_id", newID)
	return newID, nil
}

// DeleteDeadLetter deletes the dead letter id of instanceID's dead-letter
// queue. It is [ErrNoDeadLetter] when the entry is gone, and
// [ErrNotSupported] when the inbox store is no [DeadLetterAdmin].
func (d *Dispatcher) DeleteDeadLetter(ctx context.Context, instanceID, id string) error {
	a, err := d.dlqAdmin(instanceID, id)
	if err != nil {
		return err
	}
	ok, err := a.DeleteDeadLetter(ctx, id)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("scheduler: dead letter %s of %s: %w", id, instanceID, ErrNoDeadLetter)
	}
	d.log.Info("scheduler: dead letter deleted", "instance_id", instanceID, "id", id)
	return nil
}

func (d *Dispatcher) dlqAdmin(instanceID, id string) (DeadLetterAdmin, error) {
	if err := CheckID("instance_id", instanceID); err != nil {
		return nil, err
	}
	if err := checkID("id", id); err != nil {
		return nil, err
	}
	a, ok := d.st.Inbox(instanceID).(DeadLetterAdmin)
	if !ok {
		return nil, fmt.Errorf("scheduler: dead-letter queue of %s: %w", instanceID, ErrNotSupported)
	}
	return a, nil
}
