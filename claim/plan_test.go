package claim_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/claim"
)

// view is the part of Actions a test compares.
type view struct {
	Disabled   bool
	Eligible   bool
	Lost       []string
	Claim      []string
	Release    []string
	Stop       []string
	Start      []string
	Missing    []string
	Restart    []string
	Codes      []string
	Imbalanced int
	Held       string
}

func viewOf(a claim.Actions) view {
	v := view{Disabled: a.PolicyDisabled, Eligible: a.Eligible, Lost: a.Lost, Claim: ids(a.Claim),
		Release: ids(a.Release), Stop: a.Stop, Start: ids(a.Start), Missing: a.Missing, Restart: a.Restart, Imbalanced: a.State.Imbalanced, Held: a.RebalanceHeld}
	for _, p := range a.Problems {
		var e *claim.Error
		if errors.As(p, &e) {
			v.Codes = append(v.Codes, fmt.Sprintf("%s %s", e.Code, e.ID))
		}
	}
	return v
}

// at returns a deployment whose candidate order is its minute.
func at(id, address string, minute int) claim.Deployment {
	d := dep(id, address)
	d.UpdatedAt = t0.Add(time.Duration(minute) * time.Minute)
	return d
}

func unassigned(n int) []claim.Deployment {
	var out []claim.Deployment
	for i := range n {
		out = append(out, at(fmt.Sprintf("u%d", i), "", i))
	}
	return out
}

