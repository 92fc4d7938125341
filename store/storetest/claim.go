package storetest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ksana-dev/ksana/claim"
)

// ClaimAdmin is what [TestClaimStore] needs besides [claim.Store] and
// [claim.Membership] to set up and inspect a store. Adapters implement it
// (usually in their tests) over their own tables.
type ClaimAdmin interface {
	// PutDeployment inserts or replaces d exactly as given: every field,
	// including an invalid type and any address. A zero CreatedAt or
	// UpdatedAt means the store's current time.
	PutDeployment(ctx context.Context, d claim.Deployment) error
	// GetDeployment returns deployment id, enabled or not.
	GetDeployment(ctx context.Context, id string) (claim.Deployment, error)
	// BackdateNode moves the last-seen time of node address age into the
	// past, by the store's clock.
	BackdateNode(ctx context.Context, address string, age time.Duration) error
}

// OpenClaimStore returns an empty, isolated store for one test; it registers
// its own cleanup with t.
type OpenClaimStore func(t *testing.T) (claim.Store, claim.Membership, ClaimAdmin)

// TestClaimStore runs the conformance suite of [claim.Store] and
// [claim.Membership] (and [claim.HeartbeatActiver] and [claim.Viewer] when
// implemented) against
// the stores open returns. Every subtest opens a fresh store.
func TestClaimStore(t *testing.T, open OpenClaimStore) {
	tests := []struct {
		name string
		run  func(t *testing.T, s claim.Store, m claim.Membership, a ClaimAdmin)
	}{
		{"DeploymentsRoundTrip", claimCaseDeploymentsRoundTrip},
		{"InvalidTypeReturned", claimCaseInvalidTypeReturned},
		{"ClaimConditions", claimCaseClaimConditions},
		{"ClaimSetsAddressAndUpdatedAt", claimCaseClaimSetsAddress},
		{"ClaimMany", claimCaseClaimMany},
		{"Release", claimCaseRelease},
		{"DaemonNeverBound", claimCaseDaemonNeverBound},
		{"ConcurrentClaimers", claimCaseConcurrentClaimers},
		{"Membership", claimCaseMembership},
		{"HeartbeatActive", claimCaseHeartbeatActive},
		{"ViewShares", claimCaseViewShares},
		{"ViewSummary", claimCaseViewSummary},
		{"ViewCounts", claimCaseViewCounts},
		{"ViewRows", claimCaseViewRows},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, m, a := open(t)
			tt.run(t, s, m, a)
		})
	}
}

var (
	claimBase    = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	claimDepOpts = cmp.Options{cmpopts.EquateEmpty(), cmpopts.EquateApproxTime(time.Millisecond)}
)

func claimPut(t *testing.T, a ClaimAdmin, ds ...claim.Deployment) {
	t.Helper()
	for _, d := range ds {
		if err := a.PutDeployment(context.Background(), d); err != nil {
			t.Fatalf("PutDeployment(%q): %v", d.ID, err)
		}
	}
}

func claimGet(t *testing.T, a ClaimAdmin, id string) claim.Deployment {
	t.Helper()
	d, err := a.GetDeployment(context.Background(), id)
	if err != nil {
		t.Fatalf("GetDeployment(%q): %v", id, err)
	}
	return d
}

func claimDep(id string, typ claim.Type, enabled bool, address string) claim.Deployment {
	return claim.Deployment{ID: id, Type: typ, Enabled: enabled, Address: address,
		PackageName: "pkg-" + id, PackageVersion: "1.0.0", Command: "/bin/true",
		CreatedAt: claimBase, UpdatedAt: claimBase}
}

func claimSortByID(ds []claim.Deployment) {
	sort.Slice(ds, func(i, j int) bool { return ds[i].ID < ds[j].ID })
}

