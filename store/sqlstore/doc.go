// Package sqlstore keeps the claim loop's state in SQL: the deployment
// table as a [claim.Store] and the node_unit table as a [claim.Membership],
// on PostgreSQL (through pgx) or on an embedded SQLite file (through
// modernc.org/sqlite, no C compiler needed), with one code path for both.
//
// # Opening
//
// [Open] takes a URL: postgres://... (or postgresql://...) for PostgreSQL;
// sqlite:PATH, file:PATH or a plain path for SQLite. It connects, then
// brings the schema up to date with [DB.Migrate]. An SQLite database runs
// in WAL mode with a busy timeout and transactions that begin IMMEDIATE, so
// several node-unit processes can share one file.
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
// # Errors
//
// Adapters return [ErrNotFound], [ErrExists] and [ErrInvalidURL] (wrapped,
// naming the id or the URL part), the claim package's validation errors
// from [Deployments.Add], and otherwise the driver's error wrapped with the
// operation. A lost claim race is not an error: Claim reports false.
package sqlstore
