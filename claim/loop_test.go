package claim_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/claim/claimtest"
)

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	s := claimtest.NewStore()
	r := claimtest.NewRunner()
	tests := []struct {
		name  string
		store claim.Store
		probe claim.UsageProbe
		cfg   claim.Config
		want  string // the ConfigError's Name, "" for success
	}{
		{"defaults", s, nil, claim.Config{Address: "n1"}, ""},
		{"no address", s, nil, claim.Config{}, "Config.Address"},
		{"no store", nil, nil, claim.Config{Address: "n1"}, "store"},
		{"negative interval", s, nil, claim.Config{Address: "n1", Interval: -1}, "Config.Interval"},
		{"ttl not above interval", s, nil, claim.Config{Address: "n1", Interval: time.Second, MembershipTTL: time.Second}, "Config.MembershipTTL"},
		{"negative LostAfter", s, nil, claim.Config{Address: "n1", LostAfter: -time.Second}, "Config.LostAfter"},
		{"negative MaxClaimsPerCycle", s, nil, claim.Config{Address: "n1", MaxClaimsPerCycle: -1}, "Config.MaxClaimsPerCycle"},
		{"rebalance threshold 1", s, nil, claim.Config{Address: "n1", Rebalance: claim.Rebalance{Enabled: true, Threshold: 1}}, "Config.Rebalance.Threshold"},
		{"self-fence with a short ttl", s, nil, claim.Config{Address: "n1", SelfFence: true, Interval: time.Second, MembershipTTL: 2 * time.Second}, "Config.MembershipTTL"},
		{"self-fence with the default ttl", s, nil, claim.Config{Address: "n1", SelfFence: true}, ""},
		{"unknown probe failure mode", s, nil, claim.Config{Address: "n1", ProbeFailure: 7}, "Config.ProbeFailure"},
		{"resource_usage without probe", s, nil, claim.Config{Address: "n1", Policy: claim.ResourceUsagePolicy(claim.DefaultWeights)}, "probe"},
		{"resource_usage with probe", s, claimtest.NewProbe(nil), claim.Config{Address: "n1", Policy: claim.ResourceUsagePolicy(claim.DefaultWeights)}, ""},
	}
	for _, tt := range tests {
		_, err := claim.New(tt.store, s, r, tt.probe, tt.cfg)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: New: %v", tt.name, err)
			}
			continue
		}
		var ce *claim.ConfigError
		if !errors.As(err, &ce) || ce.Name != tt.want || !errors.Is(err, claim.ErrInvalidConfig) {
			t.Errorf("%s: New error = %v, want a *ConfigError naming %s", tt.name, err, tt.want)
		}
	}
}

func TestCycleStatements(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		members func(*claimtest.Store) claim.Membership
		deps    []claim.Deployment
		want    int
	}{
		{"claim with HeartbeatActive: 3", func(s *claimtest.Store) claim.Membership { return s }, unassigned(5), 3},
		{"nothing to claim: 2", func(s *claimtest.Store) claim.Membership { return s }, nil, 2},
		{"claim without HeartbeatActive: 4", func(s *claimtest.Store) claim.Membership { return membershipOnly{s} }, unassigned(5), 4},
		{"lost node, one takeover: 3", func(s *claimtest.Store) claim.Membership { return s }, []claim.Deployment{at("x", "gone", 0)}, 3},
	}
	for _, tt := range tests {
		s := claimtest.NewStore()
		for _, d := range tt.deps {
			s.Put(d)
		}
		n := newNode(t, s, tt.members(s), nil, claim.Config{Address: "n1"})
		before := s.Statements()
		n.cycle(t)
		if got := s.Statements() - before; got != tt.want {
			t.Errorf("%s: %d statements, want %d", tt.name, got, tt.want)
		}
	}
}

func TestMaxClaimsPerCycleOneStatement(t *testing.T) {
	t.Parallel()
	s := claimtest.NewStore()
	for _, d := range unassigned(10) {
		s.Put(d)
	}
	n := newNode(t, s, s, nil, claim.Config{Address: "n1", MaxClaimsPerCycle: 4})
	before := s.Statements()
	r := n.cycle(t)
	if diff := cmp.Diff([]string{"u0", "u1", "u2", "u3"}, r.Claimed); diff != "" {
		t.Errorf("claimed (-want +got):\n%s", diff)
	}
	if got := s.Statements() - before; got != 3 {
		t.Errorf("%d statements, want 3", got)
	}
	if diff := cmp.Diff([]string{"u0", "u1", "u2", "u3"}, n.runner.Running()); diff != "" {
		t.Errorf("running (-want +got):\n%s", diff)
	}
}