func TestPlan(t *testing.T) {
	t.Parallel()
	now := t0.Add(time.Hour)
	tests := []struct {
		name string
		in   claim.Inputs
		want view
	}{
		{
			name: "single node claims the first candidate",
			in:   claim.Inputs{Self: "n1", Active: []string{"n1"}, Deployments: unassigned(3)},
			want: view{Eligible: true, Claim: []string{"u0"}},
		},
		{
			name: "self counts as active even when missing from the list",
			in:   claim.Inputs{Self: "n1", Deployments: unassigned(1)},
			want: view{Eligible: true, Claim: []string{"u0"}},
		},
		{
			name: "tied nodes spread by rank: second of two takes the second candidate",
			in:   claim.Inputs{Self: "n2", Active: []string{"n2", "n1"}, Deployments: unassigned(3)},
			want: view{Eligible: true, Claim: []string{"u1"}},
		},
		{
			name: "rank beyond the candidates claims nothing",
			in:   claim.Inputs{Self: "n3", Active: []string{"n1", "n2", "n3"}, Deployments: unassigned(2)},
			want: view{Eligible: true},
		},
		{
			name: "above the minimum claims nothing",
			in: claim.Inputs{Self: "n1", Active: []string{"n1", "n2"},
				Deployments: append(unassigned(2), at("b", "n1", 0))},
			want: view{Start: []string{"b"}},
		},
		{
			name: "rank counts only eligible nodes",
			in: claim.Inputs{Self: "n3", Active: []string{"n1", "n2", "n3"},
				Deployments: append(unassigned(2), at("b", "n1", 0))},
			want: view{Eligible: true, Claim: []string{"u1"}},
		},
		{
			name: "lost node's deployment first, with the lost address",
			in: claim.Inputs{Self: "n1", Active: []string{"n1"},
				Deployments: []claim.Deployment{at("u", "", 0), at("x", "gone", 9)}},
			want: view{Eligible: true, Lost: []string{"gone"}, Claim: []string{"x"}},
		},
		{
			name: "LostAfter not yet elapsed: unassigned claimed, lost node waits",
			in: claim.Inputs{Self: "n1", Active: []string{"n1"}, LostAfter: time.Minute,
				Deployments: []claim.Deployment{at("u", "", 0), at("x", "gone", 0)},
				State:       claim.State{MissingSince: map[string]time.Time{"gone": now.Add(-59 * time.Second)}}},
			want: view{Eligible: true, Claim: []string{"u"}},
		},
		{
			name: "LostAfter elapsed",
			in: claim.Inputs{Self: "n1", Active: []string{"n1"}, LostAfter: time.Minute,
				Deployments: []claim.Deployment{at("u", "", 0), at("x", "gone", 9)},
				State:       claim.State{MissingSince: map[string]time.Time{"gone": now.Add(-time.Minute)}}},
			want: view{Eligible: true, Lost: []string{"gone"}, Claim: []string{"x"}},
		},
		{
			name: "fair share: three empty nodes, seven candidates, second node",
			in:   claim.Inputs{Self: "n2", Active: []string{"n1", "n2", "n3"}, MaxClaimsPerCycle: 100, Deployments: unassigned(7)},
			want: view{Eligible: true, Claim: []string{"u3", "u4"}},
		},
		{
			name: "fair share capped by MaxClaimsPerCycle",
			in:   claim.Inputs{Self: "n2", Active: []string{"n1", "n2", "n3"}, MaxClaimsPerCycle: 2, Deployments: unassigned(7)},
			want: view{Eligible: true, Claim: []string{"u2", "u3"}},
		},
		{
			name: "fair share fills the least loaded first",
			in: claim.Inputs{Self: "n1", Active: []string{"n1", "n2"}, MaxClaimsPerCycle: 10,
				Deployments: append(unassigned(3), at("a", "n2", 0), at("b", "n2", 0), at("c", "n2", 0))},
			want: view{Eligible: true, Claim: []string{"u0", "u1", "u2"}, Start: nil},
		},
		{
			name: "fair share: a node at its share claims nothing",
			in: claim.Inputs{Self: "n2", Active: []string{"n1", "n2"}, MaxClaimsPerCycle: 10,
				Deployments: append(unassigned(1), at("a", "n2", 0))},
			want: view{Start: []string{"a"}},
		},
		{
			name: "none: no claims even with candidates and lost nodes",
			in: claim.Inputs{Self: "n1", Policy: claim.NonePolicy(), Active: []string{"n1"},
				Deployments: []claim.Deployment{at("u", "", 0), at("x", "gone", 0), at("mine", "n1", 0)},
				Rebalance:   claim.Rebalance{Enabled: true}},
			want: view{Disabled: true, Start: []string{"mine"}},
		},
		{
			name: "reconcile: start bound and daemons, stop the rest",
			in: claim.Inputs{Self: "n1", Active: []string{"n1", "n2"},
				Deployments: []claim.Deployment{at("mine", "n1", 0), at("theirs", "n2", 0), daemon("dm"), at("run", "n1", 0), at("x", "n2", 1)},
				Running:     []string{"run", "theirs", "gone"}},
			want: view{Eligible: true, Start: []string{"dm", "mine"}, Stop: []string{"gone", "theirs"}},
		},
		{
			name: "daemon that was to run and does not is ERR_DAEMON_MISSING",
			in: claim.Inputs{Self: "n1", Active: []string{"n1"},
				Deployments: []claim.Deployment{daemon("dm"), daemon("new")},
				State:       claim.State{Desired: map[string]bool{"dm": true}}},
			want: view{Eligible: true, Start: []string{"dm", "new"}, Missing: []string{"dm"}, Codes: []string{"ERR_DAEMON_MISSING dm"}},
		},
		{
			name: "rebalance: imbalance counted, not yet released",
			in: claim.Inputs{Self: "n1", Active: []string{"n1", "n2"}, Rebalance: claim.Rebalance{Enabled: true},
				Deployments: []claim.Deployment{at("a", "n1", 0), at("b", "n1", 1)}, Running: []string{"a", "b"}},
			want: view{Imbalanced: 1},
		},
		{
			name: "rebalance: after Cycles, the newest deployment is stopped and released",
			in: claim.Inputs{Self: "n1", Active: []string{"n1", "n2"}, Rebalance: claim.Rebalance{Enabled: true, Cycles: 3},
				Deployments: []claim.Deployment{at("a", "n1", 0), at("b", "n1", 1)}, Running: []string{"a", "b"},
				State: claim.State{Imbalanced: 2}},
			want: view{Release: []string{"b"}, Stop: []string{"b"}},
		},
		{
			name: "rebalance: below the threshold resets the count",
			in: claim.Inputs{Self: "n1", Active: []string{"n1", "n2"}, Rebalance: claim.Rebalance{Enabled: true},
				Deployments: []claim.Deployment{at("a", "n1", 0), at("b", "n1", 1), at("c", "n2", 0)}, Running: []string{"a", "b"},
				State: claim.State{Imbalanced: 2}},
		},
		{
			name: "rebalance waits while candidates exist, and says so",
			in: claim.Inputs{Self: "n1", Active: []string{"n1", "n2"}, Rebalance: claim.Rebalance{Enabled: true, Cycles: 1},
				Deployments: []claim.Deployment{at("a", "n1", 0), at("b", "n1", 1), at("u", "", 0)}, Running: []string{"a", "b"}},
			want: view{Held: "1 deployment waits to be claimed (u)"},
		},
		{
			name: "rebalance held by many candidates names the first three",
			in: claim.Inputs{Self: "n1", Active: []string{"n1", "n2"}, Rebalance: claim.Rebalance{Enabled: true, Cycles: 1},
				Deployments: append(unassigned(5), at("a", "n1", 0), at("b", "n1", 1)), Running: []string{"a", "b"}},
			want: view{Held: "5 deployments wait to be claimed (u0, u1, u2, ...)"},
		},
		{
			name: "rebalance waits while a node-unit is missing, and says so",
			in: claim.Inputs{Self: "n1", Active: []string{"n1", "n2"}, Rebalance: claim.Rebalance{Enabled: true, Cycles: 1}, LostAfter: time.Minute,
				Deployments: []claim.Deployment{at("a", "n1", 0), at("b", "n1", 1), at("c", "n1", 2), at("x", "gone", 0)}, Running: []string{"a", "b", "c"},
				State: claim.State{MissingSince: map[string]time.Time{"gone": now}}},
			want: view{Held: "deployments are bound to node-units that are not active: gone"},
		},
		{
			name: "rebalance held by uncounted candidates of a Partial says so without a number",
			in: claim.Inputs{Self: "n1", Active: []string{"n1", "n2"}, Rebalance: claim.Rebalance{Enabled: true, Cycles: 1},
				Deployments: []claim.Deployment{at("a", "n1", 0), at("b", "n1", 1)}, Running: []string{"a", "b"},
				Partial: &claim.Partial{Bound: map[string]int{"n1": 2}, Unassigned: true}},
			want: view{Held: "deployments wait to be claimed"},
		},
		{
			name: "a balanced node with candidates waiting holds nothing",
			in: claim.Inputs{Self: "n1", Active: []string{"n1", "n2"}, Rebalance: claim.Rebalance{Enabled: true, Cycles: 1},
				Deployments: []claim.Deployment{at("a", "n1", 0), at("b", "n2", 1), at("u", "", 0)}, Running: []string{"a"}},
			want: view{Eligible: true, Claim: []string{"u"}},
		},
		{
			name: "rebalance off by default",
			in: claim.Inputs{Self: "n1", Active: []string{"n1", "n2"},
				Deployments: []claim.Deployment{at("a", "n1", 0), at("b", "n1", 1), at("c", "n1", 2)}, Running: []string{"a", "b", "c"},
				State: claim.State{Imbalanced: 99}},
		},
		{
			name: "invalid records reported and skipped",
			in: claim.Inputs{Self: "n1", Active: []string{"n1"},
				Deployments: []claim.Deployment{{ID: "bad", Type: "cron", Enabled: true}, {ID: "dm", Type: claim.TypeDaemon, Enabled: true, Address: "n9"}}},
			want: view{Eligible: true, Start: []string{"dm"}, Codes: []string{"ERR_INVALID_TYPE bad", "ERR_DAEMON_ADDRESS_SET dm"}},
		},
	}
	for _, tt := range tests {
		got := viewOf(claim.Plan(tt.in, now))
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: Plan mismatch (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestPlanTracksMissingSince(t *testing.T) {
	t.Parallel()
	now := t0.Add(time.Hour)
	in := claim.Inputs{Self: "n1", Active: []string{"n1"}, LostAfter: time.Minute,
		Deployments: []claim.Deployment{at("x", "gone", 0), at("y", "back", 0)},
		State:       claim.State{MissingSince: map[string]time.Time{"gone": now.Add(-time.Second), "old": now.Add(-time.Hour)}}}
	got := claim.Plan(in, now).State.MissingSince
	want := map[string]time.Time{"gone": now.Add(-time.Second), "back": now}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MissingSince mismatch (-want +got):\n%s", diff)
	}
}

// TestPlanTiedNodesPlaceKPerCycle: k tied nodes, planning on the same
// snapshot, claim k distinct deployments (the spec's one-per-node rule with
// rank spreading), and never the same one twice.
func TestPlanTiedNodesPlaceKPerCycle(t *testing.T) {
	t.Parallel()
	for _, k := range []int{1, 2, 5, 20} {
		for _, n := range []int{0, 1, k - 1, k, 3 * k} {
			var active []string
			for i := range k {
				active = append(active, fmt.Sprintf("n%02d", i))
			}
			deps := unassigned(n)
			claimed := map[string]string{}
			for _, self := range active {
				act := claim.Plan(claim.Inputs{Self: self, Active: active, Deployments: deps}, t0)
				if len(act.Claim) > 1 {
					t.Errorf("k=%d n=%d: %s claims %d deployments, want at most 1", k, n, self, len(act.Claim))
				}
				for _, d := range act.Claim {
					if prev, ok := claimed[d.ID]; ok {
						t.Errorf("k=%d n=%d: %s and %s both claim %s", k, n, prev, self, d.ID)
					}
					claimed[d.ID] = self
				}
			}
			if want := min(k, n); len(claimed) != want {
				t.Errorf("k=%d n=%d: %d deployments claimed in one cycle, want %d", k, n, len(claimed), want)
			}
		}
	}
}

func TestFairShares(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		counts map[string]int
		nodes  []string
		n      int
		want   map[string]int
	}{
		{"even", map[string]int{}, []string{"a", "b"}, 4, map[string]int{"a": 2, "b": 2}},
		{"remainder to lower addresses", map[string]int{}, []string{"c", "b", "a"}, 4, map[string]int{"a": 2, "b": 1, "c": 1}},
		{"least loaded first", map[string]int{"a": 5, "b": 1}, []string{"a", "b"}, 3, map[string]int{"b": 3}},
		{"level up then split", map[string]int{"a": 5, "b": 1}, []string{"a", "b"}, 6, map[string]int{"a": 1, "b": 5}},
		{"nothing to place", map[string]int{"a": 1}, []string{"a"}, 0, map[string]int{}},
		{"no nodes", nil, nil, 3, map[string]int{}},
	}
	for _, tt := range tests {
		got := claim.FairShares(tt.counts, tt.nodes, tt.n)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: FairShares mismatch (-want +got):\n%s", tt.name, diff)
		}
	}
}

