package claim_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/claim/claimtest"
)

// partialOf is what a Viewer's cycle gives Plan for the enabled rows all:
// this node's rows, the daemons and the invalid rows in full, and a
// Partial with the counts, read through ClaimWindow's windows.
func partialOf(t *testing.T, in claim.Inputs, all []claim.Deployment, now time.Time) claim.Inputs {
	t.Helper()
	p := &claim.Partial{Bound: map[string]int{}}
	var local []claim.Deployment
	for _, d := range all {
		if d.Type != claim.TypeDeployment || d.Address == in.Self {
			local = append(local, d)
		}
		if d.Type == claim.TypeDeployment && d.ID != "" {
			if d.Address == "" {
				p.Unassigned = true
			} else {
				p.Bound[d.Address]++
			}
		}
	}
	in.Deployments, in.Partial = local, p
	w := claim.ClaimWindow(in, now)
	if w.CountUpTo > 0 {
		p.Total, p.Counted = min(len(claim.Candidates(all, w.Lost)), w.CountUpTo), true
		w = claim.ClaimWindow(in, now)
		if w.CountUpTo > 0 {
			t.Fatalf("ClaimWindow asked for a count again: %+v", w)
		}
	}
	if w.Limit > 0 {
		cands := claim.Candidates(all, w.Lost)
		p.Offset = w.Offset
		p.Candidates = cands[min(w.Offset, len(cands)):min(w.Offset+w.Limit, len(cands))]
	}
	return in
}

// decision is the part of Actions that must not depend on how the table
// was read.
type decision struct {
	Eligible, PolicyDisabled bool
	Lost, Claim, Release     []string
	Stop, Start, Missing     []string
	Restart, Problems        []string
	MissingSince             map[string]time.Time
	Imbalanced               int
}

func decisionOf(a claim.Actions) decision {
	ids := func(ds []claim.Deployment) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.ID)
		}
		return out
	}
	var problems []string
	for _, p := range a.Problems {
		problems = append(problems, p.Error())
	}
	slices.Sort(problems)
	return decision{Eligible: a.Eligible, PolicyDisabled: a.PolicyDisabled, Lost: a.Lost,
		Claim: ids(a.Claim), Release: ids(a.Release), Stop: a.Stop, Start: ids(a.Start),
		Missing: a.Missing, Restart: a.Restart, Problems: problems,
		MissingSince: a.State.MissingSince, Imbalanced: a.State.Imbalanced}
}

// TestPlanPartialMatchesFull: for random tables, memberships, policies and
// opt-ins, Plan decides the same from a Partial and the windows ClaimWindow
// asks for as from every row, for every node.
func TestPlanPartialMatchesFull(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(17, 71))
	now := t0.Add(time.Hour)
	for iter := range 400 {
		nActive := 1 + rng.IntN(6)
		var active []string
		for i := range nActive {
			active = append(active, fmt.Sprintf("n%d", i))
		}
		addrs := append([]string{"", "", "gone-a", "gone-b"}, active...)
		var all []claim.Deployment
		for i := range rng.IntN(40) {
			d := claim.Deployment{ID: fmt.Sprintf("d%02d", i), Type: claim.TypeDeployment, Enabled: true,
				Address:   addrs[rng.IntN(len(addrs))],
				CreatedAt: t0.Add(time.Duration(rng.IntN(3)) * time.Minute),
				UpdatedAt: t0.Add(time.Duration(rng.IntN(4)) * time.Minute),
				Command:   fmt.Sprintf("cmd-%d", rng.IntN(2))}
			switch rng.IntN(10) {
			case 0:
				d.Type, d.Address = claim.TypeDaemon, ""
			case 1:
				d.Type = claim.TypeDaemon // ERR_DAEMON_ADDRESS_SET when bound
			case 2:
				d.Type = "cronjob" // ERR_INVALID_TYPE
			}
			all = append(all, d)
		}
		var policy claim.Policy
		usage := map[string]claim.Usage{}
		switch rng.IntN(4) {
		case 0, 1:
			policy = claim.DeploymentCountPolicy()
		case 2:
			policy = claim.ResourceUsagePolicy(claim.DefaultWeights)
			for _, a := range active {
				if rng.IntN(4) > 0 {
					usage[a] = claim.Usage{CPUPercent: float64(rng.IntN(3))}
				}
			}
		case 3:
			policy = claim.NonePolicy()
		}
		state := claim.State{MissingSince: map[string]time.Time{}, Imbalanced: rng.IntN(3)}
		if rng.IntN(2) == 0 {
			state.MissingSince["gone-a"] = now.Add(-time.Minute)
		}
		base := claim.Inputs{
			Policy: policy, Active: active, Usage: usage,
			ProbeFailure:      claim.ProbeFailure(rng.IntN(2)),
			LostAfter:         time.Duration(rng.IntN(2)) * 30 * time.Second,
			MaxClaimsPerCycle: []int{0, 1, 2, 5}[rng.IntN(4)],
			Rebalance:         claim.Rebalance{Enabled: rng.IntN(2) == 0, Threshold: 2, Cycles: 1 + rng.IntN(2)},
			State:             state,
		}
		for _, self := range active {
			in := base
			in.Self = self
			in.Running = []string{"d00", "d03", "d07"}
			in.Deployments = all
			want := decisionOf(claim.Plan(in, now))
			got := decisionOf(claim.Plan(partialOf(t, in, all, now), now))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("iteration %d, node %s, policy %s, max claims %d: Plan from a Partial differs from Plan from every row (-full +partial):\n%s",
					iter, self, policy.Name(), base.MaxClaimsPerCycle, diff)
			}
		}
	}
}