// TestFetchResourceUsageConcurrentlyWithTimeout: every active node
// is probed at once under the timeout; a failed probe counts as 0 (or, with
// the opt-in, leaves the node out).
func TestFetchResourceUsageConcurrentlyWithTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		mode         claim.ProbeFailure
		wantEligible bool
	}{
		// The probes of n2 and n3 time out (together: the cycle takes one
		// timeout, not two). By default they count as 0, the minimum, so
		// n1 (score 10) is not eligible; with the opt-in they are left out
		// and n1 is the minimum.
		{"failed probe counts as zero (default)", claim.ProbeFailureZero, false},
		{"failed probe not eligible (opt-in)", claim.ProbeFailureNotEligible, true},
	}
	for _, tt := range tests {
		synctest.Test(t, func(t *testing.T) {
			s := claimtest.NewStore()
			s.Put(at("u", "", 0))
			for _, a := range []string{"n2", "n3"} {
				if err := s.Heartbeat(context.Background(), claim.NodeUnit{Address: a}); err != nil {
					t.Fatal(err)
				}
			}
			probe := claimtest.NewProbe(map[string]claim.Usage{"n1": {CPUPercent: 20}, "n2": {}, "n3": {}})
			probe.Block = func(a string) bool { return a != "n1" }
			n := newNode(t, s, s, probe, claim.Config{Address: "n1", Policy: claim.ResourceUsagePolicy(claim.DefaultWeights),
				ProbeTimeout: time.Second, ProbeFailure: tt.mode})
			start := time.Now()
			r := n.cycle(t)
			if got := time.Since(start); got != time.Second {
				t.Errorf("%s: cycle took %v, want the probe timeout 1s", tt.name, got)
			}
			if r.ProbeFailures != 2 || probe.Calls() != 3 {
				t.Errorf("%s: probe failures %d of %d calls, want 2 of 3", tt.name, r.ProbeFailures, probe.Calls())
			}
			if r.Eligible != tt.wantEligible {
				t.Errorf("%s: eligible = %v, want %v", tt.name, r.Eligible, tt.wantEligible)
			}
		})
	}
}

// TestProbesRunConcurrently: three probes of 600ms each fit in a 1s
// timeout only when they run at once.
func TestProbesRunConcurrently(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := claimtest.NewStore()
		for _, a := range []string{"n2", "n3"} {
			if err := s.Heartbeat(context.Background(), claim.NodeUnit{Address: a}); err != nil {
				t.Fatal(err)
			}
		}
		probe := claimtest.NewProbe(map[string]claim.Usage{"n1": {CPUPercent: 1}, "n2": {CPUPercent: 2}, "n3": {CPUPercent: 3}})
		probe.Delay = func(string) time.Duration { return 600 * time.Millisecond }
		n := newNode(t, s, s, probe, claim.Config{Address: "n1", Policy: claim.ResourceUsagePolicy(claim.DefaultWeights), ProbeTimeout: time.Second})
		start := time.Now()
		r := n.cycle(t)
		if got := time.Since(start); got != 600*time.Millisecond {
			t.Errorf("cycle took %v, want 600ms (the probes at once)", got)
		}
		if r.ProbeFailures != 0 || !r.Eligible {
			t.Errorf("probe failures %d, eligible %v; want 0 and eligible (n1 scores lowest)", r.ProbeFailures, r.Eligible)
		}
	})
}

func TestProbesOnlyUnderResourceUsage(t *testing.T) {
	t.Parallel()
	for _, p := range []claim.Policy{claim.DeploymentCountPolicy(), claim.NonePolicy()} {
		s := claimtest.NewStore()
		probe := claimtest.NewProbe(nil)
		n := newNode(t, s, s, probe, claim.Config{Address: "n1", Policy: p})
		n.cycle(t)
		if probe.Calls() != 0 {
			t.Errorf("%s: %d probes, want 0", p.Name(), probe.Calls())
		}
	}
}

