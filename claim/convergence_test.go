package claim_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/claim/claimtest"
)

// rounds runs node-units in lockstep: in each round every node reads the
// same snapshot (membership and deployments as they were when the round
// began, the worst case for races) and then claims, in a seeded random
// order, against the shared store, whose conditional updates settle the
// races.
type rounds struct {
	store  *claimtest.Store
	snap   []claim.Deployment
	nodes  []claim.NodeUnit
	loops  []*claim.Loop
	rng    *rand.Rand
	claims int // successful claims so far
	fights int // lost races so far
}

// snapshotStore serves the round's snapshot and writes to the shared store.
type snapshotStore struct {
	*claimtest.Store
	r *rounds
}

func (s snapshotStore) Deployments(context.Context) ([]claim.Deployment, error) { return s.r.snap, nil }

func (s snapshotStore) HeartbeatActive(context.Context, claim.NodeUnit, time.Duration) ([]claim.NodeUnit, error) {
	return s.r.nodes, nil
}

// firstOnly is the rule before rank spreading: every eligible node goes for
// the first candidate.
type firstOnly struct {
	claim.Policy
	self string
}

func (p firstOnly) PickEligible(nodes []string, s map[string][]claim.MetricSnapshot) []string {
	if slices.Contains(p.Policy.PickEligible(nodes, s), p.self) {
		return []string{p.self}
	}
	return nil
}

func newRounds(tb testing.TB, nodes, deployments, maxClaims int, naive bool) *rounds {
	r := &rounds{store: claimtest.NewStore(), rng: rand.New(rand.NewPCG(1, 2))}
	for i := range deployments {
		r.store.Put(claim.Deployment{ID: fmt.Sprintf("d%05d", i), Type: claim.TypeDeployment, Enabled: true, CreatedAt: t0, UpdatedAt: t0})
	}
	st := snapshotStore{r.store, r}
	for i := range nodes {
		addr := fmt.Sprintf("n%03d", i)
		r.nodes = append(r.nodes, claim.NodeUnit{Address: addr})
		var p claim.Policy = claim.DeploymentCountPolicy()
		if naive {
			p = firstOnly{p, addr}
		}
		loop, err := claim.New(st, st, claimtest.NewRunner(), nil, claim.Config{Address: addr, Policy: p, MaxClaimsPerCycle: maxClaims})
		if err != nil {
			tb.Fatal(err)
		}
		r.loops = append(r.loops, loop)
	}
	return r
}

// round runs one cycle of every node and reports how many deployments are
// still unassigned.
func (r *rounds) round(tb testing.TB) int {
	r.snap, _ = r.store.Deployments(context.Background())
	for _, i := range r.rng.Perm(len(r.loops)) {
		rep, err := r.loops[i].Cycle(context.Background())
		if err != nil {
			tb.Fatal(err)
		}
		r.claims += len(rep.Claimed)
		r.fights += len(rep.Conflicts)
	}
	left := 0
	for _, d := range r.store.All() {
		if d.Address == "" {
			left++
		}
	}
	return left
}

// spread returns max - min of the deployment counts over the nodes.
func (r *rounds) spread() int {
	all := r.store.All()
	var addrs []string
	for _, n := range r.nodes {
		addrs = append(addrs, n.Address)
	}
	counts := claim.DeploymentCounts(all, addrs)
	lo, hi := len(all), 0
	for _, c := range counts {
		lo, hi = min(lo, c), max(hi, c)
	}
	return hi - lo
}

// TestRankSpreadPlacesKPerCycle: under the specification's one claim per
// node per cycle, k tied nodes place k deployments per cycle (no node loses
// a race), so n deployments take n/k cycles.
func TestRankSpreadPlacesKPerCycle(t *testing.T) {
	t.Parallel()
	const k, n = 10, 200
	r := newRounds(t, k, n, 1, false)
	cycles := 0
	for left := n; left > 0; cycles++ {
		left = r.round(t)
		if want := n - k*(cycles+1); left != max(want, 0) {
			t.Fatalf("after cycle %d: %d unassigned, want %d", cycles+1, left, max(want, 0))
		}
	}
	if r.fights != 0 {
		t.Errorf("%d lost races, want 0", r.fights)
	}
	if s := r.spread(); s != 0 {
		t.Errorf("spread %d, want 0", s)
	}
}

