// Package claim places long-running deployments on node-units without a
// central scheduler: every node-unit runs the same [Loop], and the database
// settles every race through conditional updates.
//
// # Concepts
//
// A node-unit is a process that runs deployments. It is a member of the
// [Membership] while its heartbeat is younger than a TTL, judged by the
// database's clock. A [Deployment] is a row of the deployment table; its
// Address names the node-unit it is bound to, "" meaning unassigned. Its
// [Type] is either "deployment" ([TypeDeployment]: placed on one node-unit
// through its address) or "daemon" ([TypeDaemon]: run by every node-unit,
// never bound, never claimed). To claim is to write this node's address
// into a deployment that is unassigned or bound to a lost node-unit. A node
// is lost when deployments are bound to its address but it is not in the
// membership.
//
// A deployment of type deployment moves through these states:
//
//	UNASSIGNED  address = '', enabled        --claim-->  ASSIGNED
//	ASSIGNED    address = <node>, enabled    --node leaves the membership-->  LOST
//	LOST        address = <lost node>        --claim (takeover)-->  ASSIGNED
//	any                                      --disabled by hand-->  DISABLED
//
// # The cycle
//
// Every Config.Interval (default 5 s)
// [Loop.Run] runs one cycle ([Loop.Cycle]):
//
//  1. heartbeat and read the active node-units ([Membership], or one
//     statement through [HeartbeatActiver]);
//  2. read the enabled deployments ([Store.Deployments]), or, through a
//     [Viewer], what the decision needs of them (see "Reading what
//     changed" below);
//  3. under resource_usage only, read every active node's usage through
//     the [UsageProbe], all at once under Config.ProbeTimeout;
//  4. decide, with the pure function [Plan]: when this node's metric equals
//     the minimum over the active nodes (ties are all eligible), claim one
//     deployment, those bound to a lost node first, then unassigned ones,
//     each in candidate order (updated_at, created_at, id ascending; see
//     [Candidates]). A node takes the candidate at its own rank among the
//     eligible nodes, so k tied nodes place k deployments per cycle instead
//     of racing for the first one. The claim is one conditional update
//     ([Store.Claim]); losing the race is ERR_CLAIM_CONFLICT, logged at
//     debug level, and the next cycle tries again;
//  5. reconcile the local [Runner]: every enabled daemon (once per id) and
//     every enabled deployment bound to this node should run; start what is
//     missing, stop the rest, and restart (stop, then start) what runs but
//     whose package, version, command, args or env changed.
//
// A Runner that also implements [Admitter] is asked before step 4 about
// each waiting deployment (unassigned, or held by a node that is not
// active): those it refuses (an error wrapping [ErrRefused], such as an
// untrusted command) are left out of this node's plan, never claimed, and
// listed in [Report.Declined], so they wait for a node-unit that can run
// them. Because the least loaded node-units may all refuse a deployment
// that a busier one can run, a loop with an Admitter that is not eligible
// claims the first waiting deployment it can run once the same waiting
// deployments have stayed unclaimed for three of its cycles.
//
// A cycle costs three statements when nothing is lost: membership, list,
// claim. Takeover of a lost node's deployment is the same single-row claim
// with the lost addresses in its condition; there is no bulk release, so a
// flickering membership never unbinds many deployments at once.
//
// # Reading what changed
//
// Reading every enabled row costs each node the whole table every cycle.
// A [Store] that keeps the membership beside the deployments may implement
// [Viewer] (store/sqlstore does); the loop then reads, in one consistent
// [View] that also carries the heartbeat:
//
//   - the [Summary]: the active node-units, the number of deployments bound
//     to each address (kept by the database, not counted from rows), and
//     whether any deployment is unassigned. Eligibility and lost detection
//     need nothing else: membership stays the only signal of loss;
//   - the versions (id and updated_at) of the rows this node runs or
//     reports: its own deployments, the daemons and the rows of invalid
//     type, which are therefore still reported every cycle. Only the rows
//     whose version changed are read in full, and once more the next cycle
//     (two updates within the clock's resolution leave one version); a
//     row that disappears from the versions was deleted, disabled or
//     moved;
//   - only when this node may claim, the candidates at its ranks in claim
//     order ([ClaimWindow]), usually one row.
//
// [Plan] decides from that [Partial] exactly as from every row. A cycle in
// which nothing changed costs two statements whatever the size of the
// table, and reads one row per active node-unit plus one short row per
// deployment this node runs.
//
// The decisions are pure functions of their inputs, exported and tested on
// their own: [Sanitize], [LostAddresses], [DeploymentCounts], [Candidates],
// [CompareCandidates], [Snapshots], [FairShares] and [Plan].
//
// # Policies
//
// A [Policy] picks the eligible nodes from [MetricSnapshot]s computed by its
// [MetricProvider]s. [ParsePolicy] selects one by name, case-insensitively
// (cmd/nodeunit reads the name from NODE_UNIT_CLAIM_POLICY); an unknown
// name is an error, never a silent fallback:
//
//   - deployment_count (the default, [DeploymentCountPolicy]): the nodes
//     with the fewest enabled deployments of type deployment;
//   - resource_usage ([ResourceUsagePolicy]): the nodes with the lowest
//     score cpu_percent * cpu_weight + memory_mb / 1024 * memory_weight,
//     [Weights] given to it ([DefaultWeights]: 0.5 and 0.5). A node whose probe fails or times out
//     scores 0 by default, which makes it look least loaded; Config.ProbeFailure =
//     [ProbeFailureNotEligible] leaves it out of that cycle's decision
//     instead;
//   - none ([NonePolicy]): the loop claims nothing and writes no address on
//     any path (no claim, no takeover, no release) but keeps reading the
//     deployments and running what is bound to the node and every enabled
//     daemon. It is logged once as ERR_POLICY_DISABLED.
//
// # Error codes
//
// Errors about one record are [*Error]s carrying a stable [Code]
// and unwrapping to a sentinel:
//
//	ERR_INVALID_TYPE        [ErrInvalidType]       type is neither daemon nor deployment: the record is skipped
//	ERR_DAEMON_ADDRESS_SET  [ErrDaemonAddressSet]  a daemon has an address: the address is ignored
//	ERR_CLAIM_CONFLICT      [ErrClaimConflict]     another node claimed first: retried next cycle
//	ERR_POLICY_DISABLED     [ErrPolicyDisabled]    policy none: claims skipped, logged once
//	ERR_DAEMON_MISSING      [ErrDaemonMissing]     an enabled daemon is not running: started again
//
// Invalid records appear in [Report].Problems every cycle and are logged
// once until they change. Bad settings are [*ConfigError]s naming the
// field, wrapping [ErrInvalidConfig].
//
// # Opt-ins
//
// The plain behaviour described above is the default. Each of these is off until
// set in [Config]:
//
//   - LostAfter: a node must be missing from the membership for this long,
//     as seen by this loop, before its deployments are taken over, so a
//     node that misses a heartbeat or two keeps its work.
//   - MaxClaimsPerCycle above 1: a node claims up to its fair share in one
//     statement ([Store.ClaimMany]). Fair shares fill the least loaded nodes
//     first ([FairShares]) and the nodes' shares are laid out on the
//     candidate list in address order, so nodes working from the same
//     snapshot do not collide. 100 node-units place 10,000 deployments in
//     one cycle, spread 0 (BenchmarkFullAssignment). When every node in the
//     membership is alive and cycling, the deployments of a lost node are
//     taken over within LostAfter plus two intervals of its leaving the
//     membership; a member that does not act (it crashed, or cannot reach
//     the database) delays its share until its membership expires, and a
//     node that just joined takes over only after its own LostAfter.
//   - Rebalance: a node with at least Threshold (2) more deployments than
//     the least loaded active node, for Cycles (3) consecutive cycles in
//     which nothing waits to be claimed, stops one of its deployments and
//     then releases it ([Store.Release]), at most one per cycle, so a node
//     that joins late gets work. It stops once the difference is below the
//     threshold, so deployments never move back and forth. While a
//     deployment waits (even one every node refuses) or a bound node is
//     missing, such a node holds, and [Report].RebalanceHeld says why; the
//     loop logs "rebalancing held" when the hold begins.
//   - SelfFence: a node that has not renewed its membership for half the
//     membership TTL stops its processes of type deployment (daemons keep
//     running), so a node cut off from the database does not keep running
//     work that other nodes take over once its membership expires. It
//     restarts what is still bound to it when it reconnects.
//
// # Guarantees
//
// A deployment is bound to at most one node at a time, and only a
// conditional update binds it, so no write is lost to a race. A daemon is
// never bound and never claimed. Under none no address is written. Whether
// a deployment may run on two nodes at once depends on timing: with
// SelfFence on, a node that cannot renew its membership (each attempt is
// bounded by the longer of Interval and MembershipTTL/2, and starts at most
// one Interval after the last renewal) stops its deployments at most MembershipTTL/2 +
// Interval after its last renewal, which New requires to be before its
// membership expires (MembershipTTL > 2 * Interval; the default TTL is three
// intervals), so other nodes take them over only after they stopped, as
// long as the node's clock runs at the database's rate. Without SelfFence a
// cut-off node keeps running them.
//
// # Adapters
//
// The interfaces are small and declared here, for their consumer: [Store],
// [Membership] and the optional [HeartbeatActiver] (store/sqlstore
// implements them over PostgreSQL and SQLite), [UsageProbe], [Runner] and
// the optional [Admitter] (cmd/nodeunit implements them over HTTP and local
// processes), and the metrics hook [Observer] (package
// github.com/ksana-dev/ksana/metrics turns it into Prometheus collectors). Package claim/claimtest has an in-memory
// reference Store and Membership with the same conditional-update
// semantics, and fakes of Runner and UsageProbe; store/storetest.TestClaimStore
// is the conformance suite every Store and Membership passes.
//
// # Time
//
// The loop takes its time from package time: time.Now for its decisions
// (LostAfter, self-fencing, report times) and a time.Ticker for Run. There
// is no clock to inject; tests run the loop, and claimtest's Store, whose
// "database clock" is time.Now too, inside testing/synctest, which fakes
// package time.
package claim
