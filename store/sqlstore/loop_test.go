package sqlstore

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/claim/claimtest"
)

var addressWrite = regexp.MustCompile(`(?is)update\s+deployment\s+set\s+address`)

// TestNoneIssuesNoAddressUpdate: under policy none, loops over the SQL
// store send no statement that writes deployment.address, although there
// is work to claim and a lost node to take over from (R1, R13), and they
// still run their own deployments and every daemon (R2).
func TestNoneIssuesNoAddressUpdate(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, rec := openRecorded(t, b)
			s := db.Deployments()
			seed := []claim.Deployment{
				{ID: "free", Enabled: true},
				{ID: "on-lost", Enabled: true, Address: "gone"},
				{ID: "mine", Enabled: true, Address: "n1"},
				{ID: "dm", Type: claim.TypeDaemon, Enabled: true},
			}
			for _, d := range seed {
				if err := s.Add(ctx, d); err != nil {
					t.Fatal(err)
				}
			}
			before, err := s.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rec.take()
			runners := map[string]*claimtest.Runner{}
			var loops []*claim.Loop
			for _, addr := range []string{"n1", "n2"} {
				runners[addr] = claimtest.NewRunner()
				l, err := claim.New(s, db.Membership(), runners[addr], nil, claim.Config{
					Address: addr, Policy: claim.NonePolicy(), Interval: time.Second,
				})
				if err != nil {
					t.Fatal(err)
				}
				loops = append(loops, l)
			}
			for range 3 {
				for _, l := range loops {
					if _, err := l.Cycle(ctx); err != nil {
						t.Fatalf("Cycle: %v", err)
					}
				}
			}
			stmts := rec.take()
			if len(stmts) == 0 {
				t.Fatal("no statement recorded: the recorder is not in the path")
			}
			for _, q := range stmts {
				if addressWrite.MatchString(q) {
					t.Errorf("policy none sent %q", q)
				}
			}
			after, err := s.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("deployment rows changed under policy none (-before +after):\n%s", diff)
			}
			want := map[string][]string{"n1": {"dm", "mine"}, "n2": {"dm"}}
			for addr, r := range runners {
				if diff := cmp.Diff(want[addr], r.Running()); diff != "" {
					t.Errorf("%s runs (-want +got):\n%s", addr, diff)
				}
			}
		})
	}
}

// cluster is a set of claim loops, each with its own connection pool (as
// separate node-unit processes have), over one PostgreSQL schema.
type cluster struct {
	t       *testing.T
	url     string
	admin   *DB
	nodes   []*node
	daemons []string
}

type node struct {
	addr      string
	db        *DB
	runner    *claimtest.Runner
	loop      *claim.Loop
	cycles    atomic.Int64
	conflicts atomic.Int64
	claimed   atomic.Int64
	failed    atomic.Int64
	cancel    context.CancelFunc
	done      chan error
}

