package redisstore

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/storetest"
	"github.com/redis/rueidis"
)

// fleetIdle attaches nodes to Dispatchers (default Config but ownerTTL,
// 0 for the default) spread over insts instances, waits until every instance sees them all online, and returns
// the commands a second the server executed over window (INFO
// commandstats, scripts' commands included), with the counts by command.
func fleetIdle(t testing.TB, c rueidis.Client, nodes, insts int, window, ownerTTL time.Duration) (float64, storetest.CommandStats) {
	prefix := testPrefix(t)
	p := storetest.NewTestPlane(t, storetest.DispatcherHarness{Stores: func() scheduler.Stores {
		st, err := NewStores(c, scheduler.Config{}, StoresConfig{KeyPrefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}})
	ds := make([]*scheduler.Dispatcher, insts)
	for i := range ds {
		ds[i] = p.Start(fmt.Sprintf("idle-%d", i), false, func(cfg *scheduler.Config) {
			*cfg = scheduler.Config{InstanceID: cfg.InstanceID, OwnerTTL: ownerTTL}
		})
	}
	for i := range nodes {
		storetest.NewTestNode(scheduler.NodeInfo{NodeID: fmt.Sprintf("node-%05d", i)}).Attach(t, ds[i%insts])
	}
	for _, d := range ds {
		storetest.Eventually(t, "every node online everywhere", 30*time.Second, func() bool {
			n := 0
			for _, s := range d.Fleet() {
				if s.Online {
					n++
				}
			}
			return n == nodes
		})
	}
	time.Sleep(3 * time.Second) // past the start-up's steps
	// Two halves of the window, and the quieter one: on a busy machine
	// the start-up's last steps (recovery scans, claims) can reach into
	// the first; the idle cost is what is left.
	ctx := context.Background()
	stats := func() storetest.CommandStats {
		cs, err := storetest.RedisCommandStats(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	c0, t0 := stats(), time.Now()
	time.Sleep(window / 2)
	c1, t1 := stats(), time.Now()
	time.Sleep(window / 2)
	c2, t2 := stats(), time.Now()
	a, b := c1.Sub(c0), c2.Sub(c1)
	ra, rb := float64(a.Total())/t1.Sub(t0).Seconds(), float64(b.Total())/t2.Sub(t1).Seconds()
	if rb < ra {
		return rb, b
	}
	return ra, a
}

// TestFleetIdleCommands: the idle fleet view costs the server commands in
// proportion to the instances, not to the nodes times the instances. 300
// nodes over 1 and over 3 instances, on the standalone server and the
// cluster side by side (each alone on its servers: the test is not
// parallel, so the package's other tests wait). The bindings' renewals (one per
// node every OwnerTTL/3, a cost of the nodes alone) are put out of the
// window with a long OwnerTTL. Three instances may cost at most 25
// commands a second more per instance than one, and nothing in proportion
// to the nodes; before the fleet view kept one hash per instance, every
// instance read two keys per node of the fleet every refresh.
func TestFleetIdleCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("idle windows of several seconds")
	}
	const nodes = 300
	for _, srv := range testServers(t) {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			one, c1 := fleetIdle(t, srv.client, nodes, 1, 6*time.Second, 10*time.Minute)
			three, c3 := fleetIdle(t, srv.client, nodes, 3, 6*time.Second, 10*time.Minute)
			t.Logf("%d nodes: 1 instance %.0f commands/s (%v); 3 instances %.0f commands/s (%v)", nodes, one, c1, three, c3)
			if three-one > 2*25 {
				t.Errorf("3 instances cost %.0f commands/s, 1 instance %.0f: more than 25/s per added instance", three, one)
			}
			if three > nodes/2 {
				t.Errorf("3 instances cost %.0f commands/s for %d nodes: grows with the nodes", three, nodes)
			}
		})
	}
}

// TestFleetIdleLarge reports the idle commands a second of
// KSANA_FLEET_IDLE_NODES nodes (default: skipped) over
// KSANA_FLEET_IDLE_INSTANCES instances (default 3), on the standalone
// server, attached through the Dispatcher API in-process:
//
//	KSANA_FLEET_IDLE_NODES=3000 go test -run TestFleetIdleLarge -v ./store/redisstore/
func TestFleetIdleLarge(t *testing.T) {
	nodes, _ := strconv.Atoi(os.Getenv("KSANA_FLEET_IDLE_NODES"))
	if nodes <= 0 {
		t.Skip("KSANA_FLEET_IDLE_NODES not set")
	}
	insts := 3
	if v, err := strconv.Atoi(os.Getenv("KSANA_FLEET_IDLE_INSTANCES")); err == nil && v > 0 {
		insts = v
	}
	srv := testServers(t)[0]
	rate, cmds := fleetIdle(t, srv.client, nodes, insts, 20*time.Second, 0)
	t.Logf("%d nodes x %d instances: %.0f commands/s idle (%v)", nodes, insts, rate, cmds)
}
