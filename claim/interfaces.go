package claim

// contract: ready
//
// This file is the contract between the claim loop and its adapters
// (store/sqlstore implements Store, Membership and HeartbeatActiver;
// cmd/nodeunit implements Runner and UsageProbe). Changes are additive only
// and are listed under "contract changes" below.
//
// Tests that belong to the SQL adapters (store/sqlstore), not to package
// claim, named after the behaviour rules R1-R13 of daemons and the none
// policy:
//   - TestR1_NoneIssuesNoAddressUpdate: with policy none a Loop over the SQL
//     store issues no "update deployment set address" statement (count the
//     statements through a wrapped driver or a statement log).
//   - TestR3_TypeColumnText: deployment.type is TEXT NOT NULL DEFAULT
//     'deployment'; an insert without type reads back "deployment".
//   - TestR4_MigrationBackfillsType: a table created without the type column
//     (the old schema), with rows, migrates so every old row has type
//     "deployment"; the migration is idempotent.
//   - TestR5_ClaimSQLRequiresTypeDeployment / TestR6_DaemonNotBound: Claim,
//     ClaimMany and Release never change a daemon's address (the conformance
//     suite in store/storetest checks this; run it on both databases).
//   - TestR10_DeploymentTypeRoundTrip: the type column reads back into
//     Deployment.Type on both databases.
//   - TestR11_InvalidTypeRowIsReturned: a row whose type is not valid (written
//     by hand) is returned by Deployments as is, so the loop can report
//     ERR_INVALID_TYPE and skip it, and does not fail the whole list.
//   - ERR_CLAIM_CONFLICT on a real database: concurrent claimers of one
//     deployment, exactly one wins (also in store/storetest).
//   - the 20-loop PostgreSQL run, failover, and the one-cycle benchmark
//     (statements per cycle: at most 3 when nothing is lost).
//
// Everything else of 000 and R1-R13 of 001 is tested in package claim.
//
// The conformance suite is store/storetest.TestClaimStore; it needs a
// storetest.ClaimAdmin (insert a deployment as given, read one back,
// backdate a node's last_seen). claimtest.Store is the in-memory reference.
//
// contract changes:
//   2026-11-21: additive only. New: Report.ProbeFailures, ErrRunning,
//     Config.SelfFence requires MembershipTTL > 2*Interval (New rejects
//     it otherwise), each membership call of a cycle is bounded by
//     max(Interval, MembershipTTL/2), Run stops the deployment processes and Leaves on exit.
//     Report.Restarted: a running deployment whose package, version,
//     command, args or env changed is stopped and started again.
//   2026-11-23: additive only. New: Admitter (optional on a Runner: the
//     loop asks before claiming a waiting deployment; refused ones are in
//     Report.Declined and left to others; a loop with an Admitter claims a
//     deployment that stayed waiting for three cycles while it was not
//     eligible). ConfigError no longer repeats "claim:" in its reason.

import (
	"context"
	"time"
)

// Store is the deployment table as the claim loop uses it. Only Claim,
// ClaimMany and Release write addresses, and each writes only where its
// condition holds, so that concurrent node-units never lose an update.
//
// Every method is one statement. Implementations: store/sqlstore and
// claimtest.Store; both pass store/storetest.TestClaimStore.
type Store interface {
	// Deployments returns every enabled deployment, daemons included, in any
	// order. A row with an invalid type is returned as it is (the loop
	// reports and skips it); Deployments fails only when reading fails.
	// One statement: select ... from deployment where enabled.
	Deployments(ctx context.Context) ([]Deployment, error)

	// Claim binds deployment id to address if it is still claimable, in one
	// conditional update:
	//
	//	update deployment set address=?, updated_at=now
	//	where id=? and type='deployment' and enabled
	//	  and (address='' or address in (lost...))
	//
	// It reports whether the row was updated. false with a nil error means
	// the deployment was taken by someone else, disabled, deleted, is a
	// daemon, or is bound to a node not in lost: the loop reports
	// ERR_CLAIM_CONFLICT. lost may be empty (then only address='' matches).
	Claim(ctx context.Context, id, address string, lost []string) (bool, error)

	// ClaimMany is Claim for several ids in one statement (update ... where
	// id in (ids...) and <the same condition> returning id). It returns the
	// ids it bound, in any order. ids may be empty: then it returns nil
	// without a statement.
	ClaimMany(ctx context.Context, ids []string, address string, lost []string) (claimed []string, err error)

	// Release unbinds deployment id from address, in one conditional update:
	//
	//	update deployment set address='', updated_at=now
	//	where id=? and type='deployment' and address=?
	//
	// It reports whether the row was updated. Only the rebalance opt-in
	// calls it, for a deployment bound to the calling node.
	Release(ctx context.Context, id, address string) (bool, error)
}

