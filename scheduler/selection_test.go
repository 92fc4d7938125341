package scheduler

import (
	"math/rand/v2"
	"testing"
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