func claimCaseDeploymentsRoundTrip(t *testing.T, s claim.Store, m claim.Membership, a ClaimAdmin) {
	full := claim.Deployment{ID: "full", Type: claim.TypeDeployment, Enabled: true, Address: "node-a",
		PackageName: "@scope/pkg", PackageVersion: "2.3.4", Command: "node",
		Args:      []string{"main.js", "--flag=1", "with space", `quote"d`},
		Env:       map[string]string{"A": "1", "EMPTY": "", "UNICODE": "部署"},
		CreatedAt: claimBase, UpdatedAt: claimBase.Add(time.Hour)}
	daemon := claimDep("daemon", claim.TypeDaemon, true, "")
	off := claimDep("off", claim.TypeDeployment, false, "")
	bare := claim.Deployment{ID: "bare", Type: claim.TypeDeployment, Enabled: true, CreatedAt: claimBase, UpdatedAt: claimBase}
	claimPut(t, a, full, daemon, off, bare)

	got, err := s.Deployments(context.Background())
	if err != nil {
		t.Fatalf("Deployments: %v", err)
	}
	claimSortByID(got)
	want := []claim.Deployment{bare, daemon, full}
	if diff := cmp.Diff(want, got, claimDepOpts); diff != "" {
		t.Errorf("Deployments (enabled only, every field kept) mismatch (-want +got):\n%s", diff)
	}
	if d := claimGet(t, a, "off"); d.Enabled || d.ID != "off" {
		t.Errorf("GetDeployment(off) = %+v, want the disabled record", d)
	}
}

func claimCaseInvalidTypeReturned(t *testing.T, s claim.Store, m claim.Membership, a ClaimAdmin) {
	bad := claimDep("bad", claim.Type("cronjob"), true, "")
	ok := claimDep("ok", claim.TypeDeployment, true, "")
	claimPut(t, a, bad, ok)
	got, err := s.Deployments(context.Background())
	if err != nil {
		t.Fatalf("Deployments with a row of invalid type: %v, want the rows as stored", err)
	}
	claimSortByID(got)
	if diff := cmp.Diff([]claim.Deployment{bad, ok}, got, claimDepOpts); diff != "" {
		t.Errorf("Deployments mismatch (-want +got):\n%s", diff)
	}
	if claimed, err := s.Claim(context.Background(), "bad", "n1", nil); err != nil || claimed {
		t.Errorf("Claim(invalid type) = %v, %v; want false, nil", claimed, err)
	}
}

func claimCaseClaimConditions(t *testing.T, s claim.Store, m claim.Membership, a ClaimAdmin) {
	tests := []struct {
		name string
		d    claim.Deployment
		lost []string
		want bool
	}{
		{"unassigned", claimDep("unassigned", claim.TypeDeployment, true, ""), nil, true},
		{"unassigned with lost list", claimDep("unassigned2", claim.TypeDeployment, true, ""), []string{"gone"}, true},
		{"bound to lost node", claimDep("lost", claim.TypeDeployment, true, "gone"), []string{"other", "gone"}, true},
		{"bound to live node", claimDep("live", claim.TypeDeployment, true, "alive"), []string{"gone"}, false},
		{"bound to node, no lost list", claimDep("live2", claim.TypeDeployment, true, "gone"), nil, false},
		{"bound to self", claimDep("self", claim.TypeDeployment, true, "me"), []string{"gone"}, false},
		{"disabled", claimDep("disabled", claim.TypeDeployment, false, ""), nil, false},
		{"disabled on lost node", claimDep("disabled2", claim.TypeDeployment, false, "gone"), []string{"gone"}, false},
		{"daemon", claimDep("daemon", claim.TypeDaemon, true, ""), nil, false},
		{"invalid type", claimDep("invalid", claim.Type("x"), true, ""), nil, false},
	}
	for _, tt := range tests {
		claimPut(t, a, tt.d)
		got, err := s.Claim(context.Background(), tt.d.ID, "me", tt.lost)
		if err != nil {
			t.Fatalf("%s: Claim: %v", tt.name, err)
		}
		if got != tt.want {
			t.Errorf("%s: Claim(%q, me, %q) = %v, want %v", tt.name, tt.d.ID, tt.lost, got, tt.want)
		}
		wantAddr := tt.d.Address
		if tt.want {
			wantAddr = "me"
		}
		if d := claimGet(t, a, tt.d.ID); d.Address != wantAddr {
			t.Errorf("%s: address after Claim = %q, want %q", tt.name, d.Address, wantAddr)
		}
	}
	if got, err := s.Claim(context.Background(), "no-such-id", "me", nil); err != nil || got {
		t.Errorf("Claim(unknown id) = %v, %v; want false, nil", got, err)
	}
}