// Membership is the set of node-units. A node-unit is active while its
// latest heartbeat is more recent than a TTL, both judged by the
// membership store's clock (the database's), so node clocks do not matter.
type Membership interface {
	// Heartbeat inserts or updates n (keyed by n.Address), setting its
	// last-seen time to the store's current time. n.LastSeen is ignored.
	Heartbeat(ctx context.Context, n NodeUnit) error
	// Active returns the node-units seen within ttl, by the store's clock,
	// with LastSeen filled in, in any order.
	Active(ctx context.Context, ttl time.Duration) ([]NodeUnit, error)
	// Leave removes the node-unit at address (a clean shutdown); an unknown
	// address is not an error.
	Leave(ctx context.Context, address string) error
}

// HeartbeatActiver is an optional capability of a [Membership]: Heartbeat
// then Active in one statement (or round trip), so that a cycle costs three
// statements when nothing is lost: this, [Store.Deployments], one claim.
// The result includes n itself.
type HeartbeatActiver interface {
	HeartbeatActive(ctx context.Context, n NodeUnit, ttl time.Duration) ([]NodeUnit, error)
}

// UsageProbe reads a node-unit's resource usage (NodeUnit/InspectResourceUsage).
// The loop calls it for every active node at once, under a timeout, only
// under the resource_usage policy. It must be safe for concurrent use.
type UsageProbe interface {
	Usage(ctx context.Context, n NodeUnit) (Usage, error)
}

// Runner runs deployments as local processes. The loop calls it from one
// goroutine at a time.
type Runner interface {
	// Running returns the ids of the deployments the runner currently keeps
	// running (including one that exited and waits to be restarted by the
	// runner's own backoff). The order does not matter.
	Running() []string
	// Start starts deployment d (a daemon or a deployment bound to this
	// node). The runner keys processes by d.ID and never runs two for one
	// id. An error wrapping [ErrRefused] is a permanent refusal of this
	// version of d.
	Start(ctx context.Context, d Deployment) error
	// Stop stops the process of deployment id and forgets it; an unknown id
	// is not an error.
	Stop(ctx context.Context, id string) error
}

// Admitter is an optional interface of a [Runner]: Admit reports, without
// starting anything, whether the runner would start d. When the Runner
// implements it, the loop asks before it claims: a waiting deployment
// (unassigned, or bound to a node-unit that is no longer active) that
// Admit refuses with an error wrapping [ErrRefused] is left for other
// node-units, and listed in [Report.Declined], instead of being claimed and
// then refused by Start. Other errors are logged and do not hold the claim
// back. Deployments already bound to this node-unit are not asked about.
type Admitter interface {
	Admit(d Deployment) error
}

// Observer receives one [Report] per cycle, for metrics. It is called
// synchronously at the end of every cycle, from the loop's goroutine, and
// should return quickly.
type Observer interface {
	ObserveCycle(r Report)
}

// ObserverFunc adapts a function to [Observer].
type ObserverFunc func(Report)

// ObserveCycle calls f(r).
func (f ObserverFunc) ObserveCycle(r Report) { f(r) }
