package claim_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/claim/claimtest"
)

// The requirements R1-R13 and the error codes of "node-unit 调度：抢占策略与
// deployment 类型" (001) that do not depend on SQL, one test each. The SQL
// ones are listed in interfaces.go and live in store/sqlstore.

const interval = 5 * time.Second

// seed puts a mixed set of records into s: unassigned deployments, one bound
// to n1, one bound to a node that is gone, and a daemon.
func seed(s *claimtest.Store) {
	s.Put(at("u1", "", 1))
	s.Put(at("u2", "", 2))
	s.Put(at("mine", "n1", 0))
	s.Put(at("lost", "gone", 0))
	s.Put(daemon("dm"))
}

func TestNoneNeverWritesAddress(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := claimtest.NewStore()
		seed(s)
		s.SetOnWrite(func(id, from, to string) { t.Errorf("address of %s changed from %q to %q under none", id, from, to) })
		before := s.Addresses()
		n := newNode(t, noAddressWrites{s, t}, s, nil, claim.Config{Address: "n1", Policy: claim.NonePolicy()})
		for range 5 {
			r := n.cycle(t)
			if len(r.Claimed)+len(r.Conflicts)+len(r.Released) != 0 || r.Eligible {
				t.Errorf("report under none: claimed %v, conflicts %v, released %v, eligible %v; want nothing", r.Claimed, r.Conflicts, r.Released, r.Eligible)
			}
			time.Sleep(interval)
		}
		if diff := cmp.Diff(before, s.Addresses()); diff != "" {
			t.Errorf("addresses changed under none (-before +after):\n%s", diff)
		}
	})
}

func TestNoneKeepsReadingAndDrivingTheRunner(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := claimtest.NewStore()
		seed(s)
		n := newNode(t, noAddressWrites{s, t}, s, nil, claim.Config{Address: "n1", Policy: claim.NonePolicy()})
		n.cycle(t)
		if diff := cmp.Diff([]string{"dm", "mine"}, n.runner.Running()); diff != "" {
			t.Errorf("running after the first cycle (-want +got):\n%s", diff)
		}
		// Changes made by hand are picked up: a newly bound deployment starts,
		// a disabled one stops.
		s.Put(at("new", "n1", 3))
		s.SetEnabled("mine", false)
		before := s.Statements()
		n.cycle(t)
		if got := s.Statements() - before; got != 2 {
			t.Errorf("statements in a none cycle = %d, want 2 (membership, deployment list)", got)
		}
		if diff := cmp.Diff([]string{"dm", "new"}, n.runner.Running()); diff != "" {
			t.Errorf("running after changes (-want +got):\n%s", diff)
		}
	})
}

func TestTypeIsDaemonOrDeployment(t *testing.T) {
	t.Parallel()
	tests := []struct {
		t    claim.Type
		want bool
	}{
		{"daemon", true}, {"deployment", true}, {"", false}, {"Daemon", false}, {"DEPLOYMENT", false}, {"job", false},
	}
	for _, tt := range tests {
		if got := tt.t.Valid(); got != tt.want {
			t.Errorf("Type(%q).Valid() = %v, want %v", tt.t, got, tt.want)
		}
	}
}

func TestDaemonNeverClaimed(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := claimtest.NewStore()
		for _, id := range []string{"d1", "d2", "d3"} {
			s.Put(daemon(id))
		}
		s.Put(at("u", "", 9))
		rec := &recordingStore{Store: s}
		n1 := newNode(t, rec, s, nil, claim.Config{Address: "n1"})
		n2 := newNode(t, rec, s, nil, claim.Config{Address: "n2", MaxClaimsPerCycle: 10})
		for range 3 {
			n1.cycle(t)
			n2.cycle(t)
			time.Sleep(interval)
		}
		if diff := cmp.Diff([]string{"u"}, rec.claimed); diff != "" {
			t.Errorf("ids claimed (-want +got):\n%s", diff)
		}
		for _, id := range []string{"d1", "d2", "d3"} {
			if d, _ := s.Get(id); d.Address != "" {
				t.Errorf("daemon %s address = %q, want empty", id, d.Address)
			}
		}
	})
}

func TestDaemonAddressIsNoBindingCondition(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := claimtest.NewStore()
		s.Put(claim.Deployment{ID: "dm", Type: claim.TypeDaemon, Enabled: true, Address: "n2"})
		n1 := newNode(t, s, s, nil, claim.Config{Address: "n1"})
		n2 := newNode(t, s, s, nil, claim.Config{Address: "n2"})
		n1.cycle(t)
		n2.cycle(t)
		for _, n := range []*node{n1, n2} {
			if diff := cmp.Diff([]string{"dm"}, n.runner.Running()); diff != "" {
				t.Errorf("%s running (-want +got):\n%s", n.addr, diff)
			}
		}
		// Nor does it count as n2's deployment.
		valid, _ := claim.Sanitize(s.All())
		if got := claim.DeploymentCounts(valid, []string{"n1", "n2"}); got["n2"] != 0 {
			t.Errorf("n2 counted %d deployments for a daemon carrying its address, want 0", got["n2"])
		}
	})
}

