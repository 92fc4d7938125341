package redisstore

import (
	"context"
	"testing"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/storetest"
	"github.com/redis/rueidis"
)

func TestPresenceConformance(t *testing.T) {
	for _, s := range testServers(t) {
		t.Run(s.name, func(t *testing.T) {
			storetest.TestPresence(t, func(t *testing.T) scheduler.Presence {
				p, err := NewPresence(s.client, PresenceConfig{Prefix: testPrefix(t)})
				if err != nil {
					t.Fatal(err)
				}
				return p
			})
		})
	}
}

func TestOwnersConformance(t *testing.T) {
	for _, s := range testServers(t) {
		t.Run(s.name, func(t *testing.T) {
			storetest.TestOwners(t, func(t *testing.T) scheduler.Owners {
				o, err := NewOwners(s.client, OwnersConfig{Prefix: testPrefix(t)})
				if err != nil {
					t.Fatal(err)
				}
				return o
			})
		})
	}
}

func TestNodeSnapshotsConformance(t *testing.T) {
	for _, s := range testServers(t) {
		t.Run(s.name, func(t *testing.T) {
			storetest.TestNodeSnapshots(t, func(t *testing.T) storetest.SnapshotHarness {
				prefix := testPrefix(t)
				ns, err := NewNodeSnapshots(s.client, SnapshotsConfig{Prefix: prefix})
				if err != nil {
					t.Fatal(err)
				}
				return storetest.SnapshotHarness{Store: ns, Structures: redisStructures(s.client, NewKeys(prefix))}
			})
		})
	}
}

// redisStructures probes the raw layout: SISMEMBER nodes:all, ZSCORE
// nodes:last_seen, EXISTS of the presence and snapshot keys.
func redisStructures(c rueidis.Client, k Keys) func(ctx context.Context, ids []string) (map[string]storetest.NodeStructures, error) {
	return func(ctx context.Context, ids []string) (map[string]storetest.NodeStructures, error) {
		out := map[string]storetest.NodeStructures{}
		for _, id := range ids {
			rs := c.DoMulti(ctx,
				c.B().Sismember().Key(k.NodesAll()).Member(id).Build(),
				c.B().Zscore().Key(k.NodesLastSeen()).Member(id).Build(),
				c.B().Exists().Key(k.NodePresence(id)).Build(),
				c.B().Exists().Key(k.NodeSnapshot(id)).Build())
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
			p, err := rs[2].AsInt64()
			if err != nil {
				return nil, err
			}
			sn, err := rs[3].AsInt64()
			if err != nil {
				return nil, err
			}
			n.HasPresence, n.HasSnapshot = p == 1, sn == 1
			out[id] = n
		}
		return out, nil
	}
}

func TestStreamsConformance(t *testing.T) {
	for _, s := range testServers(t) {
		t.Run(s.name, func(t *testing.T) {
			storetest.TestStreams(t, func(t *testing.T, o storetest.StreamsOptions) storetest.StreamsHarness {
				st, err := NewStreams(s.client, StreamsConfig{Prefix: testPrefix(t), MaxLen: int64(o.MaxLen), DLQMaxLen: int64(o.DLQMaxLen)})
				if err != nil {
					t.Fatal(err)
				}
				return storetest.StreamsHarness{
					Sender: st,
					Inbox:  func(id, group string) scheduler.Inbox { return st.Inbox(id, group) },
					MaxLen: o.MaxLen,
				}
			})
		})
	}
}

func TestStormConformance(t *testing.T) {
	for _, s := range testServers(t) {
		t.Run(s.name, func(t *testing.T) {
			storetest.TestStorm(t, func(t *testing.T, w scheduler.StormWindows) scheduler.StormGuard {
				g, err := NewStorm(s.client, StormConfig{Prefix: testPrefix(t), Windows: w})
				if err != nil {
					t.Fatal(err)
				}
				return g
			})
		})
	}
}