func TestClaimWindow(t *testing.T) {
	t.Parallel()
	dep := func(id, addr string) claim.Deployment {
		return claim.Deployment{ID: id, Type: claim.TypeDeployment, Enabled: true, Address: addr, CreatedAt: t0, UpdatedAt: t0}
	}
	tests := []struct {
		name string
		in   claim.Inputs
		want claim.Window
	}{
		{"no partial", claim.Inputs{Self: "n1"}, claim.Window{}},
		{"nothing to claim", claim.Inputs{Self: "n1", Active: []string{"n1", "n2"},
			Partial: &claim.Partial{Bound: map[string]int{"n1": 3, "n2": 3}}}, claim.Window{}},
		{"first of two tied nodes: rank 0", claim.Inputs{Self: "n1", Active: []string{"n1", "n2"},
			Partial: &claim.Partial{Bound: map[string]int{}, Unassigned: true}}, claim.Window{Offset: 0, Limit: 1}},
		{"second of two tied nodes: rank 1", claim.Inputs{Self: "n2", Active: []string{"n1", "n2"},
			Partial: &claim.Partial{Bound: map[string]int{}, Unassigned: true}}, claim.Window{Offset: 1, Limit: 1}},
		{"not eligible", claim.Inputs{Self: "n1", Active: []string{"n1", "n2"},
			Partial: &claim.Partial{Bound: map[string]int{"n1": 1}, Unassigned: true}}, claim.Window{}},
		{"lost node: takeover window names it", claim.Inputs{Self: "n1", Active: []string{"n1"},
			Partial: &claim.Partial{Bound: map[string]int{"gone": 2}}}, claim.Window{Lost: []string{"gone"}, Limit: 1}},
		{"lost only after LostAfter", claim.Inputs{Self: "n1", Active: []string{"n1"}, LostAfter: time.Minute,
			Partial: &claim.Partial{Bound: map[string]int{"gone": 2}}}, claim.Window{}},
		{"none policy", claim.Inputs{Self: "n1", Policy: claim.NonePolicy(),
			Partial: &claim.Partial{Bound: map[string]int{"gone": 2}, Unassigned: true}}, claim.Window{}},
		{"several per cycle: count first", claim.Inputs{Self: "n2", Active: []string{"n1", "n2"}, MaxClaimsPerCycle: 5,
			Partial: &claim.Partial{Bound: map[string]int{"n1": 2}, Unassigned: true}}, claim.Window{CountUpTo: 12}},
		// Shares of 12: n1 (2 bound) gets 5, n2 gets 7, both capped at 5,
		// laid out in address order.
		{"several per cycle: counted, second in address order", claim.Inputs{Self: "n2", Active: []string{"n1", "n2"}, MaxClaimsPerCycle: 5,
			Partial: &claim.Partial{Bound: map[string]int{"n1": 2}, Unassigned: true, Counted: true, Total: 12}},
			claim.Window{Offset: 5, Limit: 5}},
		{"several per cycle: counted, first in address order", claim.Inputs{Self: "n1", Active: []string{"n1", "n2"}, MaxClaimsPerCycle: 5,
			Deployments: []claim.Deployment{dep("a", "n1"), dep("b", "n1")},
			Partial:     &claim.Partial{Bound: map[string]int{"n1": 2}, Unassigned: true, Counted: true, Total: 12}},
			claim.Window{Offset: 0, Limit: 5}},
		// Shares of 3: n2 rises to 2, the third goes to n1 (address order).
		{"several per cycle: few candidates", claim.Inputs{Self: "n2", Active: []string{"n1", "n2"}, MaxClaimsPerCycle: 5,
			Partial: &claim.Partial{Bound: map[string]int{"n1": 2}, Unassigned: true, Counted: true, Total: 3}},
			claim.Window{Offset: 1, Limit: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, claim.ClaimWindow(tt.in, t0)); diff != "" {
				t.Errorf("ClaimWindow mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestViewCycleStatements: over a Viewer, a cycle in which nothing changed
// reads the view and the versions of the node's rows, and nothing else;
// a changed row is read in full, and once more the next cycle; a claim
// reads one candidate.
func TestViewCycleStatements(t *testing.T) {
	t.Parallel()
	s := claimtest.NewStore()
	v := claimtest.Viewing(s)
	for i := range 50 {
		s.Put(claim.Deployment{ID: fmt.Sprintf("other-%02d", i), Type: claim.TypeDeployment, Enabled: true, Address: "n2"})
	}
	s.Put(claim.Deployment{ID: "dm", Type: claim.TypeDaemon, Enabled: true, Command: "a"})
	s.Put(claim.Deployment{ID: "free", Type: claim.TypeDeployment, Enabled: true, Command: "x"})
	if err := s.Heartbeat(context.Background(), claim.NodeUnit{Address: "n2"}); err != nil {
		t.Fatal(err)
	}
	var methods []string
	s.SetFail(func(m string) error { methods = append(methods, m); return nil })
	n := newNode(t, v, v, nil, claim.Config{Address: "n1", MembershipTTL: time.Hour})

	type step struct {
		name    string
		before  func()
		want    []string
		claimed []string
	}
	steps := []step{
		{"first cycle: all rows new, one claim", nil,
			[]string{"View", "Versions", "Get", "Candidates", "Claim"}, []string{"free"}},
		{"the claimed row changed", nil, []string{"View", "Versions", "Get"}, nil},
		{"the changed rows read once more", nil, []string{"View", "Versions", "Get"}, nil},
		{"nothing changed", nil, []string{"View", "Versions"}, nil},
		{"the daemon changed", func() { s.Put(claim.Deployment{ID: "dm", Type: claim.TypeDaemon, Enabled: true, Command: "b"}) },
			[]string{"View", "Versions", "Get"}, nil},
		{"the daemon read once more", nil, []string{"View", "Versions", "Get"}, nil},
		{"nothing changed again", nil, []string{"View", "Versions"}, nil},
		{"nothing changed still", nil, []string{"View", "Versions"}, nil},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		methods = nil
		r := n.cycle(t)
		if diff := cmp.Diff(st.want, methods); diff != "" {
			t.Errorf("%s: statements mismatch (-want +got):\n%s", st.name, diff)
		}
		if diff := cmp.Diff(st.claimed, r.Claimed); diff != "" {
			t.Errorf("%s: claimed mismatch (-want +got):\n%s", st.name, diff)
		}
	}
	if got := n.runner.Running(); !slices.Equal(got, []string{"dm", "free"}) {
		t.Errorf("running %v, want [dm free]", got)
	}
}

// TestViewSameStampUpdateSeen: a row changed twice within the clock's
// resolution keeps its version; the read a cycle after the change still
// sees the second update, and the deployment restarts with it.
func TestViewSameStampUpdateSeen(t *testing.T) {
	t.Parallel()
	s := claimtest.NewStore()
	v := claimtest.Viewing(s)
	stamp := t0.Add(time.Minute)
	s.Put(claim.Deployment{ID: "mine", Type: claim.TypeDeployment, Enabled: true, Address: "n1", Command: "a", UpdatedAt: t0})
	n := newNode(t, v, v, nil, claim.Config{Address: "n1", Policy: claim.NonePolicy()})
	n.cycle(t)
	s.Put(claim.Deployment{ID: "mine", Type: claim.TypeDeployment, Enabled: true, Address: "n1", Command: "b", UpdatedAt: stamp})
	if r := n.cycle(t); !slices.Equal(r.Restarted, []string{"mine"}) {
		t.Fatalf("cycle after the first update: restarted %v, want [mine]", r.Restarted)
	}
	// The second update, in the same instant: same version, new command.
	s.Put(claim.Deployment{ID: "mine", Type: claim.TypeDeployment, Enabled: true, Address: "n1", Command: "c", UpdatedAt: stamp})
	r := n.cycle(t)
	if !slices.Equal(r.Restarted, []string{"mine"}) {
		t.Errorf("cycle after an update with the same stamp: restarted %v, want [mine]", r.Restarted)
	}
	if got := n.runner.Starts("mine"); got != 3 {
		t.Errorf("mine started %d times, want 3 (first, after each update)", got)
	}
}

// TestSpecThroughView runs the loop-level tests of the specification's
// rules again with every loop reading through a claim.Viewer: the rules
// hold whichever way a cycle reads the table.
func TestSpecThroughView(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		run  func(*testing.T)
	}{
		{"ReleasesLostDeploymentsAndClaimsOnePerCycle", TestReleasesLostDeploymentsAndClaimsOnePerCycle},
		{"NoneNeverWritesAddress", TestNoneNeverWritesAddress},
		{"DaemonNeverClaimed", TestDaemonNeverClaimed},
		{"DaemonAddressIsNoBindingCondition", TestDaemonAddressIsNoBindingCondition},
		{"DaemonRunsOncePerNode", TestDaemonRunsOncePerNode},
		{"DeploymentBindingAndTakeoverUnchanged", TestDeploymentBindingAndTakeoverUnchanged},
		{"LostRecoveryIgnoresDaemons", TestLostRecoveryIgnoresDaemons},
		{"InvalidTypeLoggedAndSkipped", TestInvalidTypeLoggedAndSkipped},
		{"DaemonAddressLoggedAndIgnored", TestDaemonAddressLoggedAndIgnored},
		{"NoneBlocksEveryAddressWritePath", TestNoneBlocksEveryAddressWritePath},
		{"ErrClaimConflict_LoggedAtDebugAndRetried", TestErrClaimConflict_LoggedAtDebugAndRetried},
		{"ErrPolicyDisabled_LoggedOnce", TestErrPolicyDisabled_LoggedOnce},
		{"ErrDaemonMissing_Restarted", TestErrDaemonMissing_Restarted},
		{"NoneDoesNotFence", TestNoneDoesNotFence},
		{"FetchResourceUsageConcurrentlyWithTimeout", TestFetchResourceUsageConcurrentlyWithTimeout},
		{"ProbesOnlyUnderResourceUsage", TestProbesOnlyUnderResourceUsage},
		{"SelfFence", TestSelfFence},
		{"LostAfter", TestLostAfter},
		{"Rebalance", TestRebalance},
		{"RunnerRefusalLoggedOnce", TestRunnerRefusalLoggedOnce},
		{"SelfFenceWhenMembershipHangs", TestSelfFenceWhenMembershipHangs},
		// Not TestLoopRestartsChangedDeployment: it rewrites a row without
		// moving its updated_at, which a Viewer's store never does (see
		// TestViewSameStampUpdateSeen for the view's restart).
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

// TestAdmitWindow: the first waiting deployments, whatever this node
// claims, for a runner that refuses some of them to see.
func TestAdmitWindow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   claim.Inputs
		want claim.Window
	}{
		{"no partial", claim.Inputs{Self: "n1"}, claim.Window{}},
		{"nothing waits", claim.Inputs{Self: "n1", Active: []string{"n1"},
			Partial: &claim.Partial{Bound: map[string]int{"n1": 3}}}, claim.Window{}},
		{"not eligible, unassigned waiting", claim.Inputs{Self: "n1", Active: []string{"n1", "n2"},
			Partial: &claim.Partial{Bound: map[string]int{"n1": 1}, Unassigned: true}}, claim.Window{Limit: 16}},
		{"lost node", claim.Inputs{Self: "n1", Active: []string{"n1"},
			Partial: &claim.Partial{Bound: map[string]int{"gone": 2}}}, claim.Window{Lost: []string{"gone"}, Limit: 16}},
		{"none policy", claim.Inputs{Self: "n1", Policy: claim.NonePolicy(),
			Partial: &claim.Partial{Unassigned: true}}, claim.Window{}},
	}
	for _, tt := range tests {
		got := claim.AdmitWindow(tt.in, t0, 16)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: AdmitWindow (-want +got):\n%s", tt.name, diff)
		}
	}
}