func TestSelfFence(t *testing.T) {
	t.Parallel()
	for _, fence := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			s := claimtest.NewStore()
			s.Put(at("mine", "n1", 0))
			s.Put(daemon("dm"))
			n := newNode(t, s, s, nil, claim.Config{Address: "n1", SelfFence: fence, Interval: interval, MembershipTTL: 4 * interval})
			n.cycle(t)
			down := errors.New("database unreachable")
			s.SetFail(func(string) error { return down })
			time.Sleep(interval)
			if r, err := n.loop.Cycle(context.Background()); !errors.Is(err, down) || r.Fenced {
				t.Errorf("fence=%v: one interval without membership: err %v, fenced %v; want the error, not fenced", fence, err, r.Fenced)
			}
			time.Sleep(interval) // now 2 intervals = TTL/2 since the last renewal
			r, _ := n.loop.Cycle(context.Background())
			want, wantRunning := false, []string{"dm", "mine"}
			if fence {
				want, wantRunning = true, []string{"dm"}
			}
			if r.Fenced != want {
				t.Errorf("fence=%v: fenced = %v at TTL/2", fence, r.Fenced)
			}
			if diff := cmp.Diff(wantRunning, n.runner.Running()); diff != "" {
				t.Errorf("fence=%v: running at TTL/2 (-want +got):\n%s", fence, diff)
			}
			// The database comes back: what is still bound to n1 runs again.
			s.SetFail(nil)
			time.Sleep(interval)
			n.cycle(t)
			if diff := cmp.Diff([]string{"dm", "mine"}, n.runner.Running()); diff != "" {
				t.Errorf("fence=%v: running after recovery (-want +got):\n%s", fence, diff)
			}
		})
	}
}

func TestLostAfter(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := claimtest.NewStore()
		s.Put(at("x", "gone", 0))
		n := newNode(t, s, s, nil, claim.Config{Address: "n1", LostAfter: 3 * interval})
		var claimedAt []int
		for i := range 6 {
			if r := n.cycle(t); len(r.Claimed) > 0 {
				claimedAt = append(claimedAt, i)
			}
			time.Sleep(interval)
		}
		if diff := cmp.Diff([]int{3}, claimedAt); diff != "" {
			t.Errorf("cycles that took x over (-want +got):\n%s", diff)
		}
	})
}

func TestRebalance(t *testing.T) {
	t.Parallel()
	for _, enabled := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			s := claimtest.NewStore()
			for i := range 6 {
				s.Put(at(fmt.Sprintf("d%d", i), "n1", i))
			}
			cfg := claim.Config{Rebalance: claim.Rebalance{Enabled: enabled, Cycles: 2}}
			cfg.Address = "n1"
			n1 := newNode(t, s, s, nil, cfg)
			cfg.Address = "n2"
			n2 := newNode(t, s, s, nil, cfg)
			for range 20 {
				n1.cycle(t)
				n2.cycle(t)
				time.Sleep(interval)
			}
			got := []int{len(n1.runner.Running()), len(n2.runner.Running())}
			// Off: n2 joined late and gets nothing. On: n1 releases until the
			// difference is below the threshold 2.
			want := []int{6, 0}
			if enabled {
				want = []int{3, 3}
			}
			if !cmp.Equal(got, want) {
				t.Errorf("rebalance %v: running %v, want %v", enabled, got, want)
			}
		})
	}
}

// TestRebalanceHeldIsReported: an overloaded node that holds rebalancing
// because a deployment is bound to a missing node-unit says so in its
// report every cycle and in its log once, and logs again when the hold
// ends and it rebalances.
func TestRebalanceHeldIsReported(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := claimtest.NewStore()
		for i := range 6 {
			s.Put(at(fmt.Sprintf("d%d", i), "n1", i))
		}
		s.Put(at("x", "gone", 9))
		cfg := claim.Config{Rebalance: claim.Rebalance{Enabled: true, Cycles: 1}, LostAfter: time.Hour}
		cfg.Address = "n1"
		n1 := newNode(t, s, s, nil, cfg)
		cfg.Address = "n2"
		n2 := newNode(t, s, s, nil, cfg)
		held := func() []string {
			n1.logs.mu.Lock()
			defer n1.logs.mu.Unlock()
			var out []string
			for _, r := range n1.logs.records {
				if strings.HasPrefix(r.Msg, "rebalancing") {
					out = append(out, r.Msg+": "+r.Attrs["reason"])
				}
			}
			return out
		}
		n1.cycle(t) // both join the membership
		n2.cycle(t)
		time.Sleep(interval)
		for range 4 {
			r := n1.cycle(t)
			n2.cycle(t)
			if want := "deployments are bound to node-units that are not active: gone"; r.RebalanceHeld != want {
				t.Fatalf("report: RebalanceHeld %q, want %q", r.RebalanceHeld, want)
			}
			time.Sleep(interval)
		}
		if got := len(n1.runner.Running()); got != 6 {
			t.Errorf("n1 runs %d while held, want 6", got)
		}
		s.Delete("x")
		for range 10 {
			if r := n1.cycle(t); r.RebalanceHeld != "" {
				t.Errorf("report after the hold: RebalanceHeld %q", r.RebalanceHeld)
			}
			n2.cycle(t)
			time.Sleep(interval)
		}
		want := []string{"rebalancing held: no deployment is released while: deployments are bound to node-units that are not active: gone", "rebalancing no longer held: "}
		if diff := cmp.Diff(want, held()); diff != "" {
			t.Errorf("logs (-want +got):\n%s", diff)
		}
		if got := len(n1.runner.Running()); got >= 6 {
			t.Errorf("n1 runs %d after the hold ended, want fewer than 6", got)
		}
	})
}

