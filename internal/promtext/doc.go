// Package promtext writes metrics in the Prometheus text exposition format
// (version 0.0.4) without the Prometheus client library: counters, gauges
// and histograms, each with optional labels, kept in a [Registry] that the
// binaries own (no package-level collectors).
//
// # Use
//
//	reg := promtext.NewRegistry()
//	runs := reg.Counter("ksana_runs_total", "Runs by final status.", "status")
//	lag := reg.Histogram("ksana_run_lag_seconds", "How late runs start.", promtext.DefaultBuckets)
//	runs.Add(1, "success")
//	lag.Observe(0.002)
//	http.Handle("/metrics", reg)
//
// [Registry.GaugeFunc] computes a gauge when it is scraped (jobs by state).
// Metric families are written in the order they were registered; series of
// a family in the order of their label values.
package promtext