func claimCaseClaimSetsAddress(t *testing.T, s claim.Store, m claim.Membership, a ClaimAdmin) {
	claimPut(t, a, claimDep("d1", claim.TypeDeployment, true, ""))
	ok, err := s.Claim(context.Background(), "d1", "n1", nil)
	if err != nil || !ok {
		t.Fatalf("Claim(d1, n1) = %v, %v; want true, nil", ok, err)
	}
	d := claimGet(t, a, "d1")
	if d.Address != "n1" {
		t.Errorf("address = %q, want n1", d.Address)
	}
	if !d.UpdatedAt.After(claimBase) {
		t.Errorf("updated_at = %v, want later than %v: every update sets updated_at", d.UpdatedAt, claimBase)
	}
	if !d.CreatedAt.Equal(claimBase) {
		t.Errorf("created_at = %v, want unchanged %v", d.CreatedAt, claimBase)
	}
	ok, err = s.Claim(context.Background(), "d1", "n2", nil)
	if err != nil || ok {
		t.Errorf("second Claim(d1, n2) = %v, %v; want false, nil (ERR_CLAIM_CONFLICT)", ok, err)
	}
	if d := claimGet(t, a, "d1"); d.Address != "n1" {
		t.Errorf("address after lost race = %q, want n1", d.Address)
	}
}

func claimCaseClaimMany(t *testing.T, s claim.Store, m claim.Membership, a ClaimAdmin) {
	claimPut(t, a,
		claimDep("a", claim.TypeDeployment, true, ""),
		claimDep("b", claim.TypeDeployment, true, "gone"),
		claimDep("c", claim.TypeDeployment, true, "alive"),
		claimDep("d", claim.TypeDaemon, true, ""),
		claimDep("e", claim.TypeDeployment, false, ""),
		claimDep("f", claim.TypeDeployment, true, ""),
	)
	got, err := s.ClaimMany(context.Background(), []string{"a", "b", "c", "d", "e", "missing"}, "me", []string{"gone"})
	if err != nil {
		t.Fatalf("ClaimMany: %v", err)
	}
	slices.Sort(got)
	if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" {
		t.Errorf("ClaimMany claimed mismatch (-want +got):\n%s", diff)
	}
	want := map[string]string{"a": "me", "b": "me", "c": "alive", "d": "", "e": "", "f": ""}
	for id, addr := range want {
		if d := claimGet(t, a, id); d.Address != addr {
			t.Errorf("address of %s = %q, want %q", id, d.Address, addr)
		}
	}
	again, err := s.ClaimMany(context.Background(), []string{"a", "b"}, "other", []string{"gone"})
	if err != nil || len(again) != 0 {
		t.Errorf("ClaimMany of taken ids = %v, %v; want none", again, err)
	}
	none, err := s.ClaimMany(context.Background(), nil, "me", nil)
	if err != nil || len(none) != 0 {
		t.Errorf("ClaimMany(no ids) = %v, %v; want none, nil", none, err)
	}
}