// FuzzFairShares checks the properties of the water-filling: every
// deployment is placed, and afterwards the nodes that received any are
// within 1 of each other and no higher than any node + 1.
func FuzzFairShares(f *testing.F) {
	f.Add([]byte{0, 0, 0}, 7)
	f.Add([]byte{5, 1}, 6)
	f.Add([]byte{9, 0, 3, 3}, 1)
	f.Add([]byte{}, 3)
	f.Fuzz(func(t *testing.T, raw []byte, n int) {
		if n < 0 || n > 10000 || len(raw) > 64 {
			return
		}
		counts := map[string]int{}
		var nodes []string
		for i, c := range raw {
			a := fmt.Sprintf("n%02d", i)
			nodes = append(nodes, a)
			counts[a] = int(c)
		}
		got := claim.FairShares(counts, nodes, n)
		if len(nodes) == 0 {
			if len(got) != 0 {
				t.Fatalf("no nodes: shares %v", got)
			}
			return
		}
		sum, lo := 0, int(^uint(0)>>1)
		for _, a := range nodes {
			if got[a] < 0 {
				t.Fatalf("negative share %d for %s", got[a], a)
			}
			sum += got[a]
			lo = min(lo, counts[a]+got[a])
		}
		if sum != n {
			t.Fatalf("shares sum to %d, want %d (counts %v, shares %v)", sum, n, counts, got)
		}
		for _, a := range nodes {
			if got[a] > 0 && counts[a]+got[a] > lo+1 {
				t.Fatalf("node %s ends at %d, more than the lowest %d + 1 (counts %v, shares %v)", a, counts[a]+got[a], lo, counts, got)
			}
		}
	})
}

