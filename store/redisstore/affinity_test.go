package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/affinity"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/storetest"
	"github.com/redis/rueidis"
)

func newTurns(t testing.TB, c rueidis.Client, cfg TurnsConfig) *Turns {
	t.Helper()
	if cfg.Prefix == "" {
		cfg.Prefix = testPrefix(t)
	}
	if cfg.TTL == 0 {
		cfg.TTL = 10 * time.Minute // tests never flush: let their keys go
	}
	s, err := NewTurns(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// setOnline sets or removes a node's presence key, as the node snapshot
// sync does.
func setOnline(t *testing.T, c rueidis.Client, keys Keys, node string, on bool) {
	t.Helper()
	ctx := context.Background()
	key := keys.NodePresence(node)
	cmd := c.B().Del().Key(key).Build()
	if on {
		cmd = c.B().Set().Key(key).Value("1").PxMilliseconds(time.Minute.Milliseconds()).Build()
	}
	if err := c.Do(ctx, cmd).Error(); err != nil {
		t.Fatal(err)
	}
}

func TestTurnsConformance(t *testing.T) {
	for _, srv := range testServers(t) {
		t.Run(srv.name, func(t *testing.T) {
			storetest.TestTurnStore(t, func(t *testing.T) storetest.TurnHarness {
				s := newTurns(t, srv.client, TurnsConfig{})
				return storetest.TurnHarness{
					Store:     s,
					SetOnline: func(t *testing.T, n string, on bool) { setOnline(t, srv.client, s.keys, n, on) },
				}
			})
		})
	}
}

// TestSelectNodeSameEverywhere drives the standalone server, the cluster
// and the in-memory store through the same random history of affinities
// and presence, and requires the same decision from all three at every
// step, with a seeded random strategy and with rendezvous hashing.
func TestSelectNodeSameEverywhere(t *testing.T) {
	ctx := context.Background()
	srvs := testServers(t)
	nodes := []string{"n0", "n1", "n2", "n3", "n4", "n5"}
	online := map[string]bool{}
	var mu sync.Mutex
	mem := scheduler.NewMemTurns(func(n string) bool { mu.Lock(); defer mu.Unlock(); return online[n] })
	type impl struct {
		name  string
		store scheduler.TurnStore
		set   func(n string, on bool)
	}
	impls := []impl{{"memory", mem, func(n string, on bool) { mu.Lock(); online[n] = on; mu.Unlock() }}}
	for _, srv := range srvs {
		s := newTurns(t, srv.client, TurnsConfig{})
		impls = append(impls, impl{srv.name, s, func(n string, on bool) { setOnline(t, srv.client, s.keys, n, on) }})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for step := range 300 {
		turn := fmt.Sprintf("turn-%d", rng.IntN(20))
		node := nodes[rng.IntN(len(nodes))]
		flip := nodes[rng.IntN(len(nodes))]
		flipTo := rng.IntN(3) > 0
		pool := []string{}
		for _, n := range nodes {
			if rng.IntN(3) > 0 {
				pool = append(pool, n)
			}
		}
		action := rng.IntN(4)
		seed := rng.Uint64()
		var want *affinity.Decision
		var wantErr string
		for _, im := range impls {
			im.set(flip, flipTo)
			switch action {
			case 0:
				if _, _, err := im.store.SetTurnAffinity(ctx, "s", turn, node); err != nil {
					t.Fatal(err)
				}
			case 1:
				if err := im.store.ClearTurnAffinity(ctx, turn); err != nil {
					t.Fatal(err)
				}
			}
			var strat affinity.Strategy = affinity.Rendezvous{}
			if step%2 == 0 {
				r := rand.New(rand.NewPCG(seed, 0))
				strat = affinity.Random{IntN: r.IntN}
			}
			d, err := im.store.SelectNode(ctx, turn, pool, strat, nil)
			es := ""
			if err != nil {
				es = err.Error()
			}
			if want == nil {
				want, wantErr = &d, es
				continue
			}
			if diff := cmp.Diff(*want, d); diff != "" || es != wantErr {
				t.Fatalf("step %d (%s, pool %v): %s decides %+v %q, memory %+v %q", step, turn, pool, im.name, d, es, *want, wantErr)
			}
		}
	}
}

func TestTurnsKeysAndTTL(t *testing.T) {
	ctx := context.Background()
	for _, srv := range testServers(t) {
		c := srv.client
		for _, ttl := range []time.Duration{0, time.Hour} {
			s, err := NewTurns(c, TurnsConfig{Prefix: testPrefix(t), TTL: ttl})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				c.Do(context.Background(), c.B().Del().Key(s.keys.Turn("turn")).Build())
				c.Do(context.Background(), c.B().Del().Key(s.keys.Session("sess")).Build())
			})
			if _, _, err := s.SetTurnAffinity(ctx, "sess", "turn", "node"); err != nil {
				t.Fatal(err)
			}
			p := s.keys.Prefix()
			for key, field := range map[string][2]string{
				p + ":scheduler:turn:turn":    {"affinity_node_id", "node"},
				p + ":scheduler:session:sess": {"current_turn_id", "turn"},
			} {
				got, err := c.Do(ctx, c.B().Hget().Key(key).Field(field[0]).Build()).ToString()
				if err != nil || got != field[1] {
					t.Errorf("%s: HGET %s %s = %q, %v; want %q", srv.name, key, field[0], got, err, field[1])
				}
				pttl, err := c.Do(ctx, c.B().Pttl().Key(key).Build()).AsInt64()
				switch {
				case err != nil:
					t.Error(err)
				case ttl == 0 && (pttl <= 0 || pttl > (24*time.Hour).Milliseconds()):
					// Before, the keys lived for ever by default.
					t.Errorf("%s: PTTL %s = %d, want the default TTL of a day", srv.name, key, pttl)
				case ttl > 0 && (pttl <= 0 || pttl > ttl.Milliseconds()):
					t.Errorf("%s: PTTL %s = %d, want within %v", srv.name, key, pttl, ttl)
				}
			}
		}
	}
}

func TestTurnsAndRequestsOpHook(t *testing.T) {
	ctx := context.Background()
	c := testServers(t)[0].client
	var mu sync.Mutex
	var got []string
	hook := func(op, result string, d time.Duration) {
		mu.Lock()
		got = append(got, op+"/"+result)
		mu.Unlock()
	}
	turns := newTurns(t, c, TurnsConfig{OpHook: hook})
	turns.SetTurnAffinity(ctx, "s", "t", "n")
	turns.TurnAffinity(ctx, "t")
	turns.CurrentTurn(ctx, "s")
	turns.SelectNode(ctx, "t", []string{"n"}, nil, nil)
	turns.ClearTurnAffinity(ctx, "t")
	reqs := newRequests(t, c, RequestsConfig{OpHook: hook})
	reqs.Bind(ctx, "r", func(context.Context) (scheduler.RequestBinding, error) {
		return scheduler.RequestBinding{JobID: "j"}, nil
	})
	reqs.Bind(ctx, "r", nil) // refused before Redis
	want := []string{
		"turn_affinity_set/ok", "turn_affinity_get/ok", "session_turn_get/ok", "select_node/ok", "turn_affinity_clear/ok",
		"request_binding_get/miss", "request_lock/ok", "request_binding_set/ok",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hook calls (-want +got):\n%s", diff)
	}
}
