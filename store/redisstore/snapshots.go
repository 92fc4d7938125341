package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/redis/rueidis"
)

// SnapshotsConfig configures [NodeSnapshots].
type SnapshotsConfig struct {
	// Prefix is the key prefix. Default (""): [DefaultPrefix].
	Prefix string
	// Batch is how many nodes one pipeline carries. Default (0): 500.
	Batch int
	// OpHook observes every Redis operation ("snapshot_upsert",
	// "snapshot_members", "snapshot_read", "snapshot_decode",
	// "snapshot_remove_stale"). Default (nil): none.
	OpHook OpHook
}

// NodeSnapshots is the Redis [scheduler.NodeSnapshots] over the layout
// {prefix}:v1:nodes:all (SET), {prefix}:v1:nodes:last_seen (ZSET of ms),
// {prefix}:v1:nodes:presence:<node_id> and {prefix}:v1:nodes:snapshot:<node_id>
// (JSON), both with PX TTLs. On a cluster these keys live in different
// slots, so every operation is a pipeline of single-key commands in batches
// (rueidis splits it per node); no script spans them. The one atomic step
// is taking stale ids out of nodes:last_seen (a script on that key alone),
// so that two instances cleaning at once remove each node once.
type NodeSnapshots struct {
	c     rueidis.Client
	keys  Keys
	batch int
	hook  OpHook
}

var _ scheduler.NodeSnapshots = (*NodeSnapshots)(nil)

// forgetStaleScript removes from KEYS[1] those of ARGV[2:] still scored
// below ARGV[1] and returns them.
var forgetStaleScript = rueidis.NewLuaScript(`
local out = {}
for i = 2, #ARGV do
  local sc = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if sc and tonumber(sc) < tonumber(ARGV[1]) then
    redis.call('ZREM', KEYS[1], ARGV[i])
    out[#out + 1] = ARGV[i]
  end
end
return out`)

// NewNodeSnapshots returns the fleet view on c.
func NewNodeSnapshots(c rueidis.Client, cfg SnapshotsConfig) (*NodeSnapshots, error) {
	if c == nil {
		return nil, errors.New("redisstore: NewNodeSnapshots: nil client")
	}
	if cfg.Batch < 0 {
		return nil, fmt.Errorf("redisstore: SnapshotsConfig.Batch: %d is negative", cfg.Batch)
	}
	if cfg.Batch == 0 {
		cfg.Batch = 500
	}
	return &NodeSnapshots{c: c, keys: NewKeys(cfg.Prefix), batch: cfg.Batch, hook: cfg.OpHook}, nil
}

// offlineScript deletes the presence key KEYS[1] if it holds ARGV[1].
var offlineScript = rueidis.NewLuaScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

// Offline implements [scheduler.NodeSnapshots] with a compare-and-delete
// script on the node's presence key.
func (s *NodeSnapshots) Offline(ctx context.Context, nodeID, instanceID string) error {
	start := time.Now()
	err := offlineScript.Exec(ctx, s.c, []string{s.keys.NodePresence(nodeID)}, []string{instanceID}).Error()
	s.hook.observe("snapshot_offline", start, err)
	if err != nil {
		return fmt.Errorf("redisstore: take node %s offline: %w", nodeID, err)
	}
	return nil
}

// Upsert implements [scheduler.NodeSnapshots].
func (s *NodeSnapshots) Upsert(ctx context.Context, now time.Time, presenceTTL, snapshotTTL time.Duration, snaps ...scheduler.NodeSnapshot) error {
	ms := now.UnixMilli()
	presPX := time.Duration(pxMS(presenceTTL)) * time.Millisecond
	snapPX := time.Duration(pxMS(snapshotTTL)) * time.Millisecond
	for lo := 0; lo < len(snaps); lo += s.batch {
		part := snaps[lo:min(lo+s.batch, len(snaps))]
		cmds := make(rueidis.Commands, 0, 2+2*len(part))
		sadd := s.c.B().Sadd().Key(s.keys.NodesAll()).Member()
		zadd := s.c.B().Zadd().Key(s.keys.NodesLastSeen()).ScoreMember()
		for _, n := range part {
			if n.NodeID == "" {
				return errors.New("redisstore: upsert node snapshot: empty node_id")
			}
			n.LastSeenMS = ms
			b, err := json.Marshal(n)
			if err != nil {
				return fmt.Errorf("redisstore: encode snapshot of %s: %w", n.NodeID, err)
			}
			sadd = sadd.Member(n.NodeID)
			zadd = zadd.ScoreMember(float64(ms), n.NodeID)
			cmds = append(cmds,
				s.c.B().Set().Key(s.keys.NodePresence(n.NodeID)).Value(n.InstanceID).Px(presPX).Build(),
				s.c.B().Set().Key(s.keys.NodeSnapshot(n.NodeID)).Value(string(b)).Px(snapPX).Build())
		}
		cmds = append(cmds, sadd.Build(), zadd.Build())
		start := time.Now()
		err := firstError(s.c.DoMulti(ctx, cmds...))
		s.hook.observe("snapshot_upsert", start, err)
		if err != nil {
			return fmt.Errorf("redisstore: upsert node snapshots: %w", err)
		}
	}
	return nil
}

