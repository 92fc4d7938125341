package claim_test

import (
	"fmt"

	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/claim/claimtest"
)

// The test cases of the RFC "NodeUnit Deployment 失联与抢占调度" (000), one
// test each, named after them.

// t0 is the start of every testing/synctest bubble, where the tests that
// run the loop begin: time.Now() there is t0 until the test sleeps.
var t0 = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func dep(id, address string) claim.Deployment {
	return claim.Deployment{ID: id, Type: claim.TypeDeployment, Enabled: true, Address: address, CreatedAt: t0, UpdatedAt: t0}
}

func daemon(id string) claim.Deployment {
	return claim.Deployment{ID: id, Type: claim.TypeDaemon, Enabled: true, CreatedAt: t0, UpdatedAt: t0}
}

func TestIdentifiesLostAddressesWhenNodeUnitDisappears(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		deps   []claim.Deployment
		active []string
		want   []string
	}{
		{"spec case", []claim.Deployment{dep("d1", "addr1"), dep("d2", "addr2"), dep("d3", "addr3")}, []string{"addr1", "addr3"}, []string{"addr2"}},
		{"none lost", []claim.Deployment{dep("d1", "addr1")}, []string{"addr1"}, nil},
		{"unassigned is not lost", []claim.Deployment{dep("d1", "")}, nil, nil},
		{"repeated and sorted", []claim.Deployment{dep("d1", "z"), dep("d2", "a"), dep("d3", "z")}, nil, []string{"a", "z"}},
		{"daemon address never lost (R9)", []claim.Deployment{{ID: "dm", Type: claim.TypeDaemon, Enabled: true, Address: "gone"}}, nil, nil},
		{"no active nodes", []claim.Deployment{dep("d1", "a")}, nil, []string{"a"}},
	}
	for _, tt := range tests {
		got := claim.LostAddresses(tt.deps, tt.active)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: LostAddresses mismatch (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestCountsDeploymentsPerAddressIgnoringEmptyAddress(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		deps   []claim.Deployment
		active []string
		want   map[string]int
	}{
		{
			"spec case",
			[]claim.Deployment{dep("d1", "addr1"), dep("d2", "addr1"), dep("d3", "addr2"), dep("d4", "")},
			[]string{"addr1", "addr2", "addr3"},
			map[string]int{"addr1": 2, "addr2": 1, "addr3": 0},
		},
		{
			"daemons and inactive addresses excluded",
			[]claim.Deployment{dep("d1", "addr1"), daemon("dm"), dep("d2", "gone")},
			[]string{"addr1"},
			map[string]int{"addr1": 1},
		},
		{"no active nodes", []claim.Deployment{dep("d1", "a")}, nil, map[string]int{}},
	}
	for _, tt := range tests {
		got := claim.DeploymentCounts(tt.deps, tt.active)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: DeploymentCounts mismatch (-want +got):\n%s", tt.name, diff)
		}
	}
}

func snaps(key string, values map[string]float64) map[string][]claim.MetricSnapshot {
	out := map[string][]claim.MetricSnapshot{}
	for a, v := range values {
		out[a] = []claim.MetricSnapshot{{Key: key, Value: v}}
	}
	return out
}

