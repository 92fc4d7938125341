package metrics_test

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/metrics"
)

// Example registers ksana's collectors in a service's own registry, next
// to one of its own metrics, wires them to a runner and a claim loop, and
// reads a few series back as a scrape of the registry would.
func Example() {
	reg := prometheus.NewRegistry()
	own := prometheus.NewCounter(prometheus.CounterOpts{Name: "app_logins_total", Help: "The service's own metric."})
	jobs := metrics.NewCron(metrics.CronConfig{})
	placement := metrics.NewClaim(metrics.ClaimConfig{})
	reg.MustRegister(own, jobs, placement)

	// The hooks: cron.Config{Observer: jobs} and claim.Config{Observer:
	// placement}. Here they are called by hand.
	r, err := cron.New(cron.NewMemStore(), cron.NewHTTPExecutor(cron.HTTPExecutorConfig{}), cron.Config{Observer: jobs})
	if err != nil {
		panic(err)
	}
	jobs.Watch(r)
	jobs.RunFinished(cron.Run{Status: cron.StatusSuccess, Attempts: 1, Latency: cron.Duration(40 * time.Millisecond)})
	placement.ObserveCycle(claim.Report{Active: 2, Deployments: 3, Eligible: true, Claimed: []string{"d1"}})
	own.Inc()

	fams, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range fams {
		switch f.GetName() {
		case "app_logins_total", "ksana_runs_total", "ksana_callback_latency_seconds", "ksana_claim_active_node_units":
			fmt.Println(f.GetName(), f.GetType())
		}
	}
	// Output:
	// app_logins_total COUNTER
	// ksana_callback_latency_seconds HISTOGRAM
	// ksana_claim_active_node_units GAUGE
	// ksana_runs_total COUNTER
}
