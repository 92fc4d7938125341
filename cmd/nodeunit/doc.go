// Nodeunit is the node-unit agent: node-units that share one database
// (SQLite or PostgreSQL) place the enabled deployments among themselves
// with the [github.com/ksana-dev/ksana/claim] loop, run the deployments
// bound to them and every enabled daemon as local processes, and take over
// the deployments of a node-unit that goes away.
//
// # Usage
//
//	nodeunit [run]                         run a node-unit until SIGINT or SIGTERM
//	nodeunit add --id ID [flags] COMMAND [ARG...]
//	                                       add a deployment (enabled unless --disabled)
//	nodeunit enable ID...                  enable deployments
//	nodeunit disable ID...                 disable deployments (their processes stop)
//	nodeunit remove ID...                  delete deployments
//	nodeunit list                          show the deployments: id, type, enabled, address, command
//	nodeunit nodes                         show the active node-units and their deployment counts
//	nodeunit status                        show each deployment's state on each node-unit
//	nodeunit help                          show the help (also -h)
//
// An unknown command is answered with one line that points at -h. list,
// nodes and status only read and create nothing (not even the default
// SQLite file): where there is no database yet, or one without the
// node-unit tables, they say where they looked and exit 1. add warns
// when its own NODE_UNIT_TRUSTED_COMMAND_REGEXP, if set, refuses the
// command.
//
// The flags of add are --id, --type (deployment or daemon; an other value
// is ERR_INVALID_TYPE), --command and --arg (instead of the words after the
// flags), --env KEY=VALUE (repeatable), --address (bind a deployment by
// hand; a daemon with an address is ERR_DAEMON_ADDRESS_SET), --package,
// --version and --disabled.
//
// # Environment
//
// run reads every variable below. The other sub-commands read only
// DATABASE_URL, NODE_UNIT_DATA, LOG_LEVEL, LOG_FORMAT,
// NODE_UNIT_SCHEDULER_INTERVAL_MS and NODE_UNIT_MEMBERSHIP_TTL_MS (nodes
// and status use the last two to tell which node-units are active). A bad
// value, or a database that cannot be reached or has no schema to hold the
// tables, stops the command with one line naming the variable, in the form
// NAME="value": reason (exit status 2).
//
// On PostgreSQL the tables go into the first existing schema of the
// connection's search path: public unless DATABASE_URL adds
// search_path=SCHEMA. A search path that names no existing schema is
// refused with a message saying to create it; the start-up log line names
// the schema in use.
//
//	DATABASE_URL                      [sqlite:$NODE_UNIT_DATA/nodeunit.db]
//	    postgres://... for PostgreSQL; sqlite:PATH, file:PATH or a PATH for SQLite
//	NODE_UNIT_DATA                    [./data]
//	    the default SQLite database, the address files, the deployments' logs
//	NODE_UNIT_ADDRESS                 [generated, kept in $NODE_UNIT_DATA]
//	NODE_UNIT_LISTEN                  [127.0.0.1:0, any free port]
//	    listen address of GET /NodeUnit/InspectResourceUsage
//	NODE_UNIT_USAGE_URL               [http://HOST:PORT/NodeUnit/InspectResourceUsage]
//	    the endpoint URL published in the membership
//	NODE_UNIT_CLAIM_POLICY            [deployment_count] | resource_usage | none
//	NODE_UNIT_SCHEDULER_INTERVAL_MS   [5000]
//	NODE_UNIT_CPU_WEIGHT              [0.5]
//	NODE_UNIT_MEMORY_WEIGHT           [0.5]
//	NODE_UNIT_MEMBERSHIP_TTL_MS       [3 x interval]
//	NODE_UNIT_LOST_AFTER_MS           [0]
//	NODE_UNIT_MAX_CLAIMS_PER_CYCLE    [1]
//	NODE_UNIT_REBALANCE               [false]
//	NODE_UNIT_SELF_FENCE              [false]
//	NODE_UNIT_PROBE_FAILURE           [zero] | not_eligible
//	NODE_UNIT_TRUSTED_COMMAND_REGEXP  [unset: every command is refused]
//	NODE_UNIT_STOP_GRACE_MS           [10000]
//	LOG_LEVEL                         [info] | debug | warn | error
//	LOG_FORMAT                        [text] | json
//
// nodeunit -h explains each one.
//
// # Addresses
//
// Without NODE_UNIT_ADDRESS a node-unit takes the first address file of
// $NODE_UNIT_DATA that no running node-unit holds (nodeunit-address, then
// nodeunit-address.2, ...), generates an address into it when it is empty
// (host name and 8 random hex digits), and holds an advisory lock on it
// while it runs. So a node-unit keeps its address across restarts, and two
// node-units started with the same defaults on one machine get different
// addresses and share the default SQLite database.
//
// # Processes
//
// A command runs only when it matches NODE_UNIT_TRUSTED_COMMAND_REGEXP as a
// whole; unset, every command is refused, so that whoever can write the
// deployment table cannot run arbitrary programs on every node-unit by
// default. The rule is checked before a claim: a node-unit never claims a
// deployment it would refuse, so the deployment waits for a node-unit
// whose rule lets it run (when the least loaded node-units all refuse it,
// another one that can run it claims it after three cycles). A deployment
// bound to the node-unit by hand and refused is logged and never run. Each process gets
// the node-unit's environment plus the deployment's env, runs in its own
// process group, and writes its output to
// $NODE_UNIT_DATA/logs/ADDRESS/ID.log. A process that exits is restarted
// after a backoff from 1 s doubling to 30 s; stopping sends SIGTERM to the
// group and SIGKILL after NODE_UNIT_STOP_GRACE_MS. On Linux a process also
// dies with its node-unit, even one killed with SIGKILL.
//
// # Resource usage
//
// Every second the node-unit samples the CPU of itself and its deployment
// processes (with their children) as a share of the machine's total CPU
// (0-100), and their resident memory in MB, and serves the latest sample as
// NodeUnit/InspectResourceUsage:
//
//	GET /NodeUnit/InspectResourceUsage
//	{"cpu_percent": 1.25, "memory_mb": 41.5}
//
// Its URL is published in the membership; under
// NODE_UNIT_CLAIM_POLICY=resource_usage every node-unit reads the others'
// usage each cycle. The usage is read through gopsutil on Linux, macOS and
// Windows.
//
// # Status and metrics
//
// The same listener serves GET /NodeUnit/Status, the state of each
// deployment on this node-unit as JSON: running (pid, start), restarting
// (restarts, last exit, its time, the next start, the last lines of its
// output), refused (the reason, for deployments the trust rule refuses).
// nodeunit status reads it from every active node-unit and prints one line
// per deployment and node-unit. GET /metrics serves Prometheus metrics:
// the claim loop's (ksana_claim_*, see package
// github.com/ksana-dev/ksana/metrics) and ksana_nodeunit_cpu_percent,
// ksana_nodeunit_memory_mb and ksana_nodeunit_processes.
//
// # Shutdown
//
// On SIGINT or SIGTERM the node-unit stops its processes (SIGTERM, then
// SIGKILL after the grace period), leaves the membership so the other
// node-units take its deployments over at once, and exits with status 0. A
// second signal ends it at once. A node-unit that dies without leaving is
// found lost when its last heartbeat is older than
// NODE_UNIT_MEMBERSHIP_TTL_MS.
//
// A node-unit that starts again starts with no deployments: the others
// keep what they took over, and it claims only deployments that are
// waiting. NODE_UNIT_REBALANCE=true makes a node-unit that holds 2 or more
// above the least loaded one release one per cycle, so a restarted
// node-unit gets its share back. It holds while a deployment waits to be
// claimed (even one that every node-unit refuses) or a node-unit that
// deployments are bound to is missing: it logs "rebalancing held" with
// the reason when the hold begins, and "nodeunit status" ends with a line
// "node-unit ADDR holds rebalancing: REASON" while it lasts.
package main