func claimCaseRelease(t *testing.T, s claim.Store, m claim.Membership, a ClaimAdmin) {
	claimPut(t, a,
		claimDep("mine", claim.TypeDeployment, true, "me"),
		claimDep("theirs", claim.TypeDeployment, true, "other"),
		claimDep("free", claim.TypeDeployment, true, ""),
	)
	tests := []struct {
		id, address string
		want        bool
		wantAddr    string
	}{
		{"mine", "me", true, ""},
		{"mine", "me", false, ""},
		{"theirs", "me", false, "other"},
		{"free", "", false, ""},
		{"missing", "me", false, ""},
	}
	for _, tt := range tests {
		got, err := s.Release(context.Background(), tt.id, tt.address)
		if err != nil || got != tt.want {
			t.Errorf("Release(%q, %q) = %v, %v; want %v, nil", tt.id, tt.address, got, err, tt.want)
		}
		if tt.id == "missing" {
			continue
		}
		if d := claimGet(t, a, tt.id); d.Address != tt.wantAddr {
			t.Errorf("after Release(%q, %q): address %q, want %q", tt.id, tt.address, d.Address, tt.wantAddr)
		}
	}
}

// claimCaseDaemonNeverBound: R5, R6, R9 at the storage level.
func claimCaseDaemonNeverBound(t *testing.T, s claim.Store, m claim.Membership, a ClaimAdmin) {
	ctx := context.Background()
	claimPut(t, a, claimDep("dm", claim.TypeDaemon, true, ""), claimDep("dm-bad", claim.TypeDaemon, true, "gone"))
	if ok, err := s.Claim(ctx, "dm", "me", nil); err != nil || ok {
		t.Errorf("Claim(daemon) = %v, %v; want false, nil", ok, err)
	}
	if ok, err := s.Claim(ctx, "dm-bad", "me", []string{"gone"}); err != nil || ok {
		t.Errorf("Claim(daemon bound to lost node) = %v, %v; want false, nil", ok, err)
	}
	if got, err := s.ClaimMany(ctx, []string{"dm", "dm-bad"}, "me", []string{"gone"}); err != nil || len(got) != 0 {
		t.Errorf("ClaimMany(daemons) = %v, %v; want none", got, err)
	}
	if ok, err := s.Release(ctx, "dm-bad", "gone"); err != nil || ok {
		t.Errorf("Release(daemon) = %v, %v; want false, nil", ok, err)
	}
	if d := claimGet(t, a, "dm"); d.Address != "" {
		t.Errorf("daemon address = %q, want empty", d.Address)
	}
	if d := claimGet(t, a, "dm-bad"); d.Address != "gone" {
		t.Errorf("daemon with bad address: address = %q, want it untouched (%q)", d.Address, "gone")
	}
}

func claimCaseConcurrentClaimers(t *testing.T, s claim.Store, m claim.Membership, a ClaimAdmin) {
	const deployments, claimers = 30, 6
	var ids []string
	for i := range deployments {
		id := fmt.Sprintf("d%02d", i)
		ids = append(ids, id)
		claimPut(t, a, claimDep(id, claim.TypeDeployment, true, ""))
	}
	wins := make([][]string, claimers)
	errs := make([]error, claimers)
	var wg sync.WaitGroup
	for c := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr := fmt.Sprintf("n%d", c)
			for i, id := range ids {
				if c%2 == 1 && i%3 == 0 { // mix in ClaimMany
					got, err := s.ClaimMany(context.Background(), ids[i:min(i+3, len(ids))], addr, nil)
					if err != nil {
						errs[c] = err
						return
					}
					wins[c] = append(wins[c], got...)
					continue
				}
				ok, err := s.Claim(context.Background(), id, addr, nil)
				if err != nil {
					errs[c] = err
					return
				}
				if ok {
					wins[c] = append(wins[c], id)
				}
			}
		}()
	}
	wg.Wait()
	winner := map[string]string{}
	for c := range claimers {
		if errs[c] != nil {
			t.Fatalf("claimer %d: %v", c, errs[c])
		}
		for _, id := range wins[c] {
			if prev, ok := winner[id]; ok {
				t.Errorf("deployment %s claimed by n%d and by %s", id, c, prev)
			}
			winner[id] = fmt.Sprintf("n%d", c)
		}
	}
	for _, id := range ids {
		d := claimGet(t, a, id)
		if d.Address == "" || d.Address != winner[id] {
			t.Errorf("deployment %s: address %q, reported winner %q", id, d.Address, winner[id])
		}
	}
}

