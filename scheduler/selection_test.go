package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/affinity"
)

func TestSelectNode(t *testing.T) {
	fleet := []NodeSnapshot{
		{NodeID: "a", Online: true, Pools: []string{"p"}, Models: []string{"m"}, MaxConcurrency: 4, Running: 3},
		{NodeID: "b", Online: true, Pools: []string{"p"}, Models: []string{"m"}, MaxConcurrency: 4, Running: 0},
		{NodeID: "c", Online: false, Pools: []string{"p"}, Models: []string{"m"}, MaxConcurrency: 4},
		{NodeID: "d", Online: true, Pools: []string{"q"}, Models: []string{"m"}, MaxConcurrency: 4},
		{NodeID: "e", Online: true, Pools: []string{"p"}, MaxConcurrency: 4},
	}
	spec := JobSpec{TurnID: "t", Pool: "p", Model: "m"}
	set := func(ids ...string) map[string]bool {
		m := map[string]bool{}
		for _, id := range ids {
			m[id] = true
		}
		return m
	}
	for _, tc := range []struct {
		name        string
		skip, tried map[string]bool
		turnNode    string
		strategy    string
		want        []string // any of these
		affinity    bool
	}{
		{"pool, model and presence filter", nil, nil, "", SelectRandom, []string{"a", "b"}, false},
		{"the turn's node", nil, nil, "a", SelectRandom, []string{"a"}, true},
		{"the turn's node offline", nil, nil, "c", SelectRandom, []string{"a", "b"}, false},
		{"the turn's node outside the pool", nil, nil, "d", SelectRandom, []string{"a", "b"}, false},
		{"the turn's node skipped", set("a"), nil, "a", SelectRandom, []string{"b"}, false},
		{"tried nodes passed over", nil, set("b"), "", SelectRandom, []string{"a"}, false},
		{"tried nodes taken when none else", nil, set("a", "b"), "", SelectRandom, []string{"a", "b"}, false},
		{"two choices take the less loaded", nil, nil, "", SelectTwoChoices, []string{"b"}, false},
		{"nothing eligible", set("a", "b"), nil, "", SelectRandom, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range uint64(20) {
				d, ok := selectNode(fleet, spec, tc.skip, tc.tried, tc.turnNode, tc.strategy, rand.New(rand.NewPCG(seed, 1)))
				if ok != (tc.want != nil) {
					t.Fatalf("seed %d: ok = %v, want %v", seed, ok, tc.want != nil)
				}
				if !ok {
					continue
				}
				found := false
				for _, w := range tc.want {
					found = found || d.NodeID == w
				}
				if !found || d.Affinity != tc.affinity {
					t.Fatalf("seed %d: %+v, want one of %v with affinity %v", seed, d, tc.want, tc.affinity)
				}
			}
		})
	}
	// The same fleet in another order and the same seed: the same node.
	rev := []NodeSnapshot{fleet[4], fleet[3], fleet[2], fleet[1], fleet[0]}
	for seed := range uint64(20) {
		x, _ := selectNode(fleet, spec, nil, nil, "", SelectRandom, rand.New(rand.NewPCG(seed, 1)))
		y, _ := selectNode(rev, spec, nil, nil, "", SelectRandom, rand.New(rand.NewPCG(seed, 1)))
		if x != y {
			t.Fatalf("seed %d: %+v for one order, %+v for another", seed, x, y)
		}
	}
}

// fleetOf is n nodes online, node i in pool p<i%pools> with model m.
func fleetOf(n, pools int) []NodeSnapshot {
	out := make([]NodeSnapshot, n)
	for i := range out {
		out[i] = NodeSnapshot{NodeID: fmt.Sprintf("n%05d", i), Online: true, InstanceID: "x",
			Pools: []string{fmt.Sprintf("p%d", i%pools)}, Models: []string{"m"}, MaxConcurrency: 4}
	}
	return out
}

