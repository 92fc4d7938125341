package claim_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/claim/claimtest"
)

// The deterministic simulation: node-units join, leave, crash, restart and
// get cut off from the database at random (seeded), under testing/synctest's
// fake clock over the in-memory store, while deployments are added and toggled. Each node runs
// its cycle every interval at its own phase. After every step the
// invariants are checked; every few thousand steps the churn pauses and the
// cluster must settle with every enabled deployment assigned to a live node.

var errPartitioned = errors.New("sim: partitioned from the database")

// partStore is one node's view of the shared store, which fails while the
// node is partitioned.
type partStore struct {
	s    *claimtest.Store
	down *bool
}

func (p partStore) check() error {
	if *p.down {
		return errPartitioned
	}
	return nil
}

func (p partStore) Deployments(ctx context.Context) ([]claim.Deployment, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	return p.s.Deployments(ctx)
}

func (p partStore) Claim(ctx context.Context, id, address string, lost []string) (bool, error) {
	if err := p.check(); err != nil {
		return false, err
	}
	return p.s.Claim(ctx, id, address, lost)
}

func (p partStore) ClaimMany(ctx context.Context, ids []string, address string, lost []string) ([]string, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	return p.s.ClaimMany(ctx, ids, address, lost)
}

func (p partStore) Release(ctx context.Context, id, address string) (bool, error) {
	if err := p.check(); err != nil {
		return false, err
	}
	return p.s.Release(ctx, id, address)
}

func (p partStore) Heartbeat(ctx context.Context, n claim.NodeUnit) error {
	if err := p.check(); err != nil {
		return err
	}
	return p.s.Heartbeat(ctx, n)
}

func (p partStore) Active(ctx context.Context, ttl time.Duration) ([]claim.NodeUnit, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	return p.s.Active(ctx, ttl)
}

func (p partStore) HeartbeatActive(ctx context.Context, n claim.NodeUnit, ttl time.Duration) ([]claim.NodeUnit, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	return p.s.HeartbeatActive(ctx, n, ttl)
}

func (p partStore) Leave(ctx context.Context, address string) error {
	if err := p.check(); err != nil {
		return err
	}
	return p.s.Leave(ctx, address)
}

// partViewStore is partStore with the Viewer of claimtest.ViewStore, whose
// views fail too while the node is partitioned.
type partViewStore struct {
	partStore
	v *claimtest.ViewStore
}

func (p partViewStore) Shares(m claim.Membership) bool {
	q, ok := m.(partViewStore)
	return ok && q.s == p.s
}

func (p partViewStore) View(ctx context.Context, self claim.NodeUnit, ttl time.Duration, endpoints bool) (claim.View, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	v, err := p.v.View(ctx, self, ttl, endpoints)
	if err != nil {
		return nil, err
	}
	return partView{v, p.partStore}, nil
}

type partView struct {
	claim.View
	p partStore
}

func (v partView) Versions(ctx context.Context, address string) ([]claim.Version, error) {
	if err := v.p.check(); err != nil {
		return nil, err
	}
	return v.View.Versions(ctx, address)
}

func (v partView) Get(ctx context.Context, ids []string) ([]claim.Deployment, error) {
	if err := v.p.check(); err != nil {
		return nil, err
	}
	return v.View.Get(ctx, ids)
}

func (v partView) CountCandidates(ctx context.Context, lost []string, limit int) (int, error) {
	if err := v.p.check(); err != nil {
		return 0, err
	}
	return v.View.CountCandidates(ctx, lost, limit)
}

func (v partView) Candidates(ctx context.Context, lost []string, offset, limit int) ([]claim.Deployment, error) {
	if err := v.p.check(); err != nil {
		return nil, err
	}
	return v.View.Candidates(ctx, lost, offset, limit)
}

type simNode struct {
	addr        string
	loop        *claim.Loop
	runner      *claimtest.Runner
	up          bool
	partitioned bool
	next        time.Time
	// healthySince is when the node last started or was healed.
	healthySince time.Time
}

type simConfig struct {
	policy            claim.Policy
	maxClaims         int
	lostAfter         time.Duration
	rebalance         bool
	selfFence         bool
	partitions        bool // cut nodes off from the database at random
	checkLostDeadline bool // nothing stays bound to a node lost > LostAfter + 2 cycles
	view              bool // the store is a claim.Viewer
}