func TestRunnerRefusalLoggedOnce(t *testing.T) {
	t.Parallel()
	s := claimtest.NewStore()
	s.Put(at("bad", "n1", 0))
	n := newNode(t, s, s, nil, claim.Config{Address: "n1"})
	n.runner.StartErr = func(d claim.Deployment) error { return fmt.Errorf("command not trusted: %w", claim.ErrRefused) }
	for range 3 {
		r := n.cycle(t)
		if len(r.Problems) != 1 || !errors.Is(r.Problems[0], claim.ErrRefused) {
			t.Errorf("problems %v, want the refusal", r.Problems)
		}
	}
	n.logs.mu.Lock()
	refusals := 0
	for _, r := range n.logs.records {
		if r.Msg == "runner refused deployment" {
			refusals++
		}
	}
	n.logs.mu.Unlock()
	if refusals != 1 {
		t.Errorf("refusal logged %d times over 3 cycles, want 1", refusals)
	}
}

// TestRespectsSchedulerInterval: Run cycles at once and then every
// Interval (NODE_UNIT_SCHEDULER_INTERVAL_MS), reports each cycle to the
// Observer, and on shutdown stops its deployments and leaves.
func TestRespectsSchedulerInterval(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := claimtest.NewStore()
		s.Put(at("mine", "n1", 0))
		s.Put(daemon("dm"))
		var mu sync.Mutex
		var starts []time.Time
		obs := claim.ObserverFunc(func(r claim.Report) {
			mu.Lock()
			starts = append(starts, r.Start)
			mu.Unlock()
		})
		n := newNode(t, s, s, nil, claim.Config{Address: "n1", Interval: 2 * time.Second, Observer: obs})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		begin := time.Now()
		go func() { done <- n.loop.Run(ctx) }()
		time.Sleep(7 * time.Second)
		synctest.Wait()
		if err := n.loop.Run(ctx); !errors.Is(err, claim.ErrRunning) {
			t.Errorf("second Run = %v, want ErrRunning", err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil after cancel", err)
		}
		mu.Lock()
		var offsets []time.Duration
		for _, s := range starts {
			offsets = append(offsets, s.Sub(begin))
		}
		mu.Unlock()
		if diff := cmp.Diff([]time.Duration{0, 2 * time.Second, 4 * time.Second, 6 * time.Second}, offsets); diff != "" {
			t.Errorf("cycle times (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"dm"}, n.runner.Running()); diff != "" {
			t.Errorf("running after shutdown (-want +got): deployments stop, daemons stay\n%s", diff)
		}
		active, err := s.Active(context.Background(), time.Hour)
		if err != nil || len(active) != 0 {
			t.Errorf("active after shutdown = %v, %v; want none (left)", active, err)
		}
	})
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		d       claim.Deployment
		wantErr error
		wantMsg string
	}{
		{"deployment", dep("d", ""), nil, ""},
		{"bound deployment", dep("d", "n1"), nil, ""},
		{"daemon", daemon("dm"), nil, ""},
		{"empty id", claim.Deployment{Type: claim.TypeDeployment}, claim.ErrInvalidDeployment, "claim: empty id"},
		{"unknown type", claim.Deployment{ID: "x", Type: "cron"}, claim.ErrInvalidType, `claim: ERR_INVALID_TYPE: deployment "x": type "cron" is neither "daemon" nor "deployment"`},
		{"empty type", claim.Deployment{ID: "x"}, claim.ErrInvalidType, `claim: ERR_INVALID_TYPE: deployment "x": type "" is neither "daemon" nor "deployment"`},
		{"daemon with address", claim.Deployment{ID: "dm", Type: claim.TypeDaemon, Address: "n1"}, claim.ErrDaemonAddressSet, `claim: ERR_DAEMON_ADDRESS_SET: deployment "dm": daemon has address "n1"; the address is ignored`},
	}
	for _, tt := range tests {
		err := tt.d.Validate()
		if tt.wantErr == nil {
			if err != nil {
				t.Errorf("%s: Validate = %v, want nil", tt.name, err)
			}
			continue
		}
		if !errors.Is(err, tt.wantErr) || err.Error() != tt.wantMsg {
			t.Errorf("%s: Validate = %q, want %q (wrapping %v)", tt.name, err, tt.wantMsg, tt.wantErr)
		}
	}
}