// TestPlanFairShareOneCycle: with MaxClaimsPerCycle, nodes planning on the
// same snapshot cover every candidate, without overlap, in one cycle.
func TestPlanFairShareOneCycle(t *testing.T) {
	t.Parallel()
	active := []string{"a", "b", "c", "d"}
	deps := append(unassigned(10), at("x1", "a", 0), at("x2", "a", 0), at("x3", "a", 0), at("l1", "gone", 0))
	counts := map[string]int{"a": 3}
	seen := map[string]bool{}
	for _, self := range active {
		act := claim.Plan(claim.Inputs{Self: self, Active: active, Deployments: deps, MaxClaimsPerCycle: 1000}, t0)
		for _, d := range act.Claim {
			if seen[d.ID] {
				t.Errorf("%s claims %s, already claimed by another node", self, d.ID)
			}
			seen[d.ID] = true
			counts[self]++
		}
	}
	if len(seen) != 11 {
		t.Errorf("%d of 11 candidates claimed in one cycle", len(seen))
	}
	var got []int
	for _, a := range active {
		got = append(got, counts[a])
	}
	if slices.Max(got)-slices.Min(got) > 1 {
		t.Errorf("counts after one cycle %v, want spread <= 1", got)
	}
}

func TestPlanRestartsChangedDeployment(t *testing.T) {
	t.Parallel()
	base := at("mine", "n1", 0)
	base.PackageName, base.PackageVersion, base.Command = "pkg", "1.0.0", "run"
	base.Args, base.Env = []string{"-a"}, map[string]string{"K": "V"}
	tests := []struct {
		name   string
		change func(d *claim.Deployment)
		want   bool
	}{
		{"nothing", func(d *claim.Deployment) {}, false},
		{"updated_at only", func(d *claim.Deployment) { d.UpdatedAt = d.UpdatedAt.Add(time.Hour) }, false},
		{"version", func(d *claim.Deployment) { d.PackageVersion = "1.0.1" }, true},
		{"package", func(d *claim.Deployment) { d.PackageName = "other" }, true},
		{"command", func(d *claim.Deployment) { d.Command = "run2" }, true},
		{"args", func(d *claim.Deployment) { d.Args = []string{"-a", "-b"} }, true},
		{"args split differently", func(d *claim.Deployment) { d.Args = []string{"-", "a"} }, true},
		{"env value", func(d *claim.Deployment) { d.Env = map[string]string{"K": "W"} }, true},
		{"env added", func(d *claim.Deployment) { d.Env = map[string]string{"K": "V", "L": ""} }, true},
	}
	for _, tt := range tests {
		first := claim.Plan(claim.Inputs{Self: "n1", Deployments: []claim.Deployment{base}, Running: []string{"mine"}}, t0)
		changed := base
		changed.Args = slices.Clone(base.Args)
		tt.change(&changed)
		got := claim.Plan(claim.Inputs{Self: "n1", Deployments: []claim.Deployment{changed}, Running: []string{"mine"}, State: first.State}, t0)
		want := view{Eligible: true}
		if tt.want {
			want = view{Eligible: true, Stop: []string{"mine"}, Start: []string{"mine"}, Restart: []string{"mine"}}
		}
		if diff := cmp.Diff(want, viewOf(got)); diff != "" {
			t.Errorf("%s: Plan mismatch (-want +got):\n%s", tt.name, diff)
		}
	}
	// A fresh loop does not know what runs, so it restarts nothing.
	act := claim.Plan(claim.Inputs{Self: "n1", Deployments: []claim.Deployment{base}, Running: []string{"mine"}}, t0)
	if len(act.Restart) != 0 {
		t.Errorf("fresh state restarts %v, want nothing", act.Restart)
	}
}

