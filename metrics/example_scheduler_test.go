package metrics_test

import (
	"fmt"
	"net/http"

	"github.com/ksana-dev/ksana/fsm"
	"github.com/ksana-dev/ksana/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// A dispatch instance's metrics: the collectors go into a registry, their
// hooks into the scheduler's Config (cfg.Hooks = m.Hooks()) and the Redis
// stores (redisstore.NewStores(client, cfg, m.OpHook())).
func ExampleNewScheduler() {
	m := metrics.NewScheduler(func() (int, int) { return 2, 1 })
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	hooks := m.Hooks()
	hooks.JobState(fsm.Created) // what a Dispatcher calls as it works
	m.OpHook()("fsm_apply", "ok", 0)

	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		fmt.Println(mf.GetName(), mf.GetType())
	}
	// Output:
	// scheduler_phase2_adopted_total COUNTER
	// scheduler_phase2_connected_nodes GAUGE
	// scheduler_phase2_connected_sessions GAUGE
	// scheduler_phase2_dlq_moved_total COUNTER
	// scheduler_phase2_inbox_lost_total COUNTER
	// scheduler_phase2_inbox_pending GAUGE
	// scheduler_phase2_job_state_total COUNTER
	// scheduler_phase2_redis_op_total COUNTER
	// scheduler_phase2_selection_miss_total COUNTER
}
