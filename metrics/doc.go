// Package metrics turns the hooks of ksana's packages into Prometheus
// collectors (github.com/prometheus/client_golang) that any registry takes.
//
// The core packages know nothing of Prometheus: they call small hook
// interfaces (an Observer in cron and in claim, callbacks in a Config).
// This package holds one collector per part of ksana; each implements
// those hooks and prometheus.Collector, so a service registers ksana's
// metrics in its own registry next to its own, and serves them however it
// serves the rest. Nothing here registers anything globally.
//
// # Timed jobs
//
// [Cron] is fed by a cron.Runner's Observer, the JSON store's OnFlush and
// the REST API's OnRequest, and counts the runner's jobs at each
// collection ([Cron.Watch]). With the default namespace "ksana" it
// exposes:
//
//	ksana_jobs{state}                    gauge: jobs by state (enabled, paused)
//	ksana_runs_total{status}             counter: runs by final status
//	ksana_run_lag_seconds                histogram: triggered_at - scheduled_at
//	ksana_callback_latency_seconds       histogram: a run's callback, retries included
//	ksana_store_flush_seconds            histogram: one rewrite of jobs.json
//	ksana_store_flush_errors_total       counter: failed rewrites
//	ksana_store_file_bytes               gauge: size of jobs.json after the last rewrite
//	ksana_http_requests_total{route,code} counter: API requests
//	ksana_http_request_seconds           histogram: API request latency
//
// # Placement
//
// [Claim] is a claim.Observer: each cycle's report updates
//
//	ksana_claim_cycles_total{result}     counter: cycles, result ok or error
//	ksana_claim_cycle_seconds            histogram: duration of a cycle
//	ksana_claim_active_node_units        gauge: active node-units seen
//	ksana_claim_deployments              gauge: enabled deployments read
//	ksana_claim_eligible                 gauge: 1 when this node-unit may claim
//	ksana_claim_actions_total{action}    counter: claimed, conflict, released,
//	                                     started, stopped, restarted, daemon_missing
//	ksana_claim_problems_total           counter: errors about single records
//	ksana_claim_probe_failures_total     counter: failed usage probes
//	ksana_claim_fenced_cycles_total      counter: cycles that fenced
//
// # Dispatch plane
//
// [Scheduler] is fed by a scheduler.Dispatcher's Hooks ([Scheduler.Hooks])
// and the Redis stores' operation hook ([Scheduler.OpHook]). It exposes
// the dispatch plane's metrics under their own names (no namespace):
//
//	scheduler_phase2_redis_op_total{op,result}    counter: Redis operations by name and result
//	scheduler_phase2_inbox_pending                gauge: inbox entries read, not yet acknowledged
//	scheduler_phase2_dlq_moved_total              counter: inbox entries moved to the dead-letter queue
//	scheduler_phase2_job_state_total{state}       counter: jobs moved into each state here
//	scheduler_phase2_failover_total{reason}       counter: attempts taken off their node
//	scheduler_phase2_connected_nodes, _sessions   gauges: connections to this instance
//	scheduler_phase2_queue_depth{pool}            gauge: jobs waiting here for a node ([Scheduler.ReadQueues])
//	scheduler_phase2_queue_oldest_seconds{pool}   gauge: how long the oldest of them has waited
//	scheduler_phase2_shed_total{reason}           counter: jobs refused (queue_full) or failed (no_node) for want of a node
//
// and more; [Scheduler] lists them all.
//
// # Use
//
// Create a collector, pass it to the hooks, register it:
//
//	m := metrics.NewCron(metrics.CronConfig{})
//	r, err := cron.New(store, exec, cron.Config{Observer: m})
//	m.Watch(r)
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(m)
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// Two collectors of one kind in one registry need different namespaces
// (the Namespace field of their Config), or the registry refuses the
// second.
package metrics
