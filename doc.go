// Package ksana is a library of scheduling building blocks for Go services,
// with small reference binaries that wire them together.
//
// The root package holds no code: it is the map of the module.
//
// # Packages
//
// Core packages import only the standard library and golang.org/x/sync;
// their decisions (schedule math, planning, transitions, selection) are pure
// functions of their inputs and of a time passed in.
//
//   - [github.com/ksana-dev/ksana/cron]: schedules (once, every with start_at
//     and jitter, cron expressions with time zones), misfire rules, and the
//     timed-job Runner with its HTTP callback executor.
//   - [github.com/ksana-dev/ksana/cron/httpapi]: the REST management API of
//     the timed-job service, as an http.Handler.
//   - [github.com/ksana-dev/ksana/cron/client]: a typed Go client of that
//     API, whose errors carry the API's status and field.
//   - [github.com/ksana-dev/ksana/claim]: decentralized placement of
//     long-running deployments onto node-units that share one SQL table.
//   - [github.com/ksana-dev/ksana/fsm]: the dispatched job's state machine.
//   - [github.com/ksana-dev/ksana/affinity]: turn affinity rules.
//   - [github.com/ksana-dev/ksana/scheduler]: the multi-instance dispatch
//     plane's parts: presence, ownership, node snapshots, delivery, storm
//     protection.
//
// Adapters implement the core packages' interfaces on real storage:
//
//   - [github.com/ksana-dev/ksana/store/jsonstore]: the one-JSON-file job store.
//   - [github.com/ksana-dev/ksana/store/sqlstore]: PostgreSQL and SQLite (sqlx).
//   - [github.com/ksana-dev/ksana/store/redisstore]: Redis, standalone or
//     cluster (rueidis).
//   - [github.com/ksana-dev/ksana/store/storetest]: the conformance suites
//     every adapter of an interface runs.
//
// [github.com/ksana-dev/ksana/cron/console] is the web console of the
// timed-job service: an http.Handler of HTML pages over a Runner, whose
// writes go through the REST API. [github.com/ksana-dev/ksana/scheduler/console]
// is the console of a dispatch instance: an http.Handler of HTML pages
// over a Dispatcher (instances, nodes, pools, jobs in flight, inboxes,
// dead letters to requeue or delete).
//
// [github.com/ksana-dev/ksana/metrics] turns the core packages' hooks
// (Observers and callbacks) into Prometheus collectors that any registry
// takes; the binaries serve them on /metrics.
//
// # Binaries and examples
//
// cmd/ksana is the timed-job service (REST API over the JSON file store),
// cmd/nodeunit the node-unit agent (claim loop over SQLite or PostgreSQL,
// local processes, nodeunit status), cmd/dispatcher a dispatch instance.
// The examples directory holds small runnable programs of the main flows;
// the library packages also have runnable Examples in their reference.
package ksana
