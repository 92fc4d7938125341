// Package scheduler is the multi-instance dispatch plane: several dispatch
// instances share one Redis (standalone or Cluster) so that nodes and
// sessions connected to different instances can work together, and no job
// is dispatched twice or lost between them.
//
// [Dispatcher] is the whole of it: one per instance. Nodes (workers that
// run jobs) and sessions (clients that request them) attach to the
// instance that holds their connection, through the small [NodeConn] and
// [SessionConn] interfaces, so the package knows nothing of WebSocket
// (cmd/dispatcher puts it behind one). The parts it is built from are
// exported too, for a user who wires a plane differently.
//
// The package declares the stores it needs as small interfaces, grouped in
// [Stores], with in-memory reference implementations ([NewMemStores]) for
// tests and a single process without Redis; store/redisstore implements
// them on Redis (redisstore.NewStores), and every implementation passes the
// same suites in store/storetest. The runtime loops ([Heartbeat],
// [Bindings], [SnapshotSync], [Deliverer]) take their stores as arguments;
// the pure decisions live in packages fsm and affinity.
//
// # The Dispatcher
//
// [Dispatcher.Submit] turns a session's [Request] into a job and
// dispatches it:
//
//  1. The job id is derived from the request id ([JobIDFor]), and the job
//     is opened in the [JobStore] at most once, in CREATED with its spec and
//     its session as first waiter: a request id sent again, to any
//     instance, at any time, finds the same job; its session becomes one
//     more waiter, or, when the job is over, is answered at once.
//  2. A node is selected among the fleet: online, in the job's pool, with
//     its model, not marked unavailable for that model by the
//     [StormGuard], not already tried for this job (unless no other node
//     can take it), with a free slot. The turn's affinity node comes
//     first when it qualifies; otherwise the choice is random, or the
//     less loaded of two random nodes with [SelectTwoChoices]. The fleet
//     is each instance's own nodes plus the shared node snapshots
//     (node_snapshot.enabled; without them an instance sees only its own
//     nodes), refreshed every [FleetConfig].RefreshInterval. Selection
//     reads an index of that view: per (pool, model), the sorted ids of
//     the nodes online there, built once after each change of who is
//     eligible and shared by every job until the next; a job costs the
//     same at 100 nodes as at 10,000 (the draw and, with two choices,
//     two loads), and filters its pool's list only in a retry that
//     leaves nodes out.
//  3. One of the node's slots is reserved ([ReservationStore]), the
//     dispatch is recorded with the attempt checked (DISPATCHED; a new
//     job's first dispatch is its open step, which a [SlotOpener] store
//     does in one step with the reservation), and the
//     turn's affinity is written right after its first job has a node (a
//     manual or timeout finalize clears it instead: the turn is over).
//  4. job_assign goes to the node: directly when it is attached here, else
//     through the inbox of the instance that holds it.
//
// The node answers through [Dispatcher.NodeEvent] on its own instance:
// job_ack (ACCEPTED), job_started or asr_partial (RUNNING), job_result
// (FINISHED: the outcome is stored, every waiting session is answered
// through its instance, the slot freed, RELEASED). Only the node the
// current attempt went to may move a job ([ErrWrongNode]); an event of an
// older attempt is refused ([fsm.ErrStaleAttempt]); both are counted by
// Hooks.Rejected. model_not_available is reported to the storm guard and
// the job goes to another node. The instance that sent the job to its
// node takes job_ack and job_started without a step on the record (it
// renews the lease from what it saw) and writes the furthest progress in
// one step within two ticks of at most 10 ms (AckTimeout/20, at least
// 1 ms), before it detaches the node, and before Run returns; a
// job_result that comes first moves the record from DISPATCHED or
// ACCEPTED to FINISHED and nothing else is written. A node that acks,
// starts and answers at once thus costs one step. Events of jobs not sent
// from here, or of another attempt, go to the record, which refuses or
// takes them.
//
// # Failures
//
// Every job that is not over has a deadline in the [DueIndex], which
// [JobStore.Open] stores with the job (in the same step, or before it):
// its ack deadline ([DispatchConfig].AckTimeout) once dispatched, its lease
// ([DispatchConfig].Lease) once acknowledged, renewed every third of the
// lease by the instance holding the node while the job runs, but never past
// [DispatchConfig].RunTimeout from the dispatch. The steps of the job write
// no deadline: the lease runs from the time of the node's last step, read
// from the job's record by the sweeper that claims the ack deadline (which
// then moves the deadline to the lease's end). Every instance sweeps the
// index ([DispatchConfig].SweepInterval) and carries on the jobs whose
// deadline passed, whatever instance started them. An attempt thus ends
// within SweepInterval (plus the time of one sweep) after its run timeout,
// however long the lease. A job that ended is released, its slot freed and
// its deadline removed, at once by the instance that ended it, together
// with every other job that ended there meanwhile (one call each), without
// a sweep of the deadline index.
//
//   - no job_ack in time, a lease not renewed (the node's instance died),
//     the run timeout passed: the attempt ends (timeout), the node is told
//     (job_cancel), and the job goes to another node with its attempt
//     incremented, or fails (job_failed) after max_attempts;
//   - a job_assign that cannot reach its node (the node is gone, or not
//     where a stale fleet view said): the job goes back to wait for a node
//     in the same attempt ([fsm.Undelivered]); it costs no attempt, and
//     fails with "no_node" only when no node took it within QueueTimeout;
//   - a node that detaches, or whose presence expires: its jobs (listed
//     from its reservations) go to other nodes at once, unless the node is
//     attached to another instance by then (it moved, and keeps its jobs);
//     a job it had acknowledged costs an attempt, one it had not
//     acknowledged goes back to wait for a node in the same attempt (it
//     never began it), so that nodes going away one after the other do
//     not use up a job's attempts;
//   - a node that attaches again (to any instance, after a lost
//     connection, a restart of its instance or the death of its instance)
//     and lists the jobs it still runs ([NodeInfo].Jobs): every job it had
//     acknowledged and does not list goes to another node before
//     [Dispatcher.AttachNode] returns, so no job waits for a node that
//     forgot it; the jobs it lists are followed from the new instance;
//   - a job_assign taken over from a dead instance's inbox or a dead
//     consumer is delivered only while its attempt is still the job's
//     current one on that node;
//   - an instance that dies: its presence expires, a live instance adopts
//     its inbox and passes every message on (the node or session it was
//     for has reconnected elsewhere, or the job goes to another node), so
//     nothing sent to it is lost;
//   - an instance that stops between two steps of a job: the sweeper
//     replays the job from its stored state; every step is idempotent (a
//     replayed result frees the slot again, the outcome is stored once);
//   - a job no node takes within [DispatchConfig].QueueTimeout fails with
//     "no_node" (see Overload); the wait counts from when the attempt began to wait
//     ([JobRecord].QueuedAt), not from its last return after an
//     undeliverable job_assign, so a job sent again and again to nodes
//     going away still ends;
//   - a session that got no answer within [DispatchConfig].RequestTimeout (Redis lost
//     the job, say) gets job_failed from its instance;
//   - a Redis restart or failover: every loop retries and restores what it
//     owns (presence, bindings, snapshots, consumer groups).
//
// # Steps that are more than one call
//
// A job's record moves by one atomic step each (open, dispatch, ack,
// start, result, timeout, failover, fail, release), and [JobStore.Open]
// stores its deadline in that step (store/redisstore keeps a job's record
// and its deadline in one Redis Cluster hash slot), but its node's slot
// ([ReservationStore]) lives apart from it, in Redis in the node's key,
// which on a Redis Cluster is in another hash slot than the job's, which
// no script may join. These sequences are therefore several calls, and a
// crash between two of them is repaired within a bound:
//
//   - opening a job on a node: its node's slot, then its record with its
//     deadline (on a standalone Redis, one script for both: [SlotOpener]).
//     A crash after the slot leaves it taken until its reservation expires
//     (AckTimeout + RunTimeout + Lease);
//   - a dispatch by the sweeper (of a job that waited): the slot, the
//     record's step, then the ack deadline. A crash after the slot: as
//     above; after the record's step, the job keeps the deadline the
//     sweeper's claim gave it (5 seconds on), and a sweeper takes it off its
//     node (timeout) within SweepInterval of that (plus the time a
//     [DueIndex] may take to see a deadline another process wrote:
//     store/redisstore's DueRefresh, 2 s);
//   - the end of a job: its result's step is one atomic step that stores
//     the outcome; the release of the job, of its slot and of its deadline
//     follow at once on the instance that took the result, one call each
//     for every job that ended there meanwhile. An instance that
//     dies in between leaves the job FINISHED on its slot: another
//     instance's sweeper claims it at the deadline it had (its ack
//     deadline, or its lease's end, whichever was written last) and
//     releases it, answering its waiters again (they drop a second
//     answer), within SweepInterval of that deadline (plus, as above,
//     store/redisstore's DueRefresh);
//   - a timeout or failover: the step that takes the job off its node,
//     then the release of the node's slot. A crash in between leaves the
//     slot until its reservation expires.
//
// Every request is answered exactly once per session connection. Answers
// are delivered at least once between instances and deduplicated by the
// session's instance.
//
// # Overload
//
// A job that finds no node with a free slot (every eligible node is at
// its capacity, or none is eligible) waits on the instance that tried to
// place it, in a queue per pool ([Request].Pool; the jobs without a pool
// share one), oldest first. What is bounded is that queue, per pool and
// per instance: [DispatchConfig].QueueLimit jobs (default 1000; requests
// that miss a node at the same instant may pass it by their number). A
// new request that arrives
// while its pool's queue on its instance is full is refused: the session
// gets job_failed with the error "queue_full: ..." ([FailQueueFull])
// before [Dispatcher.Submit] returns, nothing is stored, and the same
// request id may be sent again later. A request whose job exists (a
// duplicate) is never refused: it adds no job. Jobs that already wait
// (a failover, an undeliverable job_assign) join the queue whatever its
// length; they were admitted.
//
// The queues are tried again when a slot frees on this instance, when a
// node attaches here, when the fleet view shows a node that came online
// or has more room, and every [DispatchConfig].RetryInterval otherwise
// (slots freed on other instances). A round tries each (pool, model) in
// its queue's order until its first miss, so a full pool costs one
// selection per round, not one per waiting job. A woken round tries only
// the nodes this instance does not believe full (from the jobs it sent
// to its own nodes, and the running counts the other instances publish),
// so its miss tries no reservation; the round of every RetryInterval
// tries every eligible node, so a belief gone stale delays a job by at
// most RetryInterval. A new job of a
// (pool, model) that has jobs waiting here queues behind them without a
// selection of its own.
//
// A job that waited [DispatchConfig].QueueTimeout (default 10s) for a
// free slot fails with job_failed "no_node: ..." ([FailNoNode]), within
// RetryInterval after the timeout while its instance runs. Its deadline
// in the [DueIndex] is the end of its wait plus SweepInterval, so that if
// its instance dies, a sweeper of another instance dispatches or fails
// it then; an instance whose Run ends makes its waiting jobs due at once,
// for the others to carry on. When the plane is overloaded a session thus waits for an
// answer at most: nothing for a refused request (queue_full comes with
// the return of Submit), QueueTimeout + RetryInterval for a waiting job
// that gets no node (QueueTimeout + 2 × SweepInterval plus one sweep if
// its instance died), and, once the job is on a node, what its attempts
// take (AckTimeout, RunTimeout, MaxAttempts), bounded by RequestTimeout.
// [Hooks].Shed counts both kinds of shedding; [Dispatcher.Queues] gives
// the depth and the oldest wait of each pool's queue.
//
// # Configuration
//
// [Config] holds Go values: durations are [time.Duration], a zero field
// means the default named on it, [Config.WithDefaults] fills the defaults
// in and [Config.Validate] returns a [*ConfigError] naming the Go field,
// such as "scheduler: Config.Dispatch.Lease: must be at least 3ms, got
// 1ms". The package reads no file and no environment variable, and knows
// nothing of Redis or of any wire protocol: cmd/dispatcher maps its
// config.toml onto Config, and store/redisstore takes its own connection
// and key settings.
//
// # Instances and presence
//
// Each instance has an instance_id
// and announces itself in [Presence] with a TTL of [Config].OwnerTTL.
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
// [FleetConfig].RefreshInterval, hands the whole fleet to the node registry, and
// removes nodes not seen for [FleetConfig].RemoveStaleAfter from every
// structure, so the set does not grow for ever.
//
// # Delivery between instances
//
// A message for a node or session owned by another instance goes to that
// instance's inbox through a [Sender] (a Redis stream), as an [Envelope]'s
// [Fields]: name-value pairs in order, version first ([Envelope.Fields],
// [DecodeEnvelope]). An inbox holding
// its bound of entries refuses new messages with [ErrInboxFull] rather
// than trimming entries nobody handled. The owner consumes it with a [Deliverer] over its [Inbox]: a consumer
// group read in blocking batches, a [Handler] per message, one
// acknowledgement of the successes, takeover of entries left idle by a dead consumer
// ([Inbox.Reclaim]), and a dead-letter queue for entries delivered more
// than [InboxConfig].MaxDeliveries times, or that the handler rejects as
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
// is shared, so every instance agrees; see [StormWindows] for the windows.
//
// # Metrics
//
// Metrics come through hooks, never package-level collectors: [Hooks]
// gives scheduler_phase2_inbox_pending ([Hooks].InboxPending, every
// [InboxConfig].ScanInterval) and scheduler_phase2_dlq_moved_total
// ([Hooks].DLQMoved, once per move), and the Dispatcher's jobs by state,
// failovers, refused node events, selection misses, answers, storm
// decisions, adopted inboxes and shed jobs ([Hooks].Shed: queue_full,
// no_node); [Dispatcher.Queues] is the snapshot behind the queue gauges
// (scheduler_phase2_queue_depth{pool} and
// scheduler_phase2_queue_oldest_seconds{pool}); store/redisstore's OpHook gives
// scheduler_phase2_redis_op_total{op,result}. Package metrics turns them
// into Prometheus collectors.
//
// # Views for operators
//
// [Dispatcher.Overview], [Dispatcher.Pool], [Dispatcher.Jobs] (a page of
// the jobs in flight, with their counts by state), [Dispatcher.Inboxes]
// and [Dispatcher.DeadLetters] show the plane as one instance sees it,
// read-only: what the instance holds is copied under its lock, and the
// stores are read after the lock is released. [Dispatcher.RequeueDeadLetter]
// and [Dispatcher.DeleteDeadLetter] act on a dead-letter queue whose
// inbox store is a [DeadLetterAdmin]. Package scheduler/console serves
// them as web pages.
//
// # Jobs, reservations, request idempotency and turn affinity
//
// A [JobStore] keeps one record per job: its [JobRecord] (package fsm's
// state and attempt, and its node) and its [BookEntry] (spec, the nodes it
// was tried on, its waiting sessions and its outcome). Each step is one
// atomic operation on the record, refusing an event from a node the job is
// not on: a dispatch records its node among the tried ones, and the step
// that ends a job stores its outcome ([JobStore.Finish]), so a job is never
// over without one. [JobTransition] says whether the event was a replay
// and which node's slot to free (a replay of a freeing event names the
// node again). A [DueIndex] keeps the job's deadline. A
// [ReservationStore] holds nodes' concurrency slots with an expiry, so a
// crashed instance never holds one longer than its TTL. A job finishes with
// Finish(job_result), [ReservationStore.Release] on FreeNode, and
// [JobStore.ReleaseJobs] with the others that ended meanwhile. A request
// needs no store of its own: [JobIDFor]
// derives the job id from the request id, so every duplicate names the same
// job and [JobStore.Open] lets exactly one of them create it. A [TurnStore]
// applies package affinity's write rule (SetTurnAffinity, once per turn,
// right after the turn's first job is assigned) and ClearTurnAffinity on a
// finalize reason that ends the turn; the Dispatcher chooses the node with
// [affinity.Select] over its own fleet view. [MemJobs], [MemReservations]
// and [MemTurns] are the in-memory reference implementations;
// store/redisstore has the Redis ones and store/storetest the suites both
// pass. A bad argument is an [*ArgumentError] ([ErrInvalidArgument]) naming
// it.
package scheduler