func FuzzParsePolicy(f *testing.F) {
	for _, s := range []string{"", "none", "NONE", "deployment_count", "Resource_Usage", " none", "nonE\x00", "least", "деплой"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := claim.ParsePolicy(s, claim.DefaultWeights)
		if err != nil {
			if !errors.Is(err, claim.ErrUnknownPolicy) || p != nil {
				t.Fatalf("ParsePolicy(%q) = %v, %v; want nil and ErrUnknownPolicy", s, p, err)
			}
			return
		}
		switch p.Name() {
		case claim.PolicyDeploymentCount, claim.PolicyResourceUsage, claim.PolicyNone:
		default:
			t.Fatalf("ParsePolicy(%q) = policy %q", s, p.Name())
		}
		again, err := claim.ParsePolicy(p.Name(), claim.DefaultWeights)
		if err != nil || again.Name() != p.Name() {
			t.Fatalf("ParsePolicy(%q) does not round-trip: %v, %v", p.Name(), again, err)
		}
	})
}

// hangingMembership blocks every call until its context ends, like a
// database that stopped answering.
type hangingMembership struct{ claim.Membership }

func (hangingMembership) Heartbeat(ctx context.Context, n claim.NodeUnit) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestSelfFenceWhenMembershipHangs(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := claimtest.NewStore()
		s.Put(at("mine", "n1", 0))
		hang := false
		n := newNode(t, s, switchMembership{&hang, membershipOnly{s}, hangingMembership{s}}, nil,
			claim.Config{Address: "n1", SelfFence: true, Interval: time.Second, MembershipTTL: 3 * time.Second})
		n.cycle(t)
		renewed := time.Now()
		hang = true
		for i := 0; ; i++ {
			if i == 10 {
				t.Fatal("not fenced after 10 cycles without membership")
			}
			r, err := n.loop.Cycle(context.Background())
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("cycle with a hanging membership: %v, want a deadline error", err)
			}
			if r.Fenced {
				break
			}
		}
		if got := time.Since(renewed); got > 1500*time.Millisecond+time.Second {
			t.Errorf("fenced %v after the last renewal, want at most TTL/2 + Interval = 2.5s", got)
		}
		if got := n.runner.Running(); len(got) != 0 {
			t.Errorf("running %v after fencing, want nothing", got)
		}
	})
}

// switchMembership uses b while *on, else a.
type switchMembership struct {
	on   *bool
	a, b claim.Membership
}

func (m switchMembership) pick() claim.Membership {
	if *m.on {
		return m.b
	}
	return m.a
}

func (m switchMembership) Heartbeat(ctx context.Context, n claim.NodeUnit) error {
	return m.pick().Heartbeat(ctx, n)
}

func (m switchMembership) Active(ctx context.Context, ttl time.Duration) ([]claim.NodeUnit, error) {
	return m.pick().Active(ctx, ttl)
}

func (m switchMembership) Leave(ctx context.Context, address string) error {
	return m.pick().Leave(ctx, address)
}

func TestLoopRestartsChangedDeployment(t *testing.T) {
	t.Parallel()
	s := claimtest.NewStore()
	d := at("mine", "n1", 0)
	d.PackageVersion = "1.0.0"
	s.Put(d)
	n := newNode(t, s, s, nil, claim.Config{Address: "n1"})
	n.cycle(t)
	n.cycle(t)
	d.PackageVersion = "1.1.0"
	s.Put(d)
	r := n.cycle(t)
	if diff := cmp.Diff([]string{"mine"}, r.Restarted); diff != "" {
		t.Errorf("restarted (-want +got):\n%s", diff)
	}
	if got := n.runner.Starts("mine"); got != 2 {
		t.Errorf("started %d times, want 2", got)
	}
	if r := n.cycle(t); len(r.Restarted)+len(r.Started) != 0 {
		t.Errorf("next cycle restarted %v, started %v; want nothing", r.Restarted, r.Started)
	}
}