func claimNodeAddrs(ns []claim.NodeUnit) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Address)
	}
	slices.Sort(out)
	return out
}

func claimCaseMembership(t *testing.T, s claim.Store, m claim.Membership, a ClaimAdmin) {
	ctx := context.Background()
	started := claimBase.Add(5 * time.Minute)
	if err := m.Heartbeat(ctx, claim.NodeUnit{Address: "n1", UsageEndpoint: "http://a/usage", StartedAt: started}); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	if err := m.Heartbeat(ctx, claim.NodeUnit{Address: "n2", StartedAt: started}); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	if err := m.Heartbeat(ctx, claim.NodeUnit{Address: "n1", UsageEndpoint: "http://b/usage", StartedAt: started}); err != nil {
		t.Fatalf("second Heartbeat: %v", err)
	}
	active, err := m.Active(ctx, time.Minute)
	if err != nil {
		t.Fatalf("Active: %v", err)
	}
	if diff := cmp.Diff([]string{"n1", "n2"}, claimNodeAddrs(active)); diff != "" {
		t.Errorf("Active mismatch (-want +got):\n%s", diff)
	}
	for _, n := range active {
		if n.LastSeen.IsZero() {
			t.Errorf("node %s: LastSeen is zero, want the store's time of the heartbeat", n.Address)
		}
		if !n.StartedAt.Equal(started) {
			t.Errorf("node %s: StartedAt = %v, want %v", n.Address, n.StartedAt, started)
		}
		if n.Address == "n1" && n.UsageEndpoint != "http://b/usage" {
			t.Errorf("node n1: UsageEndpoint = %q, want the latest heartbeat's %q", n.UsageEndpoint, "http://b/usage")
		}
	}
	if err := a.BackdateNode(ctx, "n2", 2*time.Minute); err != nil {
		t.Fatalf("BackdateNode: %v", err)
	}
	active, err = m.Active(ctx, time.Minute)
	if err != nil {
		t.Fatalf("Active: %v", err)
	}
	if diff := cmp.Diff([]string{"n1"}, claimNodeAddrs(active)); diff != "" {
		t.Errorf("Active after n2 went silent mismatch (-want +got):\n%s", diff)
	}
	active, err = m.Active(ctx, time.Hour)
	if err != nil {
		t.Fatalf("Active: %v", err)
	}
	if diff := cmp.Diff([]string{"n1", "n2"}, claimNodeAddrs(active)); diff != "" {
		t.Errorf("Active with a longer ttl mismatch (-want +got):\n%s", diff)
	}
	if err := m.Heartbeat(ctx, claim.NodeUnit{Address: "n2", StartedAt: started}); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	if err := m.Leave(ctx, "n1"); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if err := m.Leave(ctx, "never-joined"); err != nil {
		t.Errorf("Leave(unknown) = %v, want nil", err)
	}
	active, err = m.Active(ctx, time.Minute)
	if err != nil {
		t.Fatalf("Active: %v", err)
	}
	if diff := cmp.Diff([]string{"n2"}, claimNodeAddrs(active)); diff != "" {
		t.Errorf("Active after n1 left and n2 came back mismatch (-want +got):\n%s", diff)
	}
}

func claimCaseHeartbeatActive(t *testing.T, s claim.Store, m claim.Membership, a ClaimAdmin) {
	ha, ok := m.(claim.HeartbeatActiver)
	if !ok {
		t.Skip("membership does not implement claim.HeartbeatActiver (optional)")
	}
	ctx := context.Background()
	if err := m.Heartbeat(ctx, claim.NodeUnit{Address: "n1"}); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	if err := m.Heartbeat(ctx, claim.NodeUnit{Address: "old"}); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	if err := a.BackdateNode(ctx, "old", time.Hour); err != nil {
		t.Fatalf("BackdateNode: %v", err)
	}
	active, err := ha.HeartbeatActive(ctx, claim.NodeUnit{Address: "n2", UsageEndpoint: "e"}, time.Minute)
	if err != nil {
		t.Fatalf("HeartbeatActive: %v", err)
	}
	if diff := cmp.Diff([]string{"n1", "n2"}, claimNodeAddrs(active)); diff != "" {
		t.Errorf("HeartbeatActive mismatch (-want +got):\n%s", diff)
	}
	for _, n := range active {
		if n.LastSeen.IsZero() {
			t.Errorf("node %s: LastSeen is zero", n.Address)
		}
	}
}

