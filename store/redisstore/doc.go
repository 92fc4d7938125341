// Package redisstore implements the stores of package scheduler on Redis,
// through rueidis, for a standalone server and for a Redis Cluster alike.
//
// # Connecting
//
// [NewClient] builds a rueidis client from a [ClientConfig]: the URL of a
// standalone server, or the seed URLs of a cluster. [NewStores] builds
// every store a [scheduler.Dispatcher] needs in one call from the plane's
// [scheduler.Config] and a [StoresConfig] (key prefix, consumer group,
// inbox bounds, operation hook); each store can also be built alone as
// NewX(client, XConfig). The package reads no file and no environment
// variable.
//
// # Key layout
//
// [Keys] is the one place a key is spelled. Keys that one Lua script
// touches together share a hash tag ({due:<n>} for a job's record and its
// deadline shard, {node:<id>}, {instance:<id>}, {model:<model>}), so every
// script runs in one Cluster slot; operations over keys of different slots
// (the node snapshots) are pipelines of single-key commands, which rueidis
// splits per node.
//
// # Presence, owners and node snapshots
//
// [Presence] writes {prefix}:schedulers:presence:<instance_id> with SET PX
// and keeps every instance id in the set {prefix}:schedulers:all until its
// inbox is drained after its death; {prefix}:schedulers:adopt:<instance_id>
// (SET NX PX) lets one live instance at a time drain a dead one's inbox.
// [Owners] binds {prefix}:nodes:owner:{node:<node_id>} and
// {prefix}:sessions:owner:{session:<session_id>}; renewal and release are
// scripts whose one key is the owner key (compare-and-pexpire,
// compare-and-delete). [NodeSnapshots] keeps {prefix}:v1:nodes:all and
// {prefix}:v1:nodes:last_seen for every node, and per instance one hash of
// its nodes' JSON snapshots, {prefix}:v1:nodes:by_instance:<instance_id>
// (kept for RemoveStaleAfter), and one key alive for PresenceTTL,
// {prefix}:v1:nodes:alive:<instance_id>, listed in the set
// {prefix}:v1:nodes:instances. An idle refresh so costs a few commands per
// instance however many nodes there are. These replace the per-node keys
// {prefix}:v1:nodes:presence:<node_id> and {prefix}:v1:nodes:snapshot:<node_id>
// of earlier versions, which nothing reads any more (they expire on their
// own). Stale nodes are removed from every structure.
//
// # Streams and the dead-letter queue
//
// [Streams] appends to {prefix}:streams:{instance:<instance_id>}:inbox
// with one script (XLEN, then XADD) that refuses a message to an inbox
// holding [StoresConfig].InboxMaxLen entries ([scheduler.ErrInboxFull]),
// or, while its last reading of the inbox's length is under 100 ms old
// and showed the inbox under a quarter full, with a bare XADD: entries
// leave an inbox only when handled or dead-lettered, never by trimming.
// Messages sent to one inbox while a call for it is under way wait for it
// and go together in the next call (an XADD each). [Streams.Inbox] gives
// the consumer side: XGROUP CREATE MKSTREAM, XREADGROUP with BLOCK on
// rueidis's dedicated blocking connections, XACK + XDEL (of the entries
// handled within 100 ms, together), XAUTOCLAIM, the XPENDING summary and extended
// forms, and the move to {prefix}:streams:{instance:<instance_id>}:dlq as
// one script over the inbox and the DLQ (same slot): XPENDING, XCLAIM with
// the idle minimum, XADD MAXLEN ~ with the original fields followed by
// dlq_source_id, dlq_delivery_count and dlq_reason, XACK, XDEL. Being one
// script, a message is moved exactly once however many consumers scan. A
// missing group (after a server restart without persistence) is reported
// as [scheduler.ErrNoGroup], and the [scheduler.Deliverer] creates it again.
//
// # Storm protection
//
// [Storm] decides each MODEL_NOT_AVAILABLE report in one script over the
// keys of [Keys.StormWindow], [Keys.StormUnavailable] and [Keys.StormRate].
//
// # Metrics
//
// Every Redis operation of the stores reports to the [OpHook] of its
// config with a stable operation name and [ResultOK], [ResultMiss] or
// [ResultError]: the source of scheduler_phase2_redis_op_total{op,result}.
// [Inbox.Pending] (the XPENDING summary) feeds scheduler_phase2_inbox_pending
// through [scheduler.Hooks].
//
// # Jobs, reservations, requests and turns
//
// [Jobs] keeps each job's lifecycle in the hash
// {prefix}:v1:jobs:{due:<n>}:{job:<job_id>}:fsm (state, attempt, node_id,
// created_at_ms, updated_at_ms, dispatched_at_ms, queued_at_ms (when the
// current attempt began to wait for a node; absent in the first attempt,
// which waits since created_at_ms); a TTL of at least the configured one after every change, kept in expires_at_ms) and moves it
// with one Lua script: lines generated from package fsm's table by
// [GenerateFSMLua], then the static Lua of the step (lua/fsm_step.lua,
// embedded; the whole script is kept in testdata/fsm_apply.lua), which
// replies with an array; so the rules exist once and each transition is atomic on
// the job's slot alone. [Reservations] holds each node's slots in the ZSET
// {prefix}:v1:nodes:{node:<node_id>}:reserved scored by expiry on the
// server's clock; Reserve is one script (add, check capacity, dropping
// the expired members when they are in the way; idempotent for a job). On
// a standalone Redis [Jobs.OpenOnSlot] runs the same reservation inside the
// open script, so a new job and its node's slot are one call; on a cluster
// the node's ZSET lies in the node's slot, and the reserve script runs
// first, then the open script (two calls; a crash between them leaves the
// slot taken until the reservation expires). [Jobs.ReleaseJobs] releases a
// sweep's finished jobs in one call of a batch script generated from the
// same transition script (on a cluster one call per deadline shard). Requests need no keys: the job id is derived
// from the request id (scheduler.JobIDFor), so duplicates of a request on
// any number of instances name one job and the job's own atomic creation
// decides which of them made it; no lock key, no binding key (see [Keys]).
// [Turns] keeps turn affinity in
// {prefix}:scheduler:turn:<turn_id> (affinity_node_id: written once with
// HSETNX, cleared with HDEL) and {prefix}:scheduler:session:<session_id>
// (current_turn_id), with a garbage-collection TTL of a day by default
// (far longer than a turn, so the affinity never times out during one). A stored value that does not decode is a
// [*CorruptError] and stays as it is.
//
// # The job record and the deadline index
//
// [Jobs] keeps each job's spec, tried nodes, waiting sessions and outcome
// in the job's hash {prefix}:v1:jobs:{due:<n>}:{job:<job_id>}:fsm beside
// its lifecycle, so that each step (open, dispatch, ack, start, result,
// fail over, fail, release) is one script on one key. [Due] spreads the
// deadline index over [DueShards] sorted sets {prefix}:v1:jobs:due:{due:<n>}
// on a cluster, so that the masters share the load, and keeps it in one,
// {due:0}, on a standalone server; a claim reads the earliest entry of
// each shard it needs to (one pipeline: a shard this process wrote to
// since, whose earliest deadline is due, or unread for [DueRefresh]) and
// runs one script per shard that holds a due job (a second one). A
// job's record carries the hash tag of its deadline shard on a cluster,
// {due:<n>} with n = [DueShard] of its id, so the record and its deadline
// share a slot: Jobs.Open writes a new job's deadline to its shard inside
// the open script, one call on a cluster as on a standalone server, so
// that no job is ever stored without its deadline. Records of an older
// layout ({prefix}:v1:jobs:{job:<job_id>}:fsm) are not read: drain the
// plane before upgrading.
//
// # Tests
//
// The tests run the store/storetest suites against a standalone server and
// a 3-master cluster whose addresses ./test.sh exports (see
// internal/testenv); the restart test starts a private redis-server. Each
// test's keys live under a prefix of its own, deleted on both servers when
// the test ends, passed or failed (store/storetest.CleanupRedisKeys).
package redisstore
