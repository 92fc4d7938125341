// Package scheduler is the multi-instance dispatch plane: several dispatch
// instances share one Redis (standalone or Cluster) so that nodes and
// sessions connected to different instances can work together, and no job
// is dispatched twice or lost between them.
//
// The package declares the stores it needs as small interfaces, with
// in-memory reference implementations (the Mem types) for tests and single
// process use; store/redisstore implements them on Redis, and every
// implementation passes the same suites in store/storetest. The runtime
// loops ([Heartbeat], [Bindings], [SnapshotSync], [Deliverer]) live here
// and take their stores as arguments; the pure decisions live in packages
// fsm and affinity.
//
// # Configuration
//
// [Config] is the [scheduler.phase2] table of a config.toml. "Phase 2"
// names the dispatch plane's multi-instance mode, in which several
// instances share their state (owners, jobs, reservations, delivery) in
// Redis; the enabled field (default false) switches it on. Its fields are
// snake_case (enabled, instance_id, redis.mode, redis.url,
// redis.cluster_urls, redis.key_prefix, owner_ttl_seconds, stream_*,
// dlq_*, node_snapshot.*) plus [scheduler.phase2.storm]. Zero fields mean
// the defaults listed on each field ([Config.WithDefaults]);
// [Config.Validate] returns a [*ConfigError] naming the bad field, such as
// "scheduler.phase2.redis.mode: unknown mode "x" (single|cluster)".
// store/redisstore.LoadConfig reads the file.
//
// # Instances and presence
//
// Each instance has an instance_id (configured, or generated when "auto")
// and announces itself in [Presence] with a TTL of owner_ttl_seconds.
// [Heartbeat] renews the announcement every third of the TTL and withdraws
// it on shutdown, so [Presence.Alive] tells another instance whether a
// message routed to this one will be read.
//
// # Owner bindings
//
// The instance that holds a node's or a session's WebSocket owns it:
// [Owners] maps the id to the instance id with a TTL. [Bindings.Connect]
// binds on connect (the newest connection wins), [Bindings.Run] renews,
// and [Bindings.Disconnect] releases with compare-and-delete, so a node
// that already reconnected to another instance is never unbound by the old
// one; a binding taken over elsewhere is reported to the lost callback.
//
// # Node snapshots
//
// [NodeSnapshots] is the fleet view every instance shares: the set of node
// ids, their last-seen times and per node a presence (online) and a
// [NodeSnapshot]. [SnapshotSync] upserts this instance's nodes every
// refresh_interval_ms, hands the whole fleet to the node registry, and
// removes nodes not seen for remove_stale_after_seconds from every
// structure, so the set does not grow for ever.
//
// # Delivery between instances
//
// A message for a node or session owned by another instance goes to that
// instance's inbox through a [Sender] (a Redis stream trimmed with MAXLEN
// ~). The owner consumes it with a [Deliverer] over its [Inbox]: a consumer
// group read in blocking batches, a [Handler] per message, XACK + XDEL of
// the successes, takeover of entries left idle by a dead consumer
// ([Inbox.Reclaim]), and a dead-letter queue for entries delivered more
// than dlq_max_deliveries times, or that the handler rejects as
// [ErrMalformed]. Delivery is at least once; a poison message reaches the
// dead-letter queue exactly once, with its original fields, its source id,
// its delivery count and a reason ([DeadLetter]).
//
// # Storm protection
//
// A node that keeps answering MODEL_NOT_AVAILABLE must not flood the plane.
// [StormGuard.Report] debounces the reports per node and model (the first
// of a window marks the model unavailable on that node for a cool-down,
// which selection checks with [StormGuard.Unavailable]; later ones are
// only counted) and rate-limits the marks per model and second. The state
// is shared, so every instance agrees; see [StormConfig] for the windows.
//
// # Metrics
//
// Metrics come through hooks, never package-level collectors: [Hooks]
// gives scheduler_phase2_inbox_pending ([Hooks].InboxPending, every
// dlq_scan_interval_ms) and scheduler_phase2_dlq_moved_total
// ([Hooks].DLQMoved, once per move); store/redisstore's OpHook gives
// scheduler_phase2_redis_op_total{op,result}.
//
// # Jobs, reservations, request idempotency and turn affinity
//
// A [JobStore] keeps each job's [JobRecord] (package fsm's state and
// attempt, and its node) and applies events atomically; [JobTransition] says
// whether the event was a replay and which node's slot to free. A
// [ReservationStore] holds nodes' concurrency slots with an expiry, so a
// crashed instance never holds one longer than its TTL. A job finishes in
// three calls: ApplyJob(job_result), [ReservationStore.Release] on FreeNode,
// ApplyJob(release). A [RequestStore] binds each request id to one job:
// [RequestStore.Bind] calls create once however many duplicates arrive on
// however many instances. A [TurnStore] applies package affinity's rules:
// SelectNode picks a job's node (its turn's affinity node while that is
// online and in the pool, else one of the pool), SetTurnAffinity is the
// write-once rule applied right after a turn's first job is assigned, and
// ClearTurnAffinity runs on a finalize reason that ends the turn. [MemJobs], [MemReservations],
// [MemRequests] and [MemTurns] are the in-memory reference implementations;
// store/redisstore has the Redis ones and store/storetest the suites both
// pass. A bad argument is an [*ArgumentError] ([ErrInvalidArgument]) naming
// it.
package scheduler