func TestDaemonRunsOncePerNode(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := claimtest.NewStore()
		s.Put(daemon("dm1"))
		s.Put(daemon("dm2"))
		var nodes []*node
		for _, a := range []string{"n1", "n2", "n3"} {
			nodes = append(nodes, newNode(t, s, s, nil, claim.Config{Address: a}))
		}
		for range 5 {
			for _, n := range nodes {
				n.cycle(t)
			}
			time.Sleep(interval)
		}
		for _, n := range nodes {
			if diff := cmp.Diff([]string{"dm1", "dm2"}, n.runner.Running()); diff != "" {
				t.Errorf("%s running (-want +got):\n%s", n.addr, diff)
			}
			for _, id := range []string{"dm1", "dm2"} {
				if got := n.runner.Starts(id); got != 1 {
					t.Errorf("%s started %s %d times, want 1", n.addr, id, got)
				}
			}
		}
		// A list holding one id twice still starts it once.
		act := claim.Plan(claim.Inputs{Self: "n1", Deployments: []claim.Deployment{daemon("dm"), daemon("dm")}}, t0)
		if diff := cmp.Diff([]string{"dm"}, ids(act.Start)); diff != "" {
			t.Errorf("Start for a repeated daemon id (-want +got):\n%s", diff)
		}
	})
}

func TestDeploymentBindingAndTakeoverUnchanged(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := claimtest.NewStore()
		s.Put(at("b2", "n2", 0))
		s.Put(at("u", "", 1))
		n1 := newNode(t, s, s, nil, claim.Config{Address: "n1"})
		n2 := newNode(t, s, s, nil, claim.Config{Address: "n2"})
		for _, a := range []string{"n1", "n2"} {
			if err := s.Heartbeat(context.Background(), claim.NodeUnit{Address: a}); err != nil {
				t.Fatal(err)
			}
		}
		n2.cycle(t) // n2 starts b2; it has 1, n1 has 0: n2 does not claim
		n1.cycle(t) // n1 is the minimum: it claims u
		if diff := cmp.Diff(map[string]string{"b2": "n2", "u": "n1"}, s.Addresses()); diff != "" {
			t.Errorf("addresses (-want +got):\n%s", diff)
		}
		if got := n1.runner.Running(); !cmp.Equal(got, []string{"u"}) {
			t.Errorf("n1 runs %v, want [u]", got)
		}
		if got := n2.runner.Running(); !cmp.Equal(got, []string{"b2"}) {
			t.Errorf("n2 runs %v, want [b2]", got)
		}
		// n2 disappears from the membership: n1 takes b2 over.
		time.Sleep(4 * interval)
		r := n1.cycle(t)
		if diff := cmp.Diff([]string{"b2"}, r.Claimed); diff != "" {
			t.Errorf("takeover claims (-want +got):\n%s", diff)
		}
		if got := n1.runner.Running(); !cmp.Equal(got, []string{"b2", "u"}) {
			t.Errorf("n1 runs %v, want [b2 u]", got)
		}
	})
}

func TestLostRecoveryIgnoresDaemons(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := claimtest.NewStore()
		s.Put(claim.Deployment{ID: "dm", Type: claim.TypeDaemon, Enabled: true, Address: "gone"})
		s.Put(at("x", "gone", 0))
		n := newNode(t, s, s, nil, claim.Config{Address: "n1", MaxClaimsPerCycle: 10})
		r := n.cycle(t)
		if diff := cmp.Diff([]string{"x"}, r.Claimed); diff != "" {
			t.Errorf("claimed (-want +got):\n%s", diff)
		}
		if d, _ := s.Get("dm"); d.Address != "gone" {
			t.Errorf("daemon address = %q, want it untouched", d.Address)
		}
		act := claim.Plan(claim.Inputs{Self: "n1", Deployments: []claim.Deployment{{ID: "dm", Type: claim.TypeDaemon, Enabled: true, Address: "gone"}}}, t0)
		if len(act.Lost) != 0 || len(act.Claim) != 0 || len(act.State.MissingSince) != 0 {
			t.Errorf("Plan with only a daemon on a gone node: lost %v, claims %v, missing %v; want none", act.Lost, ids(act.Claim), act.State.MissingSince)
		}
	})
}