func firstError(rs []rueidis.RedisResult) error {
	for _, r := range rs {
		if err := r.Error(); err != nil {
			return err
		}
	}
	return nil
}

// members returns every id of nodes:all, read with SSCAN.
func (s *NodeSnapshots) members(ctx context.Context) ([]string, error) {
	var ids []string
	cursor := uint64(0)
	for {
		start := time.Now()
		e, err := s.c.Do(ctx, s.c.B().Sscan().Key(s.keys.NodesAll()).Cursor(cursor).Count(int64(s.batch)).Build()).AsScanEntry()
		s.hook.observe("snapshot_members", start, err)
		if err != nil {
			return nil, fmt.Errorf("redisstore: read %s: %w", s.keys.NodesAll(), err)
		}
		ids = append(ids, e.Elements...)
		if cursor = e.Cursor; cursor == 0 {
			break
		}
	}
	sort.Strings(ids)
	// SSCAN may return an element twice.
	out := ids[:0]
	for i, id := range ids {
		if i == 0 || id != ids[i-1] {
			out = append(out, id)
		}
	}
	return out, nil
}

// Fleet implements [scheduler.NodeSnapshots]: SSCAN of nodes:all, then GET
// of each snapshot and EXISTS of each presence in pipelined batches.
// Snapshots that do not decode are skipped and reported to the OpHook as
// "snapshot_decode" errors.
func (s *NodeSnapshots) Fleet(ctx context.Context) ([]scheduler.NodeSnapshot, error) {
	ids, err := s.members(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]scheduler.NodeSnapshot, 0, len(ids))
	for lo := 0; lo < len(ids); lo += s.batch {
		part := ids[lo:min(lo+s.batch, len(ids))]
		cmds := make(rueidis.Commands, 0, 2*len(part))
		for _, id := range part {
			cmds = append(cmds,
				s.c.B().Get().Key(s.keys.NodeSnapshot(id)).Build(),
				s.c.B().Exists().Key(s.keys.NodePresence(id)).Build())
		}
		start := time.Now()
		rs := s.c.DoMulti(ctx, cmds...)
		var opErr error
		for i, id := range part {
			raw, err := rs[2*i].ToString()
			if isNil(err) {
				continue // expired: stale removal will take the id out
			}
			if err != nil {
				opErr = err
				break
			}
			online, err := rs[2*i+1].AsInt64()
			if err != nil {
				opErr = err
				break
			}
			var n scheduler.NodeSnapshot
			if derr := json.Unmarshal([]byte(raw), &n); derr != nil || n.NodeID != id {
				s.hook.observe("snapshot_decode", time.Now(), errors.New("bad snapshot"))
				continue
			}
			n.Online = online == 1
			out = append(out, n)
		}
		s.hook.observe("snapshot_read", start, opErr)
		if opErr != nil {
			return nil, fmt.Errorf("redisstore: read node snapshots: %w", opErr)
		}
	}
	return out, nil
}

// RemoveStale implements [scheduler.NodeSnapshots]. A batch at a time, it
// reads the ids scored below cutoff in nodes:last_seen, removes them from
// nodes:all and deletes their presence and snapshot keys, and last takes
// them out of nodes:last_seen with a script that skips ids seen again
// meanwhile. An interrupted round leaves the ids in nodes:last_seen, so the
// next round finishes the job; rounds of several instances may overlap.
func (s *NodeSnapshots) RemoveStale(ctx context.Context, cutoff time.Time) ([]string, error) {
	removed := []string{}
	ms := strconv.FormatInt(cutoff.UnixMilli(), 10)
	for {
		start := time.Now()
		ids, err := s.c.Do(ctx, s.c.B().Zrangebyscore().Key(s.keys.NodesLastSeen()).Min("-inf").Max("("+ms).
			Limit(0, int64(s.batch)).Build()).AsStrSlice()
		var gone []string
		if err == nil && len(ids) > 0 {
			cmds := make(rueidis.Commands, 0, 1+2*len(ids))
			cmds = append(cmds, s.c.B().Srem().Key(s.keys.NodesAll()).Member(ids...).Build())
			for _, id := range ids {
				cmds = append(cmds,
					s.c.B().Del().Key(s.keys.NodePresence(id)).Build(),
					s.c.B().Del().Key(s.keys.NodeSnapshot(id)).Build())
			}
			if err = firstError(s.c.DoMulti(ctx, cmds...)); err == nil {
				gone, err = forgetStaleScript.Exec(ctx, s.c, []string{s.keys.NodesLastSeen()}, append([]string{ms}, ids...)).AsStrSlice()
			}
		}
		s.hook.observe("snapshot_remove_stale", start, err)
		if err != nil {
			return removed, fmt.Errorf("redisstore: remove stale nodes: %w", err)
		}
		removed = append(removed, gone...)
		if len(ids) < s.batch || len(gone) == 0 {
			break
		}
	}
	sort.Strings(removed)
	return removed, nil
}