// newCluster seeds deployments and daemons, then opens n nodes at once (so
// their migrations race) with configurations from cfg. With joined, every
// node heartbeats once before any loop starts, as in a cluster that is up.
func newCluster(t *testing.T, n, deployments, daemons int, joined bool, cfg func(addr string) claim.Config) *cluster {
	t.Helper()
	c := &cluster{t: t, url: postgresTestURL(t)}
	c.admin = mustOpen(t, c.url)
	c.admin.SQL().SetMaxOpenConns(2)
	ctx := context.Background()
	s := c.admin.Deployments()
	for i := range deployments {
		if err := s.Add(ctx, claim.Deployment{ID: fmt.Sprintf("dep-%04d", i), Enabled: true, Command: "/bin/true"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range daemons {
		id := fmt.Sprintf("daemon-%d", i)
		c.daemons = append(c.daemons, id)
		if err := s.Add(ctx, claim.Deployment{ID: id, Type: claim.TypeDaemon, Enabled: true, Command: "/bin/true"}); err != nil {
			t.Fatal(err)
		}
	}
	c.nodes = make([]*node, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nd := &node{addr: fmt.Sprintf("node-%02d", i), runner: claimtest.NewRunner()}
			c.nodes[i] = nd
			openCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			nd.db, errs[i] = Open(openCtx, c.url)
			if errs[i] != nil {
				return
			}
			nd.db.SQL().SetMaxOpenConns(1) // as cmd/nodeunit: one connection per node-unit
			if joined {
				if errs[i] = nd.db.Membership().Heartbeat(openCtx, claim.NodeUnit{Address: nd.addr}); errs[i] != nil {
					return
				}
			}
			conf := cfg(nd.addr)
			conf.Address = nd.addr
			conf.Observer = claim.ObserverFunc(func(r claim.Report) {
				nd.cycles.Add(1)
				if r.Err != nil {
					nd.failed.Add(1)
				}
				nd.conflicts.Add(int64(len(r.Conflicts)))
				nd.claimed.Add(int64(len(r.Claimed)))
			})
			nd.loop, errs[i] = claim.New(nd.db.Deployments(), nd.db.Membership(), nd.runner, nil, conf)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	t.Cleanup(func() {
		c.stop(c.nodes...)
		for _, nd := range c.nodes {
			nd.db.Close()
		}
	})
	return c
}

func (c *cluster) start() {
	for _, nd := range c.nodes {
		ctx, cancel := context.WithCancel(context.Background())
		nd.cancel, nd.done = cancel, make(chan error, 1)
		go func() { nd.done <- nd.loop.Run(ctx) }()
	}
}

// stop cancels the loops of nodes and waits for them to return.
func (c *cluster) stop(nodes ...*node) {
	for _, nd := range nodes {
		if nd.cancel != nil {
			nd.cancel()
		}
	}
	for _, nd := range nodes {
		if nd.done != nil {
			if err := <-nd.done; err != nil {
				c.t.Errorf("%s: Run returned %v", nd.addr, err)
			}
			nd.done, nd.cancel = nil, nil
		}
	}
}

// addresses returns every deployment's address, and fails the test if a
// daemon has one.
func (c *cluster) addresses() map[string]string {
	c.t.Helper()
	all, err := c.admin.Deployments().List(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range all {
		if d.Type == claim.TypeDaemon {
			if d.Address != "" {
				c.t.Fatalf("daemon %s has address %q", d.ID, d.Address)
			}
			continue
		}
		out[d.ID] = d.Address
	}
	return out
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, deadline time.Duration, cond func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("after %v: %s: %s", deadline, what, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func counts(addrs map[string]string, nodes []*node) (map[string]int, int) {
	n := map[string]int{}
	for _, nd := range nodes {
		n[nd.addr] = 0
	}
	unassigned := 0
	for _, a := range addrs {
		if a == "" {
			unassigned++
			continue
		}
		n[a]++
	}
	return n, unassigned
}

func spread(n map[string]int) int {
	lo, hi := -1, 0
	for _, v := range n {
		if lo < 0 || v < lo {
			lo = v
		}
		hi = max(hi, v)
	}
	return hi - lo
}

// TestClaimLoops20 runs 20 claim loops as goroutines against PostgreSQL
// with 500 deployments and 5 daemons under deployment_count and one claim
// per cycle: every deployment ends assigned, counts within 1 of each other,
// no daemon ever has an address, and claims that lost a race were reported
// as ERR_CLAIM_CONFLICT and not started.
func TestClaimLoops20(t *testing.T) {
	t.Parallel()
	const nodes, deployments, daemons = 20, 500, 5
	c := newCluster(t, nodes, deployments, daemons, false, func(string) claim.Config {
		return claim.Config{Interval: 200 * time.Millisecond, MembershipTTL: 10 * time.Second}
	})
	began := time.Now()
	c.start()
	waitFor(t, "all deployments assigned with counts within 1", 120*time.Second, func() (bool, string) {
		n, unassigned := counts(c.addresses(), c.nodes)
		return unassigned == 0 && spread(n) <= 1, fmt.Sprintf("unassigned %d, counts %v", unassigned, n)
	})
	c.checkRunning(t, c.nodes)
	var conflicts, claimed, cycles, failed int64
	for _, nd := range c.nodes {
		cycles += nd.cycles.Load()
		failed += nd.failed.Load()
		conflicts += nd.conflicts.Load()
		claimed += nd.claimed.Load()
	}
	t.Logf("%d nodes placed %d deployments in %v and %d cycles (%d failed) with %d claims and %d conflicts (ERR_CLAIM_CONFLICT)",
		nodes, deployments, time.Since(began), cycles, failed, claimed, conflicts)
	// Nodes start one after another, so their views of the membership and
	// of the counts differ for a while: some claims lose their race.
	if conflicts == 0 {
		t.Errorf("no claim conflict among %d loops started together; want the conflict path exercised", nodes)
	}
	// A claim can also take over a deployment from a node that another
	// node saw claim before it saw its first heartbeat (LostAfter is 0, as
	// the specification has it), so claims may exceed deployments; they
	// can never be fewer.
	if claimed < deployments {
		t.Errorf("successful claims = %d, want at least %d", claimed, deployments)
	}
}

// checkRunning waits until each deployment runs exactly on the live node
// it is bound to, and every live node runs every daemon.
func (c *cluster) checkRunning(t *testing.T, live []*node) {
	t.Helper()
	waitFor(t, "runners match the table", 30*time.Second, func() (bool, string) {
		addrs := c.addresses()
		for _, nd := range live {
			var want []string
			for id, a := range addrs {
				if a == nd.addr {
					want = append(want, id)
				}
			}
			want = append(want, c.daemons...)
			sort.Strings(want)
			if got := nd.runner.Running(); !slices.Equal(got, want) {
				return false, fmt.Sprintf("%s runs %d ids, holds %d deployments and %d daemons", nd.addr, len(got), len(want)-len(c.daemons), len(c.daemons))
			}
		}
		return true, ""
	})
}

// TestClaimLoopsFailover stops 5 of 20 loops and checks that every
// deployment they held runs on a live node within LostAfter plus 3 cycles
// (counted in the survivors' cycles), with MaxClaimsPerCycle letting a node
// take its fair share in one statement.
func TestClaimLoopsFailover(t *testing.T) {
	t.Parallel()
	const (
		nodes, deployments, stopped = 20, 500, 5
		interval                    = 250 * time.Millisecond
		lostAfter                   = 5 * interval / 2 // between ticks: no boundary jitter
		ttl                         = 10 * time.Second
	)
	c := newCluster(t, nodes, deployments, 2, true, func(string) claim.Config {
		return claim.Config{Interval: interval, MembershipTTL: ttl, LostAfter: lostAfter, MaxClaimsPerCycle: deployments}
	})
	c.start()
	waitFor(t, "all deployments assigned with counts within 1", 120*time.Second, func() (bool, string) {
		n, unassigned := counts(c.addresses(), c.nodes)
		return unassigned == 0 && spread(n) <= 1, fmt.Sprintf("unassigned %d, counts %v", unassigned, n)
	})
	c.checkRunning(t, c.nodes)

	gone, live := c.nodes[:stopped], c.nodes[stopped:]
	held := map[string]string{}
	for id, a := range c.addresses() {
		for _, nd := range gone {
			if a == nd.addr {
				held[id] = a
			}
		}
	}
	c.stop(gone...) // each stops its processes and leaves the membership
	// A stopped node that could not leave (its Leave failed) drops out of
	// the membership when its TTL runs out: count cycles from the moment
	// none of the stopped nodes is active any more.
	waitFor(t, "stopped nodes out of the membership", 2*ttl+10*time.Second, func() (bool, string) {
		active, err := c.admin.Membership().Active(context.Background(), ttl)
		if err != nil {
			t.Fatal(err)
		}
		var still []string
		for _, n := range active {
			for _, nd := range gone {
				if n.Address == nd.addr {
					still = append(still, n.Address)
				}
			}
		}
		return len(still) == 0, fmt.Sprintf("still active: %v", still)
	})
	base := make([]int64, len(live))
	for i, nd := range live {
		base[i] = nd.cycles.Load()
	}
	waitFor(t, "deployments of the stopped nodes running on live nodes", 30*time.Second, func() (bool, string) {
		addrs := c.addresses()
		running := map[string]string{}
		for _, nd := range live {
			for _, id := range nd.runner.Running() {
				running[id] = nd.addr
			}
		}
		waiting := 0
		for id := range held {
			if a := addrs[id]; a == "" || running[id] != a {
				waiting++
			}
		}
		return waiting == 0, fmt.Sprintf("%d of %d not yet running on a live node", waiting, len(held))
	})
	elapsed := make([]int64, len(live))
	for i, nd := range live {
		elapsed[i] = nd.cycles.Load() - base[i]
	}
	slices.Sort(elapsed)
	budget := int64((lostAfter+interval-1)/interval) + 3 // LostAfter in whole cycles, plus 3
	t.Logf("%d deployments of %d stopped nodes moved after %v cycles of the survivors (budget LostAfter + 3 = %d)", len(held), stopped, elapsed, budget)
	// Cycles are counted on the median survivor (a loop that fell behind on
	// a loaded machine ran fewer cycles in the same time, one catching up
	// after a slow cycle more), with two for the observation: the count
	// starts up to one cycle before the survivors can see the stopped nodes
	// gone, and the poll may trail the move by one cycle. One claim per
	// cycle would need at least 125/15 > 8 cycles after LostAfter.
	if median := elapsed[len(elapsed)/2]; median > budget+2 {
		t.Errorf("failover took %d cycles (median survivor), want at most LostAfter + 3 = %d (+2 for observation)", median, budget)
	}
	for _, nd := range gone {
		if r := nd.runner.Running(); len(r) > len(c.daemons) {
			t.Errorf("stopped node %s still runs %d processes", nd.addr, len(r))
		}
	}
	n, _ := counts(c.addresses(), live)
	if s := spread(n); s > 1 {
		t.Errorf("counts after failover %v: spread %d, want at most 1", n, s)
	}
	c.checkRunning(t, live)
}

// TestSQLiteSharedFile runs several claim loops, each with its own
// connection to one SQLite file (as node-unit processes sharing a file
// have), at once: the file's locking serialises their writes, and they
// place every deployment with counts within 1.
func TestSQLiteSharedFile(t *testing.T) {
	t.Parallel()
	const nodes, deployments = 4, 40
	u := sqliteTestURL(t)
	admin := mustOpen(t, u)
	ctx := context.Background()
	for i := range deployments {
		if err := admin.Deployments().Add(ctx, claim.Deployment{ID: fmt.Sprintf("dep-%02d", i), Enabled: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.Deployments().Add(ctx, claim.Deployment{ID: "agent", Type: claim.TypeDaemon, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	// Every loop is made before any starts: opening a connection can take
	// seconds on a loaded machine, and a loop that runs alone that long
	// claims everything. Rebalancing is on, as for node-units that join
	// one by one, so the counts end within 1 whatever the order of start.
	runners := make([]*claimtest.Runner, nodes)
	loops := make([]*claim.Loop, nodes)
	for i := range nodes {
		db := mustOpen(t, u)
		runners[i] = claimtest.NewRunner()
		l, err := claim.New(db.Deployments(), db.Membership(), runners[i], nil, claim.Config{
			Address: fmt.Sprintf("node-%d", i), Interval: 50 * time.Millisecond, MembershipTTL: 10 * time.Second,
			Rebalance: claim.Rebalance{Enabled: true},
		})
		if err != nil {
			t.Fatal(err)
		}
		loops[i] = l
	}
	var wg sync.WaitGroup
	runCtx, cancel := context.WithCancel(ctx)
	for i, l := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Run(runCtx); err != nil {
				t.Errorf("node-%d: Run: %v", i, err)
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()
	waitFor(t, "all deployments placed with counts within 1 and running", 60*time.Second, func() (bool, string) {
		all, err := admin.Deployments().List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		perNode := map[string]int{}
		unassigned := 0
		for _, d := range all {
			switch {
			case d.Type == claim.TypeDaemon && d.Address != "":
				t.Fatalf("daemon %s has address %q", d.ID, d.Address)
			case d.Type == claim.TypeDaemon:
			case d.Address == "":
				unassigned++
			default:
				perNode[d.Address]++
			}
		}
		running := 0
		for _, r := range runners {
			running += len(r.Running()) - 1 // the daemon runs everywhere
		}
		return unassigned == 0 && len(perNode) == nodes && spread(perNode) <= 1 && running == deployments,
			fmt.Sprintf("unassigned %d, counts %v, running %d", unassigned, perNode, running)
	})
}