func TestDeploymentHasTypeField(t *testing.T) {
	t.Parallel()
	in := claim.Deployment{ID: "d", Type: claim.TypeDaemon, Enabled: true, Args: []string{"a"}, Env: map[string]string{"K": "V"}, CreatedAt: t0, UpdatedAt: t0}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	if fields["type"] != "daemon" {
		t.Errorf("JSON type field = %v, want \"daemon\" (in %s)", fields["type"], b)
	}
	var out claim.Deployment
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out); diff != "" {
		t.Errorf("JSON round trip (-want +got):\n%s", diff)
	}
}

func TestInvalidTypeLoggedAndSkipped(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := claimtest.NewStore()
		s.Put(claim.Deployment{ID: "bad", Type: "cronjob", Enabled: true})
		s.Put(claim.Deployment{ID: "bad-bound", Type: "", Enabled: true, Address: "n1"})
		n := newNode(t, s, s, nil, claim.Config{Address: "n1"})
		for i := range 3 {
			r := n.cycle(t)
			var codes []claim.Code
			for _, p := range r.Problems {
				var e *claim.Error
				if errors.As(p, &e) && errors.Is(p, claim.ErrInvalidType) {
					codes = append(codes, e.Code)
				}
			}
			if len(codes) != 2 {
				t.Errorf("cycle %d: problems %v, want two ERR_INVALID_TYPE", i, r.Problems)
			}
			time.Sleep(interval)
		}
		if got := n.runner.Running(); len(got) != 0 {
			t.Errorf("running %v, want nothing: invalid records are skipped", got)
		}
		if d, _ := s.Get("bad"); d.Address != "" {
			t.Errorf("invalid record claimed: address %q", d.Address)
		}
		logged := n.logs.withCode(claim.CodeInvalidType)
		if len(logged) != 2 {
			t.Fatalf("ERR_INVALID_TYPE logged %d times over 3 cycles, want 2 (once per record)", len(logged))
		}
		for _, r := range logged {
			if r.Level != slog.LevelError || r.Attrs["id"] == "" {
				t.Errorf("log record %+v, want an error naming the id", r)
			}
		}
	})
}

func TestDaemonAddressLoggedAndIgnored(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := claimtest.NewStore()
		s.Put(claim.Deployment{ID: "dm", Type: claim.TypeDaemon, Enabled: true, Address: "n9"})
		n := newNode(t, s, s, nil, claim.Config{Address: "n1"})
		r := n.cycle(t)
		n.cycle(t)
		if len(r.Problems) != 1 || !errors.Is(r.Problems[0], claim.ErrDaemonAddressSet) {
			t.Errorf("problems %v, want one ERR_DAEMON_ADDRESS_SET", r.Problems)
		}
		if got := n.runner.Running(); !cmp.Equal(got, []string{"dm"}) {
			t.Errorf("running %v, want [dm]: the address is ignored", got)
		}
		if d, _ := s.Get("dm"); d.Address != "n9" {
			t.Errorf("address = %q, want the stored value kept (n9)", d.Address)
		}
		if got := n.logs.withCode(claim.CodeDaemonAddressSet); len(got) != 1 || got[0].Attrs["id"] != "dm" {
			t.Errorf("ERR_DAEMON_ADDRESS_SET log records %+v, want one naming dm", got)
		}
	})
}

func TestNoneBlocksEveryAddressWritePath(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := claimtest.NewStore()
		seed(s)
		for i := range 6 {
			s.Put(at("heavy"+string(rune('a'+i)), "n1", i))
		}
		s.SetOnWrite(func(id, from, to string) { t.Errorf("address of %s changed from %q to %q under none", id, from, to) })
		cfg := claim.Config{Address: "n1", Policy: claim.NonePolicy(),
			MaxClaimsPerCycle: 10, Rebalance: claim.Rebalance{Enabled: true, Cycles: 1}, SelfFence: true}
		n1 := newNode(t, noAddressWrites{s, t}, s, nil, cfg)
		cfg.Address = "n2"
		n2 := newNode(t, noAddressWrites{s, t}, s, nil, cfg)
		for range 5 {
			n1.cycle(t)
			n2.cycle(t)
			time.Sleep(interval)
		}
		if got := n1.runner.Running(); len(got) != 8 {
			t.Errorf("n1 runs %v, want its 7 bound deployments and the daemon", got)
		}
	})
}