type sim struct {
	t     *testing.T
	cfg   simConfig
	rng   *rand.Rand
	store *claimtest.Store
	nodes []*simNode
	// inactiveSince records when an address stopped being active.
	inactiveSince map[string]time.Time
	initial       map[string]string
	writes        int
	nextDep       int
	steps         int
	ttl           time.Duration
	settleSeen    time.Duration
	trace         []traceEntry // the latest cycles, printed on failure
	zombieFree    time.Time
	// deadlineChecks counts the lost-deadline checks made.
	deadlineChecks int
	// enabledAt is when a deployment was last enabled or disabled.
	enabledAt map[string]time.Time
}

type traceEntry struct {
	addr string
	r    claim.Report
}

// fail reports a broken invariant with the latest cycles and node states.
func (s *sim) fail(format string, args ...any) {
	s.t.Helper()
	for _, e := range s.trace {
		s.t.Logf("%v %s: active %d, eligible %v, claimed %v, conflicts %v, released %v, fenced %v, err %v",
			e.r.Start.Sub(t0), e.addr, e.r.Active, e.r.Eligible, e.r.Claimed, e.r.Conflicts, e.r.Released, e.r.Fenced, e.r.Err)
	}
	for _, n := range s.nodes {
		if n.up {
			s.t.Logf("%s: up, partitioned %v, healthy since %v", n.addr, n.partitioned, n.healthySince.Sub(t0))
		}
	}
	s.t.Fatalf("step %d: "+format, append([]any{s.steps}, args...)...)
}

func newSim(t *testing.T, seed uint64, cfg simConfig) *sim {
	s := &sim{t: t, cfg: cfg, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		store: claimtest.NewStore(), inactiveSince: map[string]time.Time{}, enabledAt: map[string]time.Time{}, ttl: 3 * interval}
	for range 40 {
		s.addDeployment()
	}
	for i := range 3 {
		s.store.Put(claim.Deployment{ID: fmt.Sprintf("daemon-%d", i), Type: claim.TypeDaemon, Enabled: true})
	}
	s.initial = s.store.Addresses()
	s.store.SetOnWrite(func(id, from, to string) { s.writes++ })
	for range 3 {
		s.join()
	}
	return s
}

func (s *sim) addDeployment() {
	s.store.Put(claim.Deployment{ID: fmt.Sprintf("dep-%03d", s.nextDep), Type: claim.TypeDeployment, Enabled: true,
		CreatedAt: time.Now(), UpdatedAt: time.Now()})
	s.nextDep++
}

// start (re)starts node n as a fresh process: new loop, new runner.
func (s *sim) start(n *simNode) {
	n.runner = claimtest.NewRunner()
	n.up, n.partitioned = true, false
	n.healthySince = time.Now()
	var st interface {
		claim.Store
		claim.Membership
	} = partStore{s: s.store, down: &n.partitioned}
	if s.cfg.view {
		st = partViewStore{partStore{s: s.store, down: &n.partitioned}, claimtest.Viewing(s.store)}
	}
	loop, err := claim.New(st, st, n.runner, nil, claim.Config{
		Address: n.addr, Policy: s.cfg.policy, Interval: interval, MembershipTTL: s.ttl,
		LostAfter: s.cfg.lostAfter, MaxClaimsPerCycle: s.cfg.maxClaims, SelfFence: s.cfg.selfFence,
		Rebalance: claim.Rebalance{Enabled: s.cfg.rebalance},
	})
	if err != nil {
		s.t.Fatal(err)
	}
	n.loop = loop
	n.next = time.Now().Add(time.Duration(s.rng.Int64N(int64(interval))))
}

func (s *sim) join() {
	// Restart a crashed node half of the time, else a new address.
	var down []*simNode
	for _, n := range s.nodes {
		if !n.up {
			down = append(down, n)
		}
	}
	if len(down) > 0 && s.rng.IntN(2) == 0 {
		s.start(down[s.rng.IntN(len(down))])
		return
	}
	n := &simNode{addr: fmt.Sprintf("node-%02d", len(s.nodes))}
	s.nodes = append(s.nodes, n)
	s.start(n)
}