// FuzzPlan checks Plan's safety properties on arbitrary inputs: it claims
// only enabled deployments of type deployment that are unassigned or bound
// to an address it reports lost, never more than MaxClaimsPerCycle (one by
// default), nothing under none, and starts only daemons and deployments
// bound to Self, each id at most once.
func FuzzPlan(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7}, uint8(1), uint8(0), false)
	f.Add([]byte{9, 9, 9, 1, 1, 1, 2, 2, 2, 3}, uint8(3), uint8(5), false)
	f.Add([]byte{4, 4, 4, 4}, uint8(0), uint8(1), true)
	f.Fuzz(func(t *testing.T, raw []byte, selfIdx, maxClaims uint8, none bool) {
		if len(raw) > 200 {
			return
		}
		addrs := []string{"", "n0", "n1", "n2", "gone"}
		types := []claim.Type{claim.TypeDeployment, claim.TypeDaemon, "bogus"}
		var deps []claim.Deployment
		for i, b := range raw {
			deps = append(deps, claim.Deployment{
				ID:        fmt.Sprintf("d%d", int(b>>4)%8+8*(i%3)),
				Type:      types[int(b>>2)%len(types)],
				Enabled:   b&1 == 0,
				Address:   addrs[int(b)%len(addrs)],
				UpdatedAt: t0.Add(time.Duration(b) * time.Second),
			})
		}
		self := []string{"n0", "n1", "n2"}[int(selfIdx)%3]
		in := claim.Inputs{Self: self, Active: []string{"n0", "n1", "n2"}, Deployments: deps, MaxClaimsPerCycle: int(maxClaims)}
		if none {
			in.Policy = claim.NonePolicy()
		}
		act := claim.Plan(in, t0)
		limit := max(int(maxClaims), 1)
		if none {
			limit = 0
		}
		if len(act.Claim) > limit {
			t.Fatalf("%d claims, limit %d", len(act.Claim), limit)
		}
		lost := map[string]bool{}
		for _, a := range act.Lost {
			lost[a] = true
		}
		seen := map[string]bool{}
		for _, d := range act.Claim {
			if d.Type != claim.TypeDeployment || !d.Enabled || (d.Address != "" && !lost[d.Address]) || seen[d.ID] {
				t.Fatalf("claims %+v (lost %v)", d, act.Lost)
			}
			seen[d.ID] = true
		}
		started := map[string]bool{}
		for _, d := range act.Start {
			if started[d.ID] || !(d.Type == claim.TypeDaemon || d.Address == self) || !d.Type.Valid() {
				t.Fatalf("starts %+v", d)
			}
			started[d.ID] = true
		}
		if none && (len(act.Release) != 0 || len(act.Lost) != 0) {
			t.Fatalf("under none: release %v, lost %v", ids(act.Release), act.Lost)
		}
	})
}

