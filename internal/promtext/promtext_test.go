package promtext

import (
	"net/http/httptest"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWrite(t *testing.T) {
	reg := NewRegistry()
	runs := reg.Counter("ksana_runs_total", "Runs by final status.", "status")
	jobs := reg.Gauge("ksana_up", "Whether the service is up.")
	reg.GaugeFunc("ksana_jobs", "Jobs by state.", []string{"state"}, func(emit func(float64, ...string)) {
		emit(2, "paused")
		emit(5, "enabled")
	})
	lag := reg.Histogram("ksana_run_lag_seconds", "How late runs start.\nIn seconds.", []float64{0.01, 0.1, 1})
	runs.Add(1, "success")
	runs.Add(2, "success")
	runs.Add(1, `fa"il\ed`+"\n")
	jobs.Set(1)
	for _, v := range []float64{0.005, 0.01, 0.05, 3} {
		lag.Observe(v)
	}
	want := `# HELP ksana_runs_total Runs by final status.
# TYPE ksana_runs_total counter
ksana_runs_total{status="fa\"il\\ed\n"} 1
ksana_runs_total{status="success"} 3
# HELP ksana_up Whether the service is up.
# TYPE ksana_up gauge
ksana_up 1
# HELP ksana_jobs Jobs by state.
# TYPE ksana_jobs gauge
ksana_jobs{state="enabled"} 5
ksana_jobs{state="paused"} 2
# HELP ksana_run_lag_seconds How late runs start.\nIn seconds.
# TYPE ksana_run_lag_seconds histogram
ksana_run_lag_seconds_bucket{le="0.01"} 2
ksana_run_lag_seconds_bucket{le="0.1"} 3
ksana_run_lag_seconds_bucket{le="1"} 3
ksana_run_lag_seconds_bucket{le="+Inf"} 4
ksana_run_lag_seconds_sum 3.065
ksana_run_lag_seconds_count 4
`
	rec := httptest.NewRecorder()
	reg.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if diff := cmp.Diff(want, rec.Body.String()); diff != "" {
		t.Errorf("exposition (-want +got):\n%s", diff)
	}
	if got := rec.Header().Get("Content-Type"); got != ContentType {
		t.Errorf("Content-Type = %q, want %q", got, ContentType)
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	for _, name := range []string{"dup", "bad name", "0lead"} {
		t.Run(name, func(t *testing.T) {
			reg := NewRegistry()
			reg.Counter("dup", "")
			defer func() {
				if recover() == nil {
					t.Errorf("registering %q did not panic", name)
				}
			}()
			reg.Counter(name, "")
		})
	}
}

func ExampleRegistry() {
	reg := NewRegistry()
	runs := reg.Counter("ksana_runs_total", "Runs by final status.", "status")
	runs.Add(1, "success")
	reg.WriteTo(os.Stdout)
	// Output:
	// # HELP ksana_runs_total Runs by final status.
	// # TYPE ksana_runs_total counter
	// ksana_runs_total{status="success"} 1
}