// TestMaxClaimsFullAssignmentWithin5Cycles: 100 nodes and 10,000 unassigned
// deployments reach full assignment with spread <= 1 within 5 cycles under
// MaxClaimsPerCycle.
func TestMaxClaimsFullAssignmentWithin5Cycles(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("10,000 deployments; the same check runs in BenchmarkFullAssignment")
	}
	r := newRounds(t, 100, 10000, 200, false)
	cycles := 0
	for left := 10000; left > 0; cycles++ {
		if cycles == 5 {
			t.Fatalf("%d deployments unassigned after 5 cycles", left)
		}
		left = r.round(t)
	}
	if s := r.spread(); s > 1 {
		t.Errorf("spread %d after full assignment, want <= 1", s)
	}
	t.Logf("full assignment in %d cycles, %d lost races", cycles, r.fights)
}

// BenchmarkFullAssignment measures cycles to full assignment of 10,000
// deployments over 100 node-units: the specification's rule (one claim per
// node per cycle, with rank spreading), MaxClaimsPerCycle, and the rule
// without rank spreading as the baseline (every tied node goes for the same
// first candidate; run for 20 cycles and extrapolated).
func BenchmarkFullAssignment(b *testing.B) {
	const nodes, deployments = 100, 10000
	cases := []struct {
		name      string
		maxClaims int
		naive     bool
		maxCycles int
	}{
		{"one-claim-rank-spread", 1, false, 0},
		{"max-claims-200", 200, false, 5},
		{"baseline-first-candidate", 1, true, 20},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				r := newRounds(b, nodes, deployments, c.maxClaims, c.naive)
				cycles, left := 0, deployments
				start := time.Now()
				for left > 0 {
					if c.naive && cycles == c.maxCycles {
						break
					}
					left = r.round(b)
					cycles++
				}
				elapsed := time.Since(start)
				placed := deployments - left
				perCycle := float64(placed) / float64(cycles)
				b.ReportMetric(perCycle, "placed/cycle")
				b.ReportMetric(float64(r.fights)/float64(cycles), "lost-races/cycle")
				b.ReportMetric(float64(elapsed.Nanoseconds())/float64(cycles*nodes), "ns/node-cycle")
				if c.naive {
					b.ReportMetric(float64(deployments)/perCycle, "cycles-to-full")
					continue
				}
				b.ReportMetric(float64(cycles), "cycles-to-full")
				b.ReportMetric(float64(r.spread()), "spread")
				if c.maxCycles > 0 && (cycles > c.maxCycles || r.spread() > 1) {
					b.Fatalf("%d cycles, spread %d; want <= %d cycles, spread <= 1", cycles, r.spread(), c.maxCycles)
				}
			}
		})
	}
}

// BenchmarkPlan is the pure planning cost of one cycle with 10,000 enabled
// deployments (half assigned) over 100 active node-units.
func BenchmarkPlan(b *testing.B) {
	var active []string
	for i := range 100 {
		active = append(active, fmt.Sprintf("n%03d", i))
	}
	var deps []claim.Deployment
	for i := range 10000 {
		addr := ""
		if i%2 == 0 {
			addr = active[i%100]
		}
		deps = append(deps, claim.Deployment{ID: fmt.Sprintf("d%05d", i), Type: claim.TypeDeployment, Enabled: true, Address: addr,
			CreatedAt: t0, UpdatedAt: t0.Add(time.Duration(i%977) * time.Second)})
	}
	var running []string
	for _, d := range deps {
		if d.Address == "n001" {
			running = append(running, d.ID)
		}
	}
	in := claim.Inputs{Self: "n001", Active: active, Deployments: deps, Running: running}
	for b.Loop() {
		claim.Plan(in, t0)
	}
}