func TestErrClaimConflict_LoggedAtDebugAndRetried(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := claimtest.NewStore()
		s.Put(at("u1", "", 1))
		s.Put(at("u2", "", 2))
		// n2 wins every race for u1: it claims it just before n1's statement.
		racing := &raceStore{Store: s, winner: "n2", id: "u1"}
		n := newNode(t, racing, s, nil, claim.Config{Address: "n1"})
		r := n.cycle(t)
		if diff := cmp.Diff([]string{"u1"}, r.Conflicts); diff != "" {
			t.Errorf("conflicts (-want +got):\n%s", diff)
		}
		logged := n.logs.withCode(claim.CodeClaimConflict)
		if len(logged) != 1 || logged[0].Level != slog.LevelDebug || logged[0].Attrs["id"] != "u1" {
			t.Errorf("ERR_CLAIM_CONFLICT log records %+v, want one at debug naming u1", logged)
		}
		// Next cycle: n1 (0) and n2 (1) differ; n1 is the minimum and claims u2.
		time.Sleep(interval)
		if err := s.Heartbeat(context.Background(), claim.NodeUnit{Address: "n2"}); err != nil {
			t.Fatal(err)
		}
		r = n.cycle(t)
		if diff := cmp.Diff([]string{"u2"}, r.Claimed); diff != "" {
			t.Errorf("retry cycle claimed (-want +got):\n%s", diff)
		}
		err := &claim.Error{Code: claim.CodeClaimConflict, ID: "u1", Err: claim.ErrClaimConflict}
		if !errors.Is(err, claim.ErrClaimConflict) || err.Error() != `claim: ERR_CLAIM_CONFLICT: deployment "u1": claimed by another node first` {
			t.Errorf("conflict error = %q", err)
		}
	})
}

// raceStore lets winner claim id right before any claim of it.
type raceStore struct {
	claim.Store
	winner, id string
}

func (s *raceStore) Claim(ctx context.Context, id, address string, lost []string) (bool, error) {
	if id == s.id {
		if _, err := s.Store.Claim(ctx, id, s.winner, lost); err != nil {
			return false, err
		}
	}
	return s.Store.Claim(ctx, id, address, lost)
}

func TestErrPolicyDisabled_LoggedOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := claimtest.NewStore()
		seed(s)
		n := newNode(t, s, s, nil, claim.Config{Address: "n1", Policy: claim.NonePolicy()})
		for range 4 {
			n.cycle(t)
			time.Sleep(interval)
		}
		if got := n.logs.withCode(claim.CodePolicyDisabled); len(got) != 1 || got[0].Level != slog.LevelInfo {
			t.Errorf("ERR_POLICY_DISABLED log records %+v, want exactly one at info", got)
		}
	})
}

func TestErrDaemonMissing_Restarted(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := claimtest.NewStore()
		s.Put(daemon("dm"))
		n := newNode(t, s, s, nil, claim.Config{Address: "n1"})
		if r := n.cycle(t); len(r.Missing) != 0 {
			t.Errorf("first start reported missing %v, want none", r.Missing)
		}
		n.runner.Crash("dm")
		r := n.cycle(t)
		if diff := cmp.Diff([]string{"dm"}, r.Missing); diff != "" {
			t.Errorf("missing (-want +got):\n%s", diff)
		}
		if len(r.Problems) != 1 || !errors.Is(r.Problems[0], claim.ErrDaemonMissing) {
			t.Errorf("problems %v, want ERR_DAEMON_MISSING", r.Problems)
		}
		if got := n.runner.Starts("dm"); got != 2 {
			t.Errorf("dm started %d times, want 2 (restarted)", got)
		}
		if got := n.logs.withCode(claim.CodeDaemonMissing); len(got) != 1 || got[0].Level != slog.LevelWarn {
			t.Errorf("ERR_DAEMON_MISSING log records %+v, want one warning", got)
		}
		if r := n.cycle(t); len(r.Missing) != 0 {
			t.Errorf("after the restart missing %v, want none", r.Missing)
		}
	})
}

// TestNoneDoesNotFence: under none nobody takes deployments over, so a
// node that cannot renew its membership keeps running them (SelfFence has
// no effect).
func TestNoneDoesNotFence(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := claimtest.NewStore()
		s.Put(at("mine", "n1", 0))
		n := newNode(t, s, s, nil, claim.Config{Address: "n1", Policy: claim.NonePolicy(), SelfFence: true})
		n.cycle(t)
		s.SetFail(func(string) error { return errors.New("down") })
		for range 5 {
			time.Sleep(interval)
			if r, _ := n.loop.Cycle(context.Background()); r.Fenced {
				t.Fatal("fenced under none")
			}
		}
		if got := n.runner.Running(); !cmp.Equal(got, []string{"mine"}) {
			t.Errorf("running %v, want [mine]", got)
		}
	})
}
