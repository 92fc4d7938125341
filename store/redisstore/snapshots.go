package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
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

// NodeSnapshots is the Redis [scheduler.NodeSnapshots]. Each instance
// keeps its nodes in one hash, {prefix}:v1:nodes:by_instance:<instance_id>
// (node id to JSON snapshot, kept for the snapshot TTL), and one key,
// {prefix}:v1:nodes:alive:<instance_id>, alive for the presence TTL; the
// set {prefix}:v1:nodes:instances lists the instances. {prefix}:v1:nodes:all
// (SET) and {prefix}:v1:nodes:last_seen (ZSET of ms) list every node. So an
// upsert is a few commands per instance and a fleet read two per instance,
// however many nodes there are. A node is online while its instance's alive
// key lives, it was upserted within the presence TTL of its instance's last
// upsert, and it was not taken offline since. A node listed by two
// instances (it moved) is the one seen last. Every command touches one key,
// so the layout works on a cluster; the one atomic step across nodes is
// taking stale ids out of nodes:last_seen (a script on that key alone), so
// that two instances cleaning at once remove each node once.
type NodeSnapshots struct {
	c     rueidis.Client
	keys  Keys
	batch int
	hook  OpHook
}

var _ scheduler.NodeSnapshots = (*NodeSnapshots)(nil)

// Hash fields of an instance's nodes that are not node ids.
const (
	fieldSeen   = "~seen"
	fieldTTL    = "~ttl"
	fieldOffPfx = "~off:"
)

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

// offlineScript marks the node ARGV[1] of the hash KEYS[1] offline as of
// its last-seen time, if the hash holds it.
var offlineScript = rueidis.NewLuaScript(`
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return 0 end
local ok, n = pcall(cjson.decode, v)
if not ok or type(n) ~= 'table' or not n.last_seen_ms then return 0 end
redis.call('HSET', KEYS[1], '` + fieldOffPfx + `' .. ARGV[1], string.format('%d', n.last_seen_ms))
return 1`)

// Offline implements [scheduler.NodeSnapshots] with a script on
// instanceID's hash: the node stays offline until the instance upserts it
// again.
func (s *NodeSnapshots) Offline(ctx context.Context, nodeID, instanceID string) error {
	start := time.Now()
	err := offlineScript.Exec(ctx, s.c, []string{s.keys.NodesOf(instanceID)}, []string{nodeID}).Error()
	s.hook.observe("snapshot_offline", start, err)
	if err != nil {
		return fmt.Errorf("redisstore: take node %s offline: %w", nodeID, err)
	}
	return nil
}