func TestSanitize(t *testing.T) {
	t.Parallel()
	in := []claim.Deployment{
		dep("a", ""),
		{ID: "dm", Type: claim.TypeDaemon, Enabled: true, Address: "n1"},
		{ID: "x", Type: "cron", Enabled: true},
		{Type: claim.TypeDeployment},
		dep("a", "n2"),
	}
	valid, problems := claim.Sanitize(in)
	var gotIDs []string
	for _, d := range valid {
		gotIDs = append(gotIDs, d.ID+"@"+d.Address)
	}
	if diff := cmp.Diff([]string{"a@", "dm@"}, gotIDs); diff != "" {
		t.Errorf("valid (-want +got):\n%s", diff)
	}
	var msgs []string
	for _, p := range problems {
		msgs = append(msgs, p.Error())
	}
	want := []string{
		`claim: ERR_DAEMON_ADDRESS_SET: deployment "dm": daemon has address "n1"; the address is ignored`,
		`claim: ERR_INVALID_TYPE: deployment "x": type "cron" is neither "daemon" nor "deployment"`,
		`claim: empty id`,
		`claim: deployment "a": listed more than once; the first is used`,
	}
	if diff := cmp.Diff(want, msgs); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	if in[1].Address != "n1" {
		t.Errorf("Sanitize modified its input")
	}
	clean := []claim.Deployment{dep("a", ""), daemon("b")}
	if got, problems := claim.Sanitize(clean); len(problems) != 0 || &got[0] != &clean[0] {
		t.Errorf("clean list: problems %v, copied %v; want none and the input itself", problems, &got[0] != &clean[0])
	}
}
