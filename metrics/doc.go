// Package metrics turns the hooks of ksana's core packages into Prometheus
// collectors (github.com/prometheus/client_golang).
//
// The core packages keep no package-level metrics: they call hooks (plain
// function fields in their Config). Each collector set here builds those
// hooks and implements [prometheus.Collector], so that it can be
// registered in any [prometheus.Registerer]: the default one, or a
// registry of the caller's own, as the binaries under cmd/ do.
//
// # Dispatch plane
//
// [NewScheduler] returns the collectors of the dispatch plane
// (package scheduler and store/redisstore); see [Scheduler] for the
// metric names.
package metrics