func TestDeploymentCountPolicyPicksNodeUnitsWithMinimumDeployment(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		nodes []string
		snaps map[string][]claim.MetricSnapshot
		want  []string
	}{
		{"spec case: ties", []string{"addr1", "addr2", "addr3"}, snaps("deployment_count", map[string]float64{"addr1": 2, "addr2": 1, "addr3": 1}), []string{"addr2", "addr3"}},
		{"single minimum", []string{"a", "b"}, snaps("deployment_count", map[string]float64{"a": 0, "b": 3}), []string{"a"}},
		{"missing snapshot counts 0", []string{"a", "b"}, snaps("deployment_count", map[string]float64{"a": 1}), []string{"b"}},
		{"other metric ignored", []string{"a", "b"}, snaps("resource_usage", map[string]float64{"a": 9}), []string{"a", "b"}},
		{"no nodes", nil, nil, nil},
	}
	p := claim.DeploymentCountPolicy()
	for _, tt := range tests {
		got := p.PickEligible(tt.nodes, tt.snaps)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: PickEligible mismatch (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestResourceUsagePolicyPicksNodeUnitsWithMinimumWeightedScore(t *testing.T) {
	t.Parallel()
	p := claim.ResourceUsagePolicy(claim.DefaultWeights)
	got := p.PickEligible([]string{"addr1", "addr2"}, snaps("resource_usage", map[string]float64{"addr1": 45.2, "addr2": 22.1}))
	if diff := cmp.Diff([]string{"addr2"}, got); diff != "" {
		t.Errorf("PickEligible mismatch (-want +got):\n%s", diff)
	}

	// The score itself, through the provider: CPU 30% and 1024 MB is
	// 30*0.5 + 1*0.5 = 15.5.
	scores := []struct {
		name string
		w    claim.Weights
		u    claim.Usage
		want float64
	}{
		{"spec example", claim.DefaultWeights, claim.Usage{CPUPercent: 30, MemoryMB: 1024}, 15.5},
		{"idle", claim.DefaultWeights, claim.Usage{}, 0},
		{"cpu only weight", claim.Weights{CPU: 1}, claim.Usage{CPUPercent: 40, MemoryMB: 4096}, 40},
		{"memory only weight", claim.Weights{Memory: 2}, claim.Usage{CPUPercent: 40, MemoryMB: 512}, 1},
	}
	for _, tt := range scores {
		prov := claim.ResourceUsageProvider{Weights: tt.w}
		got := prov.Evaluate("n", claim.MetricContext{ResourceUsage: map[string]claim.Usage{"n": tt.u}})
		if want := (claim.MetricSnapshot{Key: "resource_usage", Value: tt.want}); got != want {
			t.Errorf("%s: Evaluate = %+v, want %+v", tt.name, got, want)
		}
	}
}

func TestMissingResourceUsageReturnsZero(t *testing.T) {
	t.Parallel()
	prov := claim.ResourceUsageProvider{Weights: claim.DefaultWeights}
	c := claim.MetricContext{ResourceUsage: map[string]claim.Usage{"other": {CPUPercent: 90, MemoryMB: 9000}}}
	if got, want := prov.Evaluate("n", c), (claim.MetricSnapshot{Key: "resource_usage", Value: 0}); got != want {
		t.Errorf("Evaluate(no reading) = %+v, want %+v", got, want)
	}
	if got, want := prov.Evaluate("n", claim.MetricContext{}), (claim.MetricSnapshot{Key: "resource_usage", Value: 0}); got != want {
		t.Errorf("Evaluate(nil usage) = %+v, want %+v", got, want)
	}
}

func TestBuildSnapshots(t *testing.T) {
	t.Parallel()
	c := claim.MetricContext{
		DeploymentCounts: map[string]int{"a": 2, "b": 0},
		ResourceUsage:    map[string]claim.Usage{"a": {CPUPercent: 10, MemoryMB: 2048}},
	}
	tests := []struct {
		policy claim.Policy
		want   map[string][]claim.MetricSnapshot
	}{
		{claim.DeploymentCountPolicy(), map[string][]claim.MetricSnapshot{"a": {{"deployment_count", 2}}, "b": {{"deployment_count", 0}}}},
		{claim.ResourceUsagePolicy(claim.DefaultWeights), map[string][]claim.MetricSnapshot{"a": {{"resource_usage", 6}}, "b": {{"resource_usage", 0}}}},
		{claim.NonePolicy(), map[string][]claim.MetricSnapshot{}},
	}
	for _, tt := range tests {
		got := claim.Snapshots(tt.policy, []string{"a", "b"}, c)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: Snapshots mismatch (-want +got):\n%s", tt.policy.Name(), diff)
		}
	}
}

func TestPicksDeploymentCandidatesInDeterministicOrder(t *testing.T) {
	t.Parallel()
	day := func(d int) time.Time { return time.Date(2025, 1, d, 0, 0, 0, 0, time.UTC) }
	mk := func(id, addr string, updated, created int) claim.Deployment {
		return claim.Deployment{ID: id, Type: claim.TypeDeployment, Enabled: true, Address: addr, UpdatedAt: day(updated), CreatedAt: day(created)}
	}
	tests := []struct {
		name string
		deps []claim.Deployment
		lost []string
		want []string
	}{
		{"spec case: earlier updated_at first", []claim.Deployment{mk("d1", "", 2, 1), mk("d2", "", 1, 1)}, nil, []string{"d2", "d1"}},
		{"created_at breaks ties", []claim.Deployment{mk("d1", "", 1, 2), mk("d2", "", 1, 1)}, nil, []string{"d2", "d1"}},
		{"id breaks ties", []claim.Deployment{mk("b", "", 1, 1), mk("a", "", 1, 1), mk("c", "", 1, 1)}, nil, []string{"a", "b", "c"}},
		{"lost-node deployments first", []claim.Deployment{mk("free", "", 1, 1), mk("taken", "gone", 3, 3)}, []string{"gone"}, []string{"taken", "free"}},
		{"bound to live node, daemon and disabled excluded", []claim.Deployment{
			mk("live", "alive", 1, 1),
			{ID: "dm", Type: claim.TypeDaemon, Enabled: true},
			{ID: "off", Type: claim.TypeDeployment},
			mk("free", "", 1, 1),
		}, []string{"gone"}, []string{"free"}},
	}
	for _, tt := range tests {
		var got []string
		for _, d := range claim.Candidates(tt.deps, tt.lost) {
			got = append(got, d.ID)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: Candidates mismatch (-want +got):\n%s", tt.name, diff)
		}
	}
	// And the claim a single eligible node makes follows that order.
	act := claim.Plan(claim.Inputs{Self: "n1", Active: []string{"n1"}, Deployments: []claim.Deployment{mk("d1", "", 2, 1), mk("d2", "", 1, 1)}}, day(5))
	if len(act.Claim) != 1 || act.Claim[0].ID != "d2" {
		t.Errorf("Plan claims %v, want [d2]", ids(act.Claim))
	}
}

func ids(ds []claim.Deployment) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

// TestReleasesLostDeploymentsAndClaimsOnePerCycle: the integration
// case of 000. A lost node's deployments are taken over one claim per cycle
// (the specification's rule), each by a single-row conditional update: the
// ones not yet taken stay bound to the lost node, never blanked in bulk.
func TestReleasesLostDeploymentsAndClaimsOnePerCycle(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := claimtest.NewStore()
		for i := range 3 {
			s.Put(at(fmt.Sprintf("x%d", i), "gone", i))
		}
		s.Put(at("u", "", 9))
		n := newNode(t, s, s, nil, claim.Config{Address: "n1"})
		want := []map[string]string{
			{"x0": "n1", "x1": "gone", "x2": "gone", "u": ""},
			{"x0": "n1", "x1": "n1", "x2": "gone", "u": ""},
			{"x0": "n1", "x1": "n1", "x2": "n1", "u": ""},
			{"x0": "n1", "x1": "n1", "x2": "n1", "u": "n1"},
		}
		for i, w := range want {
			r := n.cycle(t)
			if len(r.Claimed) != 1 {
				t.Errorf("cycle %d claimed %v, want exactly one", i, r.Claimed)
			}
			if diff := cmp.Diff(w, s.Addresses()); diff != "" {
				t.Errorf("cycle %d addresses (-want +got):\n%s", i, diff)
			}
			time.Sleep(interval)
		}
	})
}