// claimView opens a view for self through s, which must be a claim.Viewer.
func claimView(t *testing.T, s claim.Store, self string, endpoints bool) claim.View {
	t.Helper()
	v, ok := s.(claim.Viewer)
	if !ok {
		t.Skip("store does not implement claim.Viewer (optional)")
	}
	view, err := v.View(context.Background(), claim.NodeUnit{Address: self, UsageEndpoint: "http://" + self}, time.Minute, endpoints)
	if err != nil {
		t.Fatalf("View(%s): %v", self, err)
	}
	t.Cleanup(func() { view.Close() })
	return view
}

func claimCaseViewShares(t *testing.T, s claim.Store, m claim.Membership, a ClaimAdmin) {
	v, ok := s.(claim.Viewer)
	if !ok {
		t.Skip("store does not implement claim.Viewer (optional)")
	}
	if !v.Shares(m) {
		t.Errorf("Shares(its own membership) = false, want true")
	}
	if v.Shares(otherMembership{}) {
		t.Errorf("Shares(another membership) = true, want false")
	}
}

type otherMembership struct{ claim.Membership }

// claimCaseViewSummary: the counts per address (only enabled deployments of
// type deployment with an id), the missing addresses, the active nodes with
// the caller among them, and the unassigned flag.
func claimCaseViewSummary(t *testing.T, s claim.Store, m claim.Membership, a ClaimAdmin) {
	ctx := context.Background()
	claimPut(t, a,
		claimDep("a1", claim.TypeDeployment, true, "alive"),
		claimDep("a2", claim.TypeDeployment, true, "alive"),
		claimDep("a3", claim.TypeDeployment, false, "alive"),
		claimDep("g1", claim.TypeDeployment, true, "gone"),
		claimDep("dm", claim.TypeDaemon, true, "alive"), // ERR_DAEMON_ADDRESS_SET: not counted
		claimDep("bad", claim.Type("cronjob"), true, "alive"),
		claimDep("off", claim.TypeDeployment, false, ""),
	)
	if err := m.Heartbeat(ctx, claim.NodeUnit{Address: "alive", UsageEndpoint: "http://alive"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Heartbeat(ctx, claim.NodeUnit{Address: "old"}); err != nil {
		t.Fatal(err)
	}
	if err := a.BackdateNode(ctx, "old", time.Hour); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		endpoints bool
		want      claim.Summary
	}{
		{"without endpoints", false, claim.Summary{
			Active: []claim.NodeUnit{{Address: "alive"}, {Address: "me"}},
			Bound:  map[string]int{"alive": 2, "gone": 1}}},
		{"with endpoints", true, claim.Summary{
			Active: []claim.NodeUnit{{Address: "alive", UsageEndpoint: "http://alive"}, {Address: "me", UsageEndpoint: "http://me"}},
			Bound:  map[string]int{"alive": 2, "gone": 1}}},
	}
	for _, tt := range tests {
		view := claimView(t, s, "me", tt.endpoints)
		got := view.Summary()
		sort.Slice(got.Active, func(i, j int) bool { return got.Active[i].Address < got.Active[j].Address })
		if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: Summary mismatch (-want +got):\n%s", tt.name, diff)
		}
		if err := view.Commit(ctx); err != nil {
			t.Fatalf("Commit: %v", err)
		}
	}
	claimPut(t, a, claimDep("free", claim.TypeDeployment, true, ""))
	view := claimView(t, s, "me", false)
	if !view.Summary().Unassigned {
		t.Errorf("Summary().Unassigned = false with an unassigned deployment, want true")
	}
	if err := view.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	active, err := m.Active(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(claimNodeAddrs(active), "me") {
		t.Errorf("after View and Commit, Active = %v, want the viewer's heartbeat (me) in it", claimNodeAddrs(active))
	}
}

// claimCaseViewCounts: the counts follow every write: claim, takeover,
// release, disable, re-enable, delete by replacement, rebinding by hand.
func claimCaseViewCounts(t *testing.T, s claim.Store, m claim.Membership, a ClaimAdmin) {
	ctx := context.Background()
	bound := func() map[string]int {
		t.Helper()
		v := claimView(t, s, "me", false)
		defer v.Close()
		return v.Summary().Bound
	}
	for i := range 4 {
		claimPut(t, a, claimDep(fmt.Sprintf("d%d", i), claim.TypeDeployment, true, ""))
	}
	steps := []struct {
		name string
		do   func() error
		want map[string]int
	}{
		{"nothing bound", func() error { return nil }, map[string]int{}},
		{"claim", func() error { _, err := s.Claim(ctx, "d0", "n1", nil); return err }, map[string]int{"n1": 1}},
		{"claim many", func() error { _, err := s.ClaimMany(ctx, []string{"d1", "d2"}, "n2", nil); return err },
			map[string]int{"n1": 1, "n2": 2}},
		{"takeover", func() error { _, err := s.Claim(ctx, "d1", "n1", []string{"n2"}); return err },
			map[string]int{"n1": 2, "n2": 1}},
		{"release", func() error { _, err := s.Release(ctx, "d2", "n2"); return err }, map[string]int{"n1": 2}},
		{"disable", func() error {
			d := claimGet(t, a, "d0")
			d.Enabled = false
			return a.PutDeployment(ctx, d)
		}, map[string]int{"n1": 1}},
		{"enable again", func() error {
			d := claimGet(t, a, "d0")
			d.Enabled = true
			return a.PutDeployment(ctx, d)
		}, map[string]int{"n1": 2}},
		{"rebound by hand", func() error {
			d := claimGet(t, a, "d0")
			d.Address = "n3"
			return a.PutDeployment(ctx, d)
		}, map[string]int{"n1": 1, "n3": 1}},
		{"turned into a daemon", func() error {
			d := claimGet(t, a, "d1")
			d.Type = claim.TypeDaemon
			return a.PutDeployment(ctx, d)
		}, map[string]int{"n3": 1}},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if diff := cmp.Diff(st.want, bound(), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("after %s: Bound mismatch (-want +got):\n%s", st.name, diff)
		}
	}
}

// claimCaseViewRows: versions of a node's rows, the daemons and the invalid
// rows; Get in full; candidates in claim order, lost first, by window.
func claimCaseViewRows(t *testing.T, s claim.Store, m claim.Membership, a ClaimAdmin) {
	ctx := context.Background()
	at := func(d claim.Deployment, minutes int) claim.Deployment {
		d.UpdatedAt = claimBase.Add(time.Duration(minutes) * time.Minute)
		return d
	}
	mine := at(claimDep("mine", claim.TypeDeployment, true, "me"), 1)
	mine.Args, mine.Env = []string{"x", "y"}, map[string]string{"K": "V"}
	rows := []claim.Deployment{
		mine,
		at(claimDep("mine-off", claim.TypeDeployment, false, "me"), 1),
		at(claimDep("theirs", claim.TypeDeployment, true, "alive"), 1),
		at(claimDep("dm", claim.TypeDaemon, true, ""), 2),
		at(claimDep("dm-bound", claim.TypeDaemon, true, "alive"), 2),
		at(claimDep("bad", claim.Type("cronjob"), true, ""), 3),
		at(claimDep("free-late", claim.TypeDeployment, true, ""), 9),
		at(claimDep("free-early", claim.TypeDeployment, true, ""), 4),
		at(claimDep("free-mid", claim.TypeDeployment, true, ""), 5),
		at(claimDep("lost-b", claim.TypeDeployment, true, "gone"), 8),
		at(claimDep("lost-a", claim.TypeDeployment, true, "gone"), 7),
		at(claimDep("other-lost", claim.TypeDeployment, true, "gone2"), 1),
	}
	claimPut(t, a, rows...)
	view := claimView(t, s, "me", false)

	vs, err := view.Versions(ctx, "me")
	if err != nil {
		t.Fatalf("Versions: %v", err)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].ID < vs[j].ID })
	wantVs := []claim.Version{{ID: "bad", UpdatedAt: rows[5].UpdatedAt}, {ID: "dm", UpdatedAt: rows[3].UpdatedAt},
		{ID: "dm-bound", UpdatedAt: rows[4].UpdatedAt}, {ID: "mine", UpdatedAt: mine.UpdatedAt}}
	if diff := cmp.Diff(wantVs, vs, claimDepOpts); diff != "" {
		t.Errorf("Versions(me) mismatch (-want +got):\n%s", diff)
	}

	got, err := view.Get(ctx, []string{"mine", "bad", "mine-off", "missing"})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	claimSortByID(got)
	if diff := cmp.Diff([]claim.Deployment{rows[5], mine}, got, claimDepOpts); diff != "" {
		t.Errorf("Get (enabled rows only, in full) mismatch (-want +got):\n%s", diff)
	}
	if got, err := view.Get(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("Get(no ids) = %v, %v; want none", got, err)
	}

	ids := func(ds []claim.Deployment) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.ID)
		}
		return out
	}
	tests := []struct {
		lost          []string
		offset, limit int
		want          []string
	}{
		{nil, 0, 10, []string{"free-early", "free-mid", "free-late"}},
		{nil, 1, 1, []string{"free-mid"}},
		{nil, 3, 1, nil},
		{[]string{"gone"}, 0, 10, []string{"lost-a", "lost-b", "free-early", "free-mid", "free-late"}},
		{[]string{"gone", "gone2"}, 0, 2, []string{"other-lost", "lost-a"}},
		{[]string{"gone"}, 1, 2, []string{"lost-b", "free-early"}},
		{[]string{"gone"}, 4, 5, []string{"free-late"}},
	}
	for _, tt := range tests {
		cands, err := view.Candidates(ctx, tt.lost, tt.offset, tt.limit)
		if err != nil {
			t.Fatalf("Candidates(%q, %d, %d): %v", tt.lost, tt.offset, tt.limit, err)
		}
		if diff := cmp.Diff(tt.want, ids(cands), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Candidates(%q, %d, %d) mismatch (-want +got):\n%s", tt.lost, tt.offset, tt.limit, diff)
		}
		if tt.lost == nil && tt.offset == 0 {
			if diff := cmp.Diff(claim.Candidates(rows, nil), cands, claimDepOpts); diff != "" {
				t.Errorf("Candidates rows differ from claim.Candidates (-want +got):\n%s", diff)
			}
		}
	}
	counts := []struct {
		lost  []string
		limit int
		want  int
	}{
		{nil, 100, 3}, {nil, 2, 2}, {[]string{"gone"}, 100, 5}, {[]string{"gone", "gone2"}, 100, 6},
	}
	for _, tt := range counts {
		if n, err := view.CountCandidates(ctx, tt.lost, tt.limit); err != nil || n != tt.want {
			t.Errorf("CountCandidates(%q, %d) = %d, %v; want %d", tt.lost, tt.limit, n, err, tt.want)
		}
	}
	if err := view.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	// After Commit each read is a statement of its own, seeing new writes.
	claimPut(t, a, at(claimDep("free-first", claim.TypeDeployment, true, ""), 0))
	cands, err := view.Candidates(ctx, nil, 0, 1)
	if err != nil || len(cands) != 1 || cands[0].ID != "free-first" {
		t.Errorf("Candidates after Commit = %v, %v; want [free-first]", ids(cands), err)
	}
}
