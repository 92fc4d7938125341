package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/storetest"
	"github.com/redis/rueidis"
)

// TestPlaneConformance runs every suite of the plane's stores on the
// standalone server and on the cluster, each store under a key prefix of
// its own (testPrefix), the store suites in parallel.
func TestPlaneConformance(t *testing.T) {
	for _, srv := range testServers(t) {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel() // the two servers side by side: each test has its own prefix
			storetest.TestPlaneStores(t, planeAdapter(srv.client))
		})
	}
}

func planeAdapter(c rueidis.Client) storetest.PlaneAdapter {
	must := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	return storetest.PlaneAdapter{
		Presence: func(t *testing.T) scheduler.Presence {
			p, err := NewPresence(c, PresenceConfig{Prefix: testPrefix(t)})
			must(t, err)
			return p
		},
		Owners: func(t *testing.T) scheduler.Owners {
			o, err := NewOwners(c, OwnersConfig{Prefix: testPrefix(t)})
			must(t, err)
			return o
		},
		Snapshots: func(t *testing.T) storetest.SnapshotHarness {
			prefix := testPrefix(t)
			ns, err := NewNodeSnapshots(c, SnapshotsConfig{Prefix: prefix})
			must(t, err)
			return storetest.SnapshotHarness{Store: ns, Structures: redisStructures(c, NewKeys(prefix))}
		},
		Streams: func(t *testing.T, o storetest.StreamsOptions) storetest.StreamsHarness {
			st, err := NewStreams(c, StreamsConfig{Prefix: testPrefix(t), MaxLen: int64(o.MaxLen), DLQMaxLen: int64(o.DLQMaxLen)})
			must(t, err)
			return storetest.StreamsHarness{
				Sender: st,
				Inbox:  func(id, group string) scheduler.Inbox { return st.Inbox(id, group) },
				MaxLen: o.MaxLen,
			}
		},
		Storm: func(t *testing.T, w scheduler.StormWindows) scheduler.StormGuard {
			g, err := NewStorm(c, StormConfig{Prefix: testPrefix(t), Windows: w})
			must(t, err)
			return g
		},
		Jobs: func(t *testing.T, max int) scheduler.JobStore { return newJobs(t, c, JobsConfig{MaxAttempts: max}) },
		Due: func(t *testing.T) scheduler.DueIndex {
			d, err := NewDue(c, DueConfig{Prefix: testPrefix(t)})
			must(t, err)
			return d
		},
		JobsDue: func(t *testing.T) (scheduler.JobStore, storetest.DueProbe) {
			prefix := testPrefix(t)
			j, err := NewJobs(c, JobsConfig{Prefix: prefix, TTL: 10 * time.Minute})
			must(t, err)
			d, err := NewDue(c, DueConfig{Prefix: prefix})
			must(t, err)
			j.due = d // as NewStores wires them
			return j, d
		},
		// The server's clock runs: expiry is waited for.
		Reservations: func(t *testing.T) storetest.ReservationHarness {
			return storetest.ReservationHarness{Store: newReservations(t, c, nil)}
		},
		Turns: func(t *testing.T) storetest.TurnHarness {
			s := newTurns(t, c, TurnsConfig{})
			return storetest.TurnHarness{Store: s, CurrentTurn: func(t *testing.T, id string) string {
				v, err := s.hget(context.Background(), "test", s.keys.Session(id), FieldCurrentTurnID)
				must(t, err)
				return v
			}}
		},
		Dispatcher: func(t *testing.T) storetest.DispatcherHarness {
			cfg := storetest.DispatchTestConfig("x")
			prefix := testPrefix(t)
			keys := NewKeys(prefix)
			return storetest.DispatcherHarness{
				Stores: func() scheduler.Stores {
					st, err := NewStores(c, cfg, StoresConfig{KeyPrefix: prefix, Group: "g"})
					must(t, err)
					return st
				},
				Poison: func(id string, f scheduler.Fields) error {
					fv := c.B().Xadd().Key(keys.Inbox(id)).Id("*").FieldValue()
					for _, p := range f {
						fv = fv.FieldValue(p.Name, p.Value)
					}
					return c.Do(context.Background(), fv.Build()).Error()
				},
			}
		},
	}
}

// redisStructures probes the raw layout: SISMEMBER nodes:all, ZSCORE
// nodes:last_seen, HEXISTS of the node in each instance's hash (its
// snapshot) and EXISTS of that instance's alive key (its presence).
func redisStructures(c rueidis.Client, k Keys) func(ctx context.Context, ids []string) (map[string]storetest.NodeStructures, error) {
	return func(ctx context.Context, ids []string) (map[string]storetest.NodeStructures, error) {
		out := map[string]storetest.NodeStructures{}
		insts, err := c.Do(ctx, c.B().Smembers().Key(k.NodesInstances()).Build()).AsStrSlice()
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			rs := c.DoMulti(ctx,
				c.B().Sismember().Key(k.NodesAll()).Member(id).Build(),
				c.B().Zscore().Key(k.NodesLastSeen()).Member(id).Build())
			var n storetest.NodeStructures
			var err error
			if n.InAll, err = rs[0].AsBool(); err != nil {
				return nil, err
			}
			if _, err = rs[1].AsFloat64(); err == nil {
				n.InLastSeen = true
			} else if !isNil(err) {
				return nil, err
			}
			for _, inst := range insts {
				has, err := c.Do(ctx, c.B().Hexists().Key(k.NodesOf(inst)).Field(id).Build()).AsBool()
				if err != nil {
					return nil, err
				}
				alive, err := c.Do(ctx, c.B().Exists().Key(k.NodesAlive(inst)).Build()).AsInt64()
				if err != nil {
					return nil, err
				}
				n.HasSnapshot = n.HasSnapshot || has
				n.HasPresence = n.HasPresence || has && alive == 1
			}
			out[id] = n
		}
		return out, nil
	}
}
