// Package sqlstore keeps the claim loop's state in SQL: the deployment
// table as a [claim.Store] and the node_unit table as a [claim.Membership],
// and cron's timed jobs ([Jobs], shared among several processes through
// [Leases] and a [Watcher]), on PostgreSQL (through pgx) or on an embedded
// SQLite file (through modernc.org/sqlite, no C compiler needed), with one
// code path for both.
//
// # Opening
//
// [Open] takes a URL: postgres://... (or postgresql://...) for PostgreSQL;
// sqlite:PATH, file:PATH or a plain path for SQLite. It connects, then
// brings the schema up to date with [DB.Migrate]. An SQLite database runs
// in WAL mode with a busy timeout and transactions that begin IMMEDIATE, so
// several node-unit processes can share one file. Its connection keeps
// the statements it runs compiled, by text (the 128 most recently used),
// statements of the caller's own through [DB.SQL] included: a text run
// again is not parsed again, which makes a read by key about twice as
// fast.
//
//	db, err := sqlstore.Open(ctx, "sqlite:data/nodeunit.db")
//	...
//	loop, err := claim.New(db.Deployments(), db.Membership(), runner, nil, cfg)
//
// # Schema
//
// The migrations are SQL files embedded in the package, recorded by
// version in the ksana_schema_migrations table and applied at most once,
// in one transaction. Concurrent Opens are safe: on PostgreSQL they queue
// on an advisory lock (one per schema), on SQLite on the database's write
// lock. The schema is:
//
//	deployment (
//	    id TEXT PRIMARY KEY,
//	    type TEXT NOT NULL DEFAULT 'deployment',   -- 'deployment' | 'daemon'
//	    enabled BOOLEAN, address TEXT ('' = unassigned),
//	    package_name, package_version, command TEXT,
//	    args TEXT (JSON array), env TEXT (JSON object),
//	    created_at, updated_at)                     -- TIMESTAMPTZ, or TEXT in SQLite
//	node_unit (address TEXT PRIMARY KEY, usage_endpoint TEXT, started_at, last_seen)
//	deployment_address_count (address TEXT PRIMARY KEY, n INTEGER)  -- kept by triggers
//
// A deployment table created before the type column existed is migrated by
// adding the column, which gives every existing row the type 'deployment'.
// A table that already has the column keeps it as it is. The value is not
// constrained by the database: readers meet an unknown type as
// ERR_INVALID_TYPE and skip the row, so a newer writer can add a type
// without breaking older node-units; [Deployments.Add] accepts only valid
// records.
//
// Indexes serve the loop's queries: the enabled rows in candidate order
// (updated_at, created_at, id), the enabled rows by address, and node_unit
// by last_seen. A trigger moves updated_at on every update that does not
// set it, so writes by hand keep the candidate order honest too.
//
// SQLite stores points in time as UTC text with millisecond precision
// ("2006-01-02 15:04:05.000"), which sorts in time order.
//
// # Claims
//
// Every statement takes its values as parameters, and every write of an
// address is conditional, so concurrent node-units never overwrite each
// other's claims:
//
//	-- Claim: true when one row changed
//	UPDATE deployment SET address = ?, updated_at = <database clock>
//	WHERE id = ? AND type = 'deployment' AND enabled
//	  AND (address = '' OR address IN (<lost addresses>))
//
// [Deployments.ClaimMany] is the same condition for several ids in one
// statement (RETURNING id), and [Deployments.Release] is
// WHERE id = ? AND type = 'deployment' AND address = ?. A daemon's address
// is never written.
//
// # Membership
//
// A heartbeat upserts the node's row and stamps last_seen with the
// database's clock; a node is active while last_seen is within the TTL of
// the same clock, so the nodes' clocks never matter.
// [Membership.HeartbeatActive] does both in one statement on PostgreSQL (a
// data-modifying WITH) and in one local transaction on SQLite, so a cycle
// in which nothing is lost costs three statements: the heartbeat, the
// enabled deployments, one claim.
//
// # Reading what changed
//
// [Deployments] is also a [claim.Viewer], which the loop uses when it is
// given the [Membership] of the same DB, so that a cycle costs what changed
// rather than the whole table. A view ([Deployments.View]) is one
// transaction, REPEATABLE READ on PostgreSQL, whose first statement
// upserts the heartbeat and reads the summary: one row per active
// node-unit with the number of enabled deployments of type deployment
// bound to it, one per other address that deployments are bound to, and
// whether one is unassigned. The numbers come from the
// deployment_address_count table, which triggers keep on every write of
// the deployment table (once per address and statement on PostgreSQL);
// unassigned deployments are not counted, so claims never wait on a shared
// counter. Then the ids and updated_at of the node's own rows, the daemons
// and the rows of invalid type (an index range each), those rows in full
// only when they changed, and, when the node may claim, the candidates at
// its ranks in claim order (ORDER BY ... LIMIT on an index of each
// address). On PostgreSQL a cycle in which nothing changed is two
// statements besides BEGIN and COMMIT; SQLite adds one for the heartbeat.
// BenchmarkCycle measures it against the full read.
//
// # Connections
//
// A node-unit needs one connection: the loop runs one statement at a
// time, and cmd/nodeunit limits its pool to one (db.SQL().SetMaxOpenConns).
// A fleet with more node-units than the server takes connections should
// go through a pooler such as PgBouncer in transaction mode (a view is one
// transaction, and every other statement stands alone). pgx prepares its
// statements, so use PgBouncer 1.21 or later with max_prepared_statements
// set, or add default_query_exec_mode=exec to the URL.
//
// # Administration
//
// [Deployments.Add], [Deployments.Get], [Deployments.List],
// [Deployments.SetEnabled] and [Deployments.Delete] serve command lines
// such as cmd/nodeunit's add, enable, disable and list. Disabling keeps a
// deployment's address.
//
// # Cron jobs
//
// [DB.Jobs] is cron's store: a [cron.Store] and [cron.RunStore]
// passing the same conformance suite as the JSON file (and
// a [cron.PauseStore], [cron.AuditLog] and [cron.IdempotencyStore]: see
// "Pause and audit" and "Idempotency keys").
// Migration 6 adds its tables:
//
//	ksana_job (id TEXT PRIMARY KEY, seq (creation order), config TEXT (the job's JSON
//	    without bookkeeping), last_run_at, next_run_at BIGINT (Unix ns, 0 = none),
//	    last_status, last_error TEXT, failures INTEGER, last_alert TEXT (migration 9),
//	    keep_runs INTEGER (migration 17: the job's keep_runs, also in config, read by
//	    the trim of its history))
//	ksana_run (seq, id TEXT UNIQUE, job_id REFERENCES ksana_job ON DELETE CASCADE,
//	    slot BOOLEAN, scheduled_at, triggered_at, finished_at BIGINT, status, attempts,
//	    http_status, error, latency, instance, alert (migration 9))
//	    UNIQUE (job_id, scheduled_at) WHERE slot
//	ksana_member (instance TEXT PRIMARY KEY, started_at, last_seen)
//	ksana_lease (part INTEGER PRIMARY KEY, owner TEXT ('' = free), expires_at)
//	ksana_job_change (seq, job_id, at)   -- SQLite's change feed, filled by triggers
//
// Migration 8 adds reason TEXT and slots INTEGER to ksana_run (why a slot
// was not called, and how many slots the row stands for), and the
// indexes of [Jobs.QueryRuns], the history across jobs: (scheduled_at,
// id), and (job_id | status | instance, scheduled_at, id), the run id
// compared byte by byte (COLLATE "C" on PostgreSQL). A page is one
// SELECT read backwards along the index of its leading filter from the
// cursor (keyset paging, no OFFSET).
//
// Migration 14 adds the index (job_id, status, scheduled_at, id) for a job's
// history with a status filter. A list of jobs or of statuses is read as
// the UNION ALL of one read a page long per (job, status) pair (up to 64
// pairs; beyond, one scan with IN lists), so that a page reads about the
// rows it returns times the pairs, whatever the history's length
// (BenchmarkHistoryStatus: a few ms a page at 1M runs).
//
// Migration 13 adds trigger_kind and triggered_by TEXT to ksana_run
// ([cron.Run.Trigger] and [cron.Run.TriggeredBy]; empty in the rows written
// before). [Jobs.RunByID] reads one run by the unique index on its id.
// Migration 15 adds attempt_log TEXT: the attempts of a run tried more
// than once ([cron.Run.AttemptLog]) as a JSON array, empty otherwise.
//
// Every write is durable when it returns (Flush has nothing to do). Save
// is one upsert; Record, the bookkeeping of a run, is one UPDATE of four
// columns, so a run never rewrites a job's configuration.
//
// # Sharing cron jobs
//
// Several processes (cmd/ksana with DATABASE_URL) share one database's
// jobs. Each serves the whole API, and each holds in its runner and fires
// only the jobs of the partitions it leases (about a third each with
// three processes). [DB.Shared] wires it for a program that embeds a
// runner: it returns the store to pass to cron.New, whose Start loads
// the runner and keeps the leases and the watcher going, and whose Stop
// releases the leases once the runner's Run has returned (see its
// example). Underneath:
//
//   - Partitions and leases. A job belongs to partition [Partition](id,
//     1024) (FNV-1a). [Leases.Run] heartbeats the process in ksana_member
//     every TTL/3 (default TTL 6 s), reads the live members (heartbeat
//     within the TTL, by the database's clock), and computes its fair
//     share by rendezvous hashing ([Share]): each partition goes to the
//     live member of highest hash(member, partition), so a member that
//     joins or dies moves only its own share. In one UPDATE ... RETURNING
//     it renews the leases of its share that it holds and takes those
//     that are free or expired; in another it releases the leases beyond
//     its share, a sixteenth of the partitions a round (64 of 1024),
//     renewing the rest of them until their turn: a join, or a member
//     the others saw gone for a moment, moves partitions a few at a
//     time. A process whose share is not all free yet, or that still
//     holds partitions beyond it, runs a round every TTL/12 until that
//     is over, so a partition handed over from one live process to
//     another (on a join) goes without an owner for about TTL/12 (500 ms
//     by default), and a third of 1024 partitions moves to a process
//     that joins two others within about four seconds. A process that
//     stops (SIGTERM) releases everything at once.
//   - One process per instance name. Leases are held by name, so a
//     process registers its name first ([Leases.Register], with a random
//     token of its own in ksana_member): while another process that goes
//     by the name has a heartbeat within the TTL, it waits to see that
//     heartbeat renewed, and is then refused with [ErrInstanceInUse]
//     (cmd/ksana exits with status 2). A heartbeat not renewed (its
//     process was killed) lapses a TTL after its last renewal, and the
//     waiting process takes the name then: a process restarted at once
//     after a crash starts within a TTL. A clean stop frees the name at
//     once. A process held up past the TTL whose name was
//     taken meanwhile finds its token gone at its next heartbeat and
//     holds nothing from then on.
//   - Time fencing. [Jobs.Owns] (which the runner asks at each slot it
//     takes) is true while the lease is held and unexpired by the local
//     monotonic clock, counted from before the renewing statement was
//     sent, so it ends no later than the database's expires_at. A process
//     paused past its lease (SIGSTOP, a long GC, a VM migration) stops
//     firing the moment it wakes, before it talks to the database.
//   - The run row is the hard guarantee. Before the callback is called
//     the runner inserts the run's row ([Jobs.ClaimSlots]: the slots of
//     the next cron.Config.ClaimAhead, 250 ms by default, many rows to
//     one INSERT); the row is unique on
//     (job_id, scheduled_at), and the process whose insert finds the row
//     present does not call. A process that claimed a slot and is held up
//     past the misfire tolerance before its time records it as missed
//     instead of calling it late. Slots
//     are the schedule's (jitter is a hash of the id), so every process
//     computes the same scheduled_at for a slot. Retries of a run happen
//     inside one call of the executor: one row. A run-now has no slot: its
//     row is unique by its run id.
//   - A handover between live processes loses no slot. When a partition
//     moves (a process joins, or one held up comes back), the process
//     giving it up calls every slot it has claimed, at its time, and
//     records it, as it does when it stops: cron's Runner.Drop keeps the
//     claimed, queued and running runs of a job it drops until they end.
//     The new holder starts from the job's stored next_run_at and finds
//     the giver's slots claimed. The other way, giving the unconsumed
//     claims back (deleting their rows for the new holder to claim), was
//     not chosen: the new holder may have passed those slots by the time
//     a deletion lands, which loses them, and a giver that stalls between
//     the deletion and its own stop could call a slot the new holder
//     claims again. Keeping a claim with its claimer makes the row the
//     one record of who calls a slot, at the cost of calling a slot up to
//     ClaimAhead after the lease was released.
//   - Every claimed run ends with a status. A run called ends with its
//     result (success, failed, timeout). A slot claimed by a process held
//     up past the misfire tolerance before its time is recorded missed by
//     that process when it wakes, "holder stopped: ...". The runs a
//     process claimed and did not finish before its heartbeat ran out (it
//     was killed, or is held up past the TTL) are finished by the
//     partition's next holder, at each lease round, as missed with the
//     error "holder died: instance NAME stopped renewing its lease before
//     this run ended ..." (one UPDATE through an index of the unfinished
//     runs; a callback in flight when its process died may have been
//     made, so the error says its outcome is unknown); those of an
//     earlier process of the same instance name when the name is
//     registered again. The bound: a run left unfinished is finished
//     within TTL + 2*TTL/3 of its claimer's last heartbeat (10 s by
//     default): the heartbeat runs out after TTL, the partition is taken
//     within TTL/3 more, and the holder finishes it in that round or the
//     next. [Jobs.Runs] (GET /jobs/{id}/runs) lists them with the instance
//     that claimed them. A process held up that wakes and finishes such a
//     run itself replaces the status with its own.
//   - One outcome per write. A write of a job's configuration (PATCH,
//     pause, resume) is made from the version the process read, and
//     [Jobs.Write] replaces the row only while it still has that version
//     (UPDATE ... WHERE version = ?): when two processes change one job at
//     once, the second write fails with [cron.ErrConflict], and the runner
//     reads the job again and applies its change to the first one's. Two
//     resumes at the same instant so leave one resumed job and one record
//     of its pause.
//   - Bookkeeping in order. Every acknowledged write of a job's
//     configuration (create, PATCH, pause, resume) raises the version
//     column of its row; the runner writes the bookkeeping of a job with
//     the version it computed it from, and [Jobs.RecordBatch] writes a
//     row only while it has that version. So the bookkeeping of a run
//     that ended before a pause, written after it, is refused instead of
//     overwriting last_status paused; the runner writes its bookkeeping
//     again once it holds the new version (through its watcher, or at
//     once for a write it made itself). The last-run fields
//     (last_run_at, last_status, last_error) are written only when the
//     record's last_run_at is not before the stored one, so a regular
//     slot and a run-now of one job, recorded by two processes, keep the
//     later run's.
//   - Propagation. A trigger on ksana_job announces every change of a
//     configuration: pg_notify on the channel ksana_jobs:<schema> on
//     PostgreSQL, a row in ksana_job_change on SQLite. A [Watcher] per
//     process LISTENs (or polls every 250 ms) and reads the changed rows,
//     then holds or drops them in the runner ([cron.Runner.Hold],
//     [cron.Runner.Drop]) without writing them back. Reading the row, not
//     the payload, makes two instances that update one job at once
//     converge on the row that committed last. After a lost connection
//     the watcher listens again and reads every job once. A job created
//     with a given id goes in with [Jobs.Write] with create set, so
//     an id another process stored a moment ago is [cron.ErrExists], not
//     replaced.
//   - Holding by partition. ksana_job keeps each job's partition in its
//     part column (written on insert, indexed with seq). The [Watcher]
//     follows the process's leases (at each round that gains or loses
//     some, and every TTL/12 for a lease that runs out by the local
//     clock): it loads the jobs of the partitions gained
//     ([Jobs.LoadPartitions], one query per batch of up to 1024
//     partitions) and holds them, and drops the jobs of the partitions
//     lost. A change of a job of a partition not held is ignored (and
//     drops a stale copy). [Jobs.Load] returns only the jobs of the
//     partitions held (none before the leases' first round).
//   - Reads. GET of one job reads its row ([Jobs.Read]); the list and
//     its pages read the table in creation order ([Jobs.PageJobs]); the
//     ksana_jobs metric reads the counts that triggers keep per partition
//     in ksana_job_count ([Jobs.CountJobs]: at most one row per
//     partition, whatever the number of jobs). A job the process fires
//     shows its own next_run_at, which it writes shortly after.
//   - Writes of a job not held. PATCH, pause, resume and delete read the
//     row, apply the change under the same validation, and save it
//     durably; the owner takes it through its watcher. A run-now runs on
//     the process that received it, claimed by its run id like every
//     run-now, and that process writes its last-run fields.
//
// What is guaranteed: each slot of a job is called at most once across
// all processes, also when a process is paused past its lease and wakes,
// or loses the database while a run is queued (a failed claim is never
// called; it is recorded as skipped with the error). A slot is missed
// only while no live process holds the job's partition: after a kill -9
// or a stop past the lease, from the last renewal until another process
// takes the lease (at most TTL + TTL/3: 8 s by default), and, on a
// handover between live processes, in the TTL/12 between the release and
// the take (a slot due then fires late, within the misfire tolerance).
// The misfire rules then apply as on a restart (an every or cron job
// rolls on to its next slot, a slot within misfire_grace runs once).
// Every claimed run reaches a final status within the bound above, and
// an acknowledged write of a job is never overwritten by the bookkeeping
// of a run that ended before it.
//
// Why each process holds only its partitions: memory and CPU per process
// are its share of the table, not the whole table (three processes on 1M
// jobs hold and fire about a third each). The cost: a lease changing
// hands loads the partition's jobs (one indexed query) before they fire,
// so a handover adds that query's time to the TTL/12 without an owner,
// and a slot that passed meanwhile goes through the misfire rules; lists
// and pages of the API read the database, and a filter that matches few
// jobs reads many rows.
//
// Statements per fired slot: fewer than one on PostgreSQL. The claims of
// the slots a runner takes ahead in 50 ms are one INSERT ([Jobs.ClaimSlots]);
// every [cron.BatchEvery] (100 ms) the recorder writes the results of the
// runs that ended (one UPDATE of their rows, [Jobs.AppendRuns]), trims
// their jobs' histories to RunLimit (one DELETE), and writes the
// bookkeeping of the jobs that changed (one UPDATE of ksana_job,
// [Jobs.RecordBatch]); each joins its rows to arrays of values through
// unnest. On SQLite each batch is one transaction of one statement per
// row. BenchmarkStatementsPerSlot counts them. These writes commit with
// synchronous_commit off on PostgreSQL (as cron.Store allows for run
// bookkeeping): a claim is visible to every other transaction the moment
// it commits, so it excludes a second call, and no fsync lies on the
// firing path. Save and Delete, which the API acknowledges, are durable.
// Leases cost five statements per process every TTL/3 (the fifth
// finishes the runs of dead processes), whatever the number of jobs.
//
// # Pause and audit
//
// [Jobs] is a [cron.PauseStore] and a [cron.AuditLog], shared by every
// process on the database. The service-wide pause is one row of
// ksana_settings (key service_pause, its JSON as value); each runner reads
// it at start and every [cron.Config.PauseRefresh] (1s by default), one
// primary-key SELECT, so a pause or resume made through any process stops
// or restarts the firing of all within that time. A job's paused_until
// is part of its config: a timed pause is an ordinary write of the job,
// and the process holding the job's partition when the time comes
// resumes it with another. The audit log is ksana_audit, one row per
// write, paged by id (keyset: each page one index range, by job through
// ksana_audit_job_idx and by caller through ksana_audit_who_idx); the
// newest [JobsConfig.AuditKeep] rows are kept (default a million).
//
// # Idempotency keys
//
// [Jobs] is a [cron.IdempotencyStore]: the Idempotency-Key reservations
// of run-now requests, in one table that every process on the database
// reserves in (migration 11), so that a retry that reaches another
// instance, or the same one after a restart, answers as the first
// request did:
//
//	ksana_idempotency (job_id, key TEXT, body_sum TEXT (SHA-256 of the body, hex),
//	    run_id TEXT ('' while the first request is being answered), at BIGINT (Unix ns))
//	    PRIMARY KEY (job_id, key), INDEX (at)
//
// A reservation is one INSERT ... ON CONFLICT DO UPDATE that takes the
// key when it is free or its row is past [cron.IdempotencyWindow] (the
// update applies only then), RETURNING a row when it took it; otherwise
// one primary-key SELECT reads the row that holds it. The database's
// unique key makes exactly one of concurrent reservations the first,
// whatever the process. Recording the run and giving the key up are one
// UPDATE or DELETE each, of that reservation (job, key and at) only.
// Every 100th reservation of a [Jobs] (and its first) deletes up to 1000
// rows past the window, oldest first. A row outlives its job until then:
// it only stands for a key already used.
//
// # Alert outbox
//
// [Jobs] is a [cron.AlertOutbox]: the alerts waiting for delivery, in one
// table that every instance on the database delivers from (migration
// 16), so that an alert outlives a webhook outage and a restart:
//
//	ksana_alert_outbox (id TEXT PRIMARY KEY (the delivery id), job_id, body TEXT (the alert, JSON),
//	    url, secret TEXT, attempts INTEGER, last_error TEXT, created_at, next_at,
//	    lease_until BIGINT (Unix ns), dead INTEGER (0 or 1))
//	    INDEX (dead, next_at), INDEX (dead, created_at, id)
//
// The runner writes the alerts of a recorder's pass in one transaction.
// Each instance takes the alerts due with one UPDATE ... RETURNING that
// sets lease_until (on PostgreSQL over rows picked FOR UPDATE SKIP
// LOCKED): a delivery is made by one instance at a time, and by another
// once the lease (a minute) of an instance that died with it is over.
// A delivered alert is deleted; a dead one is kept, the newest
// [cron.MaxDeadAlerts] of them.
//
// # Errors
//
// Adapters return [ErrNotFound], [ErrExists] and [ErrInvalidURL] (wrapped,
// naming the id or the URL part), the claim package's validation errors
// from [Deployments.Add], and otherwise the driver's error wrapped with the
// operation. A lost claim race is not an error: Claim reports false.
package sqlstore
