package redisstore

import (
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// DefaultPrefix is the key prefix used when none is configured.
const DefaultPrefix = "ksana"

// Keys builds every Redis key this package uses, under a configurable
// prefix, in the layout listed below. It is the
// only place a key is spelled out: call sites never concatenate keys.
//
// Keys that a Lua script touches together carry one hash tag ({due:<n>}
// for a job's record and its deadline shard, {node:<id>}, {instance:<id>},
// {model:<model>}) so that they fall in one Redis Cluster slot.
type Keys struct {
	prefix string
}

// NewKeys returns the key builder for prefix ("" means [DefaultPrefix]).
func NewKeys(prefix string) Keys {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return Keys{prefix: prefix}
}

// Prefix returns the configured prefix.
func (k Keys) Prefix() string { return k.prefix }

// key joins the prefix and parts with ':'. Every key goes through here.
func (k Keys) key(parts ...string) string {
	var b strings.Builder
	n := len(k.prefix)
	for _, p := range parts {
		n += 1 + len(p)
	}
	b.Grow(n)
	b.WriteString(k.prefix)
	for _, p := range parts {
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}

// keyTag is key with the hash tag {kind:id} between head and tail, built
// in one allocation.
func (k Keys) keyTag(head []string, kind, id string, tail ...string) string {
	var b strings.Builder
	n := len(k.prefix) + len(kind) + len(id) + 4
	for _, p := range head {
		n += 1 + len(p)
	}
	for _, p := range tail {
		n += 1 + len(p)
	}
	b.Grow(n)
	b.WriteString(k.prefix)
	for _, p := range head {
		b.WriteByte(':')
		b.WriteString(p)
	}
	b.WriteString(":{")
	b.WriteString(kind)
	b.WriteByte(':')
	b.WriteString(id)
	b.WriteByte('}')
	for _, p := range tail {
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}

// SchedulerPresence is {prefix}:schedulers:presence:<instance_id> (string, TTL).
func (k Keys) SchedulerPresence(instanceID string) string {
	return k.key("schedulers", "presence", instanceID)
}

// SchedulersAll is {prefix}:schedulers:all (set of every instance id that
// announced itself and whose inbox was not drained since).
func (k Keys) SchedulersAll() string { return k.key("schedulers", "all") }

// SchedulerAdopt is {prefix}:schedulers:adopt:<instance_id> (string, TTL):
// the instance draining the inbox of a dead one.
func (k Keys) SchedulerAdopt(instanceID string) string {
	return k.key("schedulers", "adopt", instanceID)
}

// NodeOwner is {prefix}:nodes:owner:{node:<node_id>} (string: owning instance id, TTL).
func (k Keys) NodeOwner(nodeID string) string {
	return k.keyTag([]string{"nodes", "owner"}, "node", nodeID)
}

// SessionOwner is {prefix}:sessions:owner:{session:<session_id>} (string: owning instance id, TTL).
func (k Keys) SessionOwner(sessionID string) string {
	return k.keyTag([]string{"sessions", "owner"}, "session", sessionID)
}

// Inbox is {prefix}:streams:{instance:<instance_id>}:inbox (stream).
func (k Keys) Inbox(instanceID string) string {
	return k.keyTag([]string{"streams"}, "instance", instanceID, "inbox")
}

// DLQ is {prefix}:streams:{instance:<instance_id>}:dlq (stream).
func (k Keys) DLQ(instanceID string) string {
	return k.keyTag([]string{"streams"}, "instance", instanceID, "dlq")
}

// NodesAll is {prefix}:v1:nodes:all (set of node ids).
func (k Keys) NodesAll() string { return k.key("v1", "nodes", "all") }

// NodesLastSeen is {prefix}:v1:nodes:last_seen (zset: node id scored by last-seen ms).
func (k Keys) NodesLastSeen() string { return k.key("v1", "nodes", "last_seen") }

// NodesInstances is {prefix}:v1:nodes:instances (set of the instance ids
// that publish nodes).
func (k Keys) NodesInstances() string { return k.key("v1", "nodes", "instances") }

// NodesOf is {prefix}:v1:nodes:by_instance:<instance_id> (hash, TTL): the
// JSON snapshot of each node the instance publishes, by node id, and the
// fields ~seen (ms of its last upsert), ~ttl (presence TTL in ms) and
// ~off:<node_id> (last-seen ms of a node taken offline).
func (k Keys) NodesOf(instanceID string) string {
	return k.key("v1", "nodes", "by_instance", instanceID)
}

// NodesAlive is {prefix}:v1:nodes:alive:<instance_id> (string, TTL): the
// instance's nodes are online while it lives.
func (k Keys) NodesAlive(instanceID string) string { return k.key("v1", "nodes", "alive", instanceID) }

// Requests have no keys of their own. A request id names its job through
// scheduler.JobIDFor (a hash of the request id), so however many
// instances receive one request id at once, they all name the same job,
// and the first script to create that job's record wins while the others
// find it: idempotency needs neither a lock key
// ({prefix}:v1:requests:lock:<request_id>) nor a binding key
// ({prefix}:v1:requests:binding:<request_id>), and so no second round
// trip and no lock that a crashed instance could leave behind.

// NodeReserved is {prefix}:v1:nodes:{node:<node_id>}:reserved (zset: job id scored by expiry ms).
func (k Keys) NodeReserved(nodeID string) string {
	return k.keyTag([]string{"v1", "nodes"}, "node", nodeID, "reserved")
}

// JobFSM is {prefix}:v1:jobs:{due:<n>}:{job:<job_id>}:fsm (hash with a
// TTL): the job's whole record, its lifecycle and its book (spec, tried,
// waiters, outcome). Its hash tag is the first one, {due:<n>} with n =
// [DueShard] of the job id: the tag of the deadline shard that holds the
// job's deadline on a cluster ([Keys.Due]), so that the record and its
// deadline lie in one Cluster slot and one script may change both. The
// {job:<job_id>} that follows is no hash tag (Redis hashes the first
// braces only); it keeps the job's id readable in the key.
func (k Keys) JobFSM(jobID string) string {
	n := strconv.Itoa(DueShard(jobID))
	var b strings.Builder
	b.Grow(len(k.prefix) + len(jobID) + len(n) + 26)
	b.WriteString(k.prefix)
	b.WriteString(":v1:jobs:{due:")
	b.WriteString(n)
	b.WriteString("}:{job:")
	b.WriteString(jobID)
	b.WriteString("}:fsm")
	return b.String()
}

// DueShards is the number of sorted sets the deadline index is spread over
// on a Redis Cluster, so that its load is shared by the masters. A
// standalone server, where spreading gains nothing, keeps the whole index
// in shard 0, so that a sweep reads one key instead of sixteen.
const DueShards = 16

// Due is {prefix}:v1:jobs:due:{due:<n>} (zset: job id scored by Unix ms),
// shard n of [DueShards] on a cluster, shard 0 on a standalone server. On
// a cluster it shares its slot with the records of its jobs ([Keys.JobFSM]).
func (k Keys) Due(shard int) string {
	return k.keyTag([]string{"v1", "jobs", "due"}, "due", strconv.Itoa(shard))
}

// dueShards returns the number of shards of the deadline index on c's
// deployment: [DueShards] on a cluster, 1 on a standalone server.
func dueShards(c rueidis.Client) int {
	if c.Mode() == rueidis.ClientModeCluster {
		return DueShards
	}
	return 1
}

// dueShardOf returns the shard of jobID among shards ([DueShard] on a
// cluster, 0 on a standalone server).
func dueShardOf(jobID string, shards int) int {
	if shards == 1 {
		return 0
	}
	return DueShard(jobID)
}

// DueShard returns the shard of jobID on a cluster: FNV-1a of the id
// modulo [DueShards]. It also names the hash tag of the job's record on
// every deployment ([Keys.JobFSM]).
func DueShard(jobID string) int {
	h := uint32(2166136261)
	for i := 0; i < len(jobID); i++ {
		h ^= uint32(jobID[i])
		h *= 16777619
	}
	return int(h % DueShards)
}

// Turn is {prefix}:scheduler:turn:<turn_id> (hash; field affinity_node_id).
func (k Keys) Turn(turnID string) string { return k.key("scheduler", "turn", turnID) }

// Session is {prefix}:scheduler:session:<session_id> (hash; field current_turn_id).
func (k Keys) Session(sessionID string) string { return k.key("scheduler", "session", sessionID) }

// Keys of the storm protection primitive follow below this line.

// StormWindow is {prefix}:v1:storm:{model:<model>}:window:<node_id> (counter
// with a PX TTL): the debounce window of MODEL_NOT_AVAILABLE reports of one
// node and model, counting the reports.
func (k Keys) StormWindow(model, nodeID string) string {
	return k.keyTag([]string{"v1", "storm"}, "model", model, "window", nodeID)
}

// StormUnavailable is {prefix}:v1:storm:{model:<model>}:unavailable:<node_id>
// (string with a PX TTL): the model is unavailable on the node for the cool-down.
func (k Keys) StormUnavailable(model, nodeID string) string {
	return k.keyTag([]string{"v1", "storm"}, "model", model, "unavailable", nodeID)
}

// StormRate is {prefix}:v1:storm:{model:<model>}:rate (counter with a
// one-second PX TTL): the actions taken for the model in the current second.
func (k Keys) StormRate(model string) string {
	return k.keyTag([]string{"v1", "storm"}, "model", model, "rate")
}