func (s *sim) upNodes() []*simNode {
	var out []*simNode
	for _, n := range s.nodes {
		if n.up {
			out = append(out, n)
		}
	}
	return out
}

// churn applies one random event with some probability and reports
// whether it did.
func (s *sim) churn() bool {
	up := s.upNodes()
	switch r := s.rng.IntN(1000); {
	case r < 6 && len(up) < 8:
		s.join()
	case r < 10 && len(up) > 1: // crash: the process and its children die
		n := up[s.rng.IntN(len(up))]
		n.up = false
	case r < 13 && len(up) > 1: // clean leave, as Run does on shutdown
		n := up[s.rng.IntN(len(up))]
		for _, id := range n.runner.Running() {
			if !isDaemon(id) {
				_ = n.runner.Stop(context.Background(), id)
			}
		}
		_ = s.store.Leave(context.Background(), n.addr)
		n.up = false
	case r < 16 && s.cfg.partitions:
		n := up[s.rng.IntN(len(up))]
		n.partitioned = !n.partitioned
		n.healthySince = time.Now()
	case r < 20 && s.nextDep < 80:
		s.addDeployment()
	case r < 24:
		id := fmt.Sprintf("dep-%03d", s.rng.IntN(s.nextDep))
		d, _ := s.store.Get(id)
		s.store.SetEnabled(id, !d.Enabled)
		s.enabledAt[id] = time.Now()
	default:
		return false
	}
	return true
}

func isDaemon(id string) bool { return len(id) > 7 && id[:7] == "daemon-" }

// step runs the cycle of the up node due first.
func (s *sim) step() {
	up := s.upNodes()
	if len(up) == 0 {
		s.join()
		return
	}
	n := slices.MinFunc(up, func(a, b *simNode) int { return a.next.Compare(b.next) })
	if d := time.Until(n.next); d > 0 {
		time.Sleep(d)
	}
	r, err := n.loop.Cycle(context.Background())
	if len(s.trace) == 40 {
		s.trace = s.trace[1:]
	}
	s.trace = append(s.trace, traceEntry{n.addr, r})
	if err != nil && !errors.Is(err, errPartitioned) {
		s.fail("%s: Cycle: %v", n.addr, err)
	}
	n.next = n.next.Add(interval)
	s.steps++
}

// check verifies the invariants that hold after every step.
func (s *sim) check() {
	now := time.Now()
	active, _ := s.store.Active(context.Background(), s.ttl)
	isActive := map[string]bool{}
	for _, n := range active {
		isActive[n.Address] = true
		delete(s.inactiveSince, n.Address)
	}
	for _, n := range s.nodes {
		if _, ok := s.inactiveSince[n.addr]; !ok && !isActive[n.addr] {
			s.inactiveSince[n.addr] = now
		}
	}
	// Every node that acts has been healthy since healthySince: a node that
	// joins or heals needs LostAfter of its own before it takes over its
	// share.
	healthy := 0
	var healthySince time.Time
	for _, n := range s.upNodes() {
		if !n.partitioned {
			if n.healthySince.After(healthySince) {
				healthySince = n.healthySince
			}
			healthy++
		}
	}
	// A node in the membership that does not act (it crashed, or cannot
	// reach the database) delays its fair share until its membership
	// expires: the lost deadline counts from when there was no such node.
	zombie := false
	for _, n := range s.nodes {
		if isActive[n.addr] && (!n.up || n.partitioned) {
			zombie = true
		}
	}
	if zombie {
		s.zombieFree = time.Time{}
	} else if s.zombieFree.IsZero() {
		s.zombieFree = now
	}
	running := map[string][]string{}
	for _, n := range s.upNodes() {
		for _, id := range n.runner.Running() {
			running[id] = append(running[id], n.addr)
		}
	}
	for _, d := range s.store.All() {
		if d.Type == claim.TypeDaemon && d.Address != "" {
			s.fail("daemon %s bound to %q", d.ID, d.Address)
		}
		if claim.IsNone(s.cfg.policy) && d.Address != s.initial[d.ID] {
			s.fail("under none, address of %s changed from %q to %q", d.ID, s.initial[d.ID], d.Address)
		}
		if d.Type == claim.TypeDeployment && len(running[d.ID]) > 1 && s.cfg.selfFence {
			s.fail("deployment %s runs on %v at once", d.ID, running[d.ID])
		}
		if s.cfg.checkLostDeadline && d.Enabled && d.Address != "" && !isActive[d.Address] && healthy > 0 && !zombie {
			since := s.inactiveSince[d.Address]
			if healthySince.After(since) {
				since = healthySince
			}
			if s.zombieFree.After(since) {
				since = s.zombieFree
			}
			if s.enabledAt[d.ID].After(since) {
				since = s.enabledAt[d.ID]
			}
			s.deadlineChecks++
			if limit := s.cfg.lostAfter + 2*interval; now.Sub(since) > limit {
				s.fail("%s still bound to %s, lost for %v (> LostAfter + 2 cycles = %v)", d.ID, d.Address, now.Sub(since), limit)
			}
		}
	}
	if claim.IsNone(s.cfg.policy) && s.writes != 0 {
		s.fail("%d address writes under none", s.writes)
	}
}