// TestSelectionIndex: the candidates of a (pool, model) are those of the
// fleet view, kept while the view does not change who is eligible, and
// built again after a node goes offline, attaches or changes its pools in
// a refresh of the view.
func TestSelectionIndex(t *testing.T) {
	st, err := NewMemStores(Config{InstanceID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDispatcher(st, Config{InstanceID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	fleet := fleetOf(6, 2)
	d.applyFleet(fleet)
	spec := JobSpec{Pool: "p0", Model: "m"}
	cands := func() []string {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.candidates(spec)
	}
	first := cands()
	if diff := cmp.Diff([]string{"n00000", "n00002", "n00004"}, first); diff != "" {
		t.Fatalf("candidates of p0 (-want +got):\n%s", diff)
	}
	// A refresh that changes no node's eligibility keeps the list: the
	// same backing array, not a copy.
	fleet[1].Running = 3
	d.applyFleet(fleet)
	if again := cands(); &again[0] != &first[0] {
		t.Error("a refresh that changed only a load built the candidates again")
	}
	d.mu.Lock()
	d.markOffline("n00002")
	d.mu.Unlock()
	if diff := cmp.Diff([]string{"n00000", "n00004"}, cands()); diff != "" {
		t.Errorf("after n00002 went offline (-want +got):\n%s", diff)
	}
	fleet[3].Pools = []string{"p0"}
	d.applyFleet(fleet)
	if diff := cmp.Diff([]string{"n00000", "n00002", "n00003", "n00004"}, cands()); diff != "" {
		t.Errorf("after n00003 joined p0 in a refresh (-want +got):\n%s", diff)
	}
	// Selection over the index follows the same rules as over the fleet.
	for seed := range uint64(20) {
		x, _ := selectNode(fleet, spec, map[string]bool{"n00000": true}, nil, "", SelectRandom, rand.New(rand.NewPCG(seed, 1)))
		y, _, _ := d.chooseSeeded(spec, map[string]bool{"n00000": true}, seed)
		if x != y {
			t.Fatalf("seed %d: %+v over the fleet, %+v over the index", seed, x, y)
		}
	}
}

// chooseSeeded is choose with a random source of its own.
func (d *Dispatcher) chooseSeeded(spec JobSpec, skip map[string]bool, seed uint64) (affinity.Decision, []string, bool) {
	d.rndMu.Lock()
	d.rnd = rand.New(rand.NewPCG(seed, 1))
	d.rndMu.Unlock()
	return d.choose(spec, skip, nil, "")
}

// BenchmarkSelection is the Dispatcher's choice of a node for a job over
// fleets of 100 and 10,000 nodes (10 pools; the candidates of a pool are
// built once, as between two changes of the fleet): the time a job costs
// does not grow with the fleet. ratio-10k/100 is the per-job time at
// 10,000 nodes over that at 100, in the same run; the goal is at most 1.2.
func BenchmarkSelection(b *testing.B) {
	per := map[int]float64{}
	for _, n := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			st, _ := NewMemStores(Config{InstanceID: "a"})
			d, _ := NewDispatcher(st, Config{InstanceID: "a", Dispatch: DispatchConfig{Selection: SelectTwoChoices}})
			d.applyFleet(fleetOf(n, 10))
			spec := JobSpec{Pool: "p3", Model: "m", TurnID: "t"}
			d.choose(spec, nil, nil, "") // builds the pool's candidates
			for b.Loop() {
				if _, _, ok := d.choose(spec, nil, nil, ""); !ok {
					b.Fatal("no node")
				}
			}
			per[n] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if n > 100 && per[100] > 0 {
				b.ReportMetric(per[n]/per[100], "ratio-10k/100")
			}
		})
	}
	// The baseline: the same choice made by scanning a copy of the whole
	// fleet for each job, as selection did before the index.
	b.Run("nodes=10000/scan", func(b *testing.B) {
		fleet := fleetOf(10_000, 10)
		rnd := rand.New(rand.NewPCG(1, 1))
		spec := JobSpec{Pool: "p3", Model: "m", TurnID: "t"}
		for b.Loop() {
			view := slices.Clone(fleet)
			if _, ok := selectNode(view, spec, nil, nil, "", SelectTwoChoices, rnd); !ok {
				b.Fatal("no node")
			}
		}
		if per[10_000] > 0 {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/per[10_000], "ratio-scan/index")
		}
	})
}