// Upsert implements [scheduler.NodeSnapshots]: per instance of snaps an
// HSET of its hash, a PEXPIRE of it and a SET PX of its alive key, then an
// SADD and a ZADD of every id, in one pipeline per batch.
func (s *NodeSnapshots) Upsert(ctx context.Context, now time.Time, presenceTTL, snapshotTTL time.Duration, snaps ...scheduler.NodeSnapshot) error {
	ms := now.UnixMilli()
	msStr := strconv.FormatInt(ms, 10)
	presPX := time.Duration(pxMS(presenceTTL)) * time.Millisecond
	for lo := 0; lo < len(snaps); lo += s.batch {
		part := snaps[lo:min(lo+s.batch, len(snaps))]
		byInst := map[string][]scheduler.NodeSnapshot{}
		var order []string
		sadd := s.c.B().Sadd().Key(s.keys.NodesAll()).Member()
		zadd := s.c.B().Zadd().Key(s.keys.NodesLastSeen()).ScoreMember()
		for _, n := range part {
			if n.NodeID == "" {
				return errors.New("redisstore: upsert node snapshot: empty node_id")
			}
			if strings.HasPrefix(n.NodeID, "~") {
				return fmt.Errorf("redisstore: upsert node snapshot: node_id %q starts with ~", n.NodeID)
			}
			if n.InstanceID == "" {
				return fmt.Errorf("redisstore: upsert node snapshot of %s: empty instance_id", n.NodeID)
			}
			if _, ok := byInst[n.InstanceID]; !ok {
				order = append(order, n.InstanceID)
			}
			byInst[n.InstanceID] = append(byInst[n.InstanceID], n)
			sadd = sadd.Member(n.NodeID)
			zadd = zadd.ScoreMember(float64(ms), n.NodeID)
		}
		cmds := make(rueidis.Commands, 0, 3+4*len(order))
		for _, inst := range order {
			hset := s.c.B().Hset().Key(s.keys.NodesOf(inst)).FieldValue().
				FieldValue(fieldSeen, msStr).FieldValue(fieldTTL, strconv.FormatInt(pxMS(presenceTTL), 10))
			for _, n := range byInst[inst] {
				n.LastSeenMS = ms
				n.Online = false
				b, err := json.Marshal(n)
				if err != nil {
					return fmt.Errorf("redisstore: encode snapshot of %s: %w", n.NodeID, err)
				}
				hset = hset.FieldValue(n.NodeID, string(b))
			}
			cmds = append(cmds, hset.Build(),
				s.c.B().Pexpire().Key(s.keys.NodesOf(inst)).Milliseconds(pxMS(snapshotTTL)).Build(),
				s.c.B().Set().Key(s.keys.NodesAlive(inst)).Value(msStr).Px(presPX).Build())
		}
		cmds = append(cmds, sadd.Build(), zadd.Build(), s.c.B().Sadd().Key(s.keys.NodesInstances()).Member(order...).Build())
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

// instances returns the ids of nodes:instances.
func (s *NodeSnapshots) instances(ctx context.Context) ([]string, error) {
	start := time.Now()
	ids, err := s.c.Do(ctx, s.c.B().Smembers().Key(s.keys.NodesInstances()).Build()).AsStrSlice()
	s.hook.observe("snapshot_members", start, err)
	if err != nil {
		return nil, fmt.Errorf("redisstore: read %s: %w", s.keys.NodesInstances(), err)
	}
	sort.Strings(ids)
	return ids, nil
}

// Fleet implements [scheduler.NodeSnapshots]: SMEMBERS of nodes:instances,
// then HGETALL of each instance's hash and EXISTS of its alive key, in one
// pipeline. Snapshots that do not decode are skipped and reported to the
// OpHook as "snapshot_decode" errors. An instance whose hash and alive key
// are both gone leaves nodes:instances.
func (s *NodeSnapshots) Fleet(ctx context.Context) ([]scheduler.NodeSnapshot, error) {
	insts, err := s.instances(ctx)
	if err != nil {
		return nil, err
	}
	cmds := make(rueidis.Commands, 0, 2*len(insts))
	for _, id := range insts {
		cmds = append(cmds,
			s.c.B().Hgetall().Key(s.keys.NodesOf(id)).Build(),
			s.c.B().Exists().Key(s.keys.NodesAlive(id)).Build())
	}
	start := time.Now()
	rs := s.c.DoMulti(ctx, cmds...)
	best := map[string]scheduler.NodeSnapshot{}
	var gone []string
	var opErr error
	for i, inst := range insts {
		h, err := rs[2*i].AsStrMap()
		if err != nil {
			opErr = err
			break
		}
		alive, err := rs[2*i+1].AsInt64()
		if err != nil {
			opErr = err
			break
		}
		if len(h) == 0 && alive == 0 {
			gone = append(gone, inst)
			continue
		}
		seen, _ := strconv.ParseInt(h[fieldSeen], 10, 64)
		ttl, _ := strconv.ParseInt(h[fieldTTL], 10, 64)
		for f, raw := range h {
			if strings.HasPrefix(f, "~") {
				continue
			}
			var n scheduler.NodeSnapshot
			if derr := json.Unmarshal([]byte(raw), &n); derr != nil || n.NodeID != f {
				s.hook.observe("snapshot_decode", time.Now(), errors.New("bad snapshot"))
				continue
			}
			n.Online = alive == 1 && n.LastSeenMS+ttl > seen
			if off, ok := h[fieldOffPfx+f]; ok {
				if offMS, err := strconv.ParseInt(off, 10, 64); err == nil && offMS >= n.LastSeenMS {
					n.Online = false
				}
			}
			if b, ok := best[f]; ok && (b.LastSeenMS > n.LastSeenMS || b.LastSeenMS == n.LastSeenMS && b.Online) {
				continue
			}
			best[f] = n
		}
	}
	s.hook.observe("snapshot_read", start, opErr)
	if opErr != nil {
		return nil, fmt.Errorf("redisstore: read node snapshots: %w", opErr)
	}
	if len(gone) > 0 {
		start := time.Now()
		err := s.c.Do(ctx, s.c.B().Srem().Key(s.keys.NodesInstances()).Member(gone...).Build()).Error()
		s.hook.observe("snapshot_remove_stale", start, err)
	}
	out := make([]scheduler.NodeSnapshot, 0, len(best))
	for _, n := range best {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out, nil
}

// RemoveStale implements [scheduler.NodeSnapshots]. A batch at a time, it
// reads the ids scored below cutoff in nodes:last_seen, removes them from
// nodes:all and from every instance's hash, and last takes them out of
// nodes:last_seen with a script that skips ids seen again meanwhile. An
// interrupted round leaves the ids in nodes:last_seen, so the next round
// finishes the job; rounds of several instances may overlap.
func (s *NodeSnapshots) RemoveStale(ctx context.Context, cutoff time.Time) ([]string, error) {
	removed := []string{}
	ms := strconv.FormatInt(cutoff.UnixMilli(), 10)
	var insts []string
	for {
		start := time.Now()
		ids, err := s.c.Do(ctx, s.c.B().Zrangebyscore().Key(s.keys.NodesLastSeen()).Min("-inf").Max("("+ms).
			Limit(0, int64(s.batch)).Build()).AsStrSlice()
		var gone []string
		if err == nil && len(ids) > 0 && insts == nil {
			insts, err = s.instances(ctx)
		}
		if err == nil && len(ids) > 0 {
			fields := make([]string, 0, 2*len(ids))
			for _, id := range ids {
				fields = append(fields, id, fieldOffPfx+id)
			}
			cmds := make(rueidis.Commands, 0, 1+len(insts))
			cmds = append(cmds, s.c.B().Srem().Key(s.keys.NodesAll()).Member(ids...).Build())
			for _, inst := range insts {
				cmds = append(cmds, s.c.B().Hdel().Key(s.keys.NodesOf(inst)).Field(fields...).Build())
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