// settle stops the churn, heals partitions and runs cycles until every
// enabled deployment is bound to an up node and runs there (or, under none,
// until the runners match the bindings).
func (s *sim) settle() {
	for _, n := range s.upNodes() {
		if n.partitioned {
			n.partitioned = false
			n.healthySince = time.Now()
		}
	}
	start := time.Now()
	limit := s.ttl + s.cfg.lostAfter + 120*interval
	for time.Since(start) <= limit {
		s.step()
		s.check()
		if s.settled() {
			s.settleSeen = max(s.settleSeen, time.Since(start))
			return
		}
	}
	s.fail("not settled %v after the churn stopped", limit)
}

func (s *sim) settled() bool {
	up := map[string]*simNode{}
	for _, n := range s.upNodes() {
		up[n.addr] = n
	}
	for _, d := range s.store.All() {
		if !d.Enabled {
			continue
		}
		if d.Type == claim.TypeDaemon {
			for _, n := range up {
				if !slices.Contains(n.runner.Running(), d.ID) {
					return false
				}
			}
			continue
		}
		if claim.IsNone(s.cfg.policy) {
			if n, ok := up[d.Address]; ok && !slices.Contains(n.runner.Running(), d.ID) {
				return false
			}
			continue
		}
		n, ok := up[d.Address]
		if !ok || !slices.Contains(n.runner.Running(), d.ID) {
			return false
		}
	}
	return true
}

func runSim(t *testing.T, cfg simConfig) {
	const cycles, settleEvery = 10000, 2500
	for _, seed := range []uint64{1, 2} {
		// Each seed runs in its own bubble: its clock starts at t0.
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				s := newSim(t, seed, cfg)
				for s.steps < cycles {
					if s.churn() {
						s.check()
					}
					s.step()
					s.check()
					if s.steps%settleEvery == 0 || s.steps >= cycles {
						s.settle()
					}
				}
				t.Logf("seed %d: %d cycles, %d nodes ever, %d deployments, %d address writes, %d lost-deadline checks, slowest settle %v",
					seed, s.steps, len(s.nodes), s.nextDep, s.writes, s.deadlineChecks, s.settleSeen)
			})
		})
	}
}

// viewModes runs a simulation reading every row and reading through a
// claim.Viewer.
var viewModes = []struct {
	name string
	view bool
}{{"full", false}, {"view", true}}

func TestSimulationSpecDefaults(t *testing.T) {
	t.Parallel()
	for _, m := range viewModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			runSim(t, simConfig{policy: claim.DeploymentCountPolicy(), view: m.view})
		})
	}
}

func TestSimulationOptIns(t *testing.T) {
	t.Parallel()
	for _, m := range viewModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			runSim(t, simConfig{policy: claim.DeploymentCountPolicy(), maxClaims: 1000, lostAfter: 2 * interval,
				rebalance: true, selfFence: true, partitions: true, checkLostDeadline: true, view: m.view})
		})
	}
}

func TestSimulationNone(t *testing.T) {
	t.Parallel()
	for _, m := range viewModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			runSim(t, simConfig{policy: claim.NonePolicy(), partitions: true, view: m.view})
		})
	}
}
