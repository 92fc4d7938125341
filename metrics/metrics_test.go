package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/httpapi"
	"github.com/ksana-dev/ksana/metrics"
	"github.com/ksana-dev/ksana/store/jsonstore"
)

// series is one gathered sample: its family, type, labels and value (the
// sample count for a histogram).
type series struct {
	Name   string
	Type   string
	Labels string
	Value  float64
}

// gather registers c in a new registry and returns every series, sorted.
func gather(t *testing.T, c prometheus.Collector) []series {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatalf("register: %v", err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var out []series
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			s := series{Name: f.GetName(), Type: strings.ToLower(f.GetType().String()), Labels: strings.Join(labels, ",")}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				s.Value = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				s.Value = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				s.Value = float64(m.GetHistogram().GetSampleCount())
			}
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b series) int { return strings.Compare(a.Name+" "+a.Labels, b.Name+" "+b.Labels) })
	return out
}

func newRunner(t *testing.T) *cron.Runner {
	t.Helper()
	r, err := cron.New(cron.NewMemStore(), cron.NewHTTPExecutor(cron.HTTPExecutorConfig{}), cron.Config{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	for _, j := range []cron.Job{
		{ID: "a", HTTP: cron.HTTPConfig{URL: "https://example.com/a"},
			Schedule: cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(time.Minute), StartAt: start}},
		{ID: "b", HTTP: cron.HTTPConfig{URL: "https://example.com/b"},
			Schedule: cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(time.Minute), StartAt: start}},
		{ID: "c", Paused: true, HTTP: cron.HTTPConfig{URL: "https://example.com/c"},
			Schedule: cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(time.Minute), StartAt: start}},
	} {
		if _, err := r.Add(context.Background(), j); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func TestCron(t *testing.T) {
	t.Parallel()
	sched := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		ns    string
		watch bool
		feed  func(m *metrics.Cron)
		want  []series
	}{
		{
			name: "no hooks called: every unlabelled series at zero, jobs at zero",
			want: []series{
				{"ksana_callback_latency_seconds", "histogram", "", 0},
				{"ksana_http_request_seconds", "histogram", "", 0},
				{"ksana_jobs", "gauge", "state=enabled", 0},
				{"ksana_jobs", "gauge", "state=paused", 0},
				{"ksana_run_lag_seconds", "histogram", "", 0},
				{"ksana_store_file_bytes", "gauge", "", 0},
				{"ksana_store_flush_errors_total", "counter", "", 0},
				{"ksana_store_flush_seconds", "histogram", "", 0},
			},
		},
		{
			name:  "every hook",
			watch: true,
			feed: func(m *metrics.Cron) {
				m.RunFinished(cron.Run{Status: cron.StatusSuccess, Attempts: 1, ScheduledAt: sched, TriggeredAt: sched.Add(time.Millisecond)})
				m.RunFinished(cron.Run{Status: cron.StatusSuccess, Attempts: 2})
				m.RunFinished(cron.Run{Status: cron.StatusMissed}) // no attempt: no lag, no latency
				m.Flush(jsonstore.FlushInfo{Bytes: 1234, Duration: time.Millisecond})
				m.Flush(jsonstore.FlushInfo{Bytes: 99, Err: errors.New("disk full")})
				m.Request(httpapi.RequestInfo{Route: "/jobs", Status: 201, Duration: time.Millisecond})
				m.Request(httpapi.RequestInfo{Route: "/jobs", Status: 201})
				m.Request(httpapi.RequestInfo{Route: "", Status: 404})
			},
			want: []series{
				{"ksana_callback_latency_seconds", "histogram", "", 2},
				{"ksana_http_request_seconds", "histogram", "", 3},
				{"ksana_http_requests_total", "counter", "code=201,route=/jobs", 2},
				{"ksana_http_requests_total", "counter", "code=404,route=other", 1},
				{"ksana_jobs", "gauge", "state=enabled", 2},
				{"ksana_jobs", "gauge", "state=paused", 1},
				{"ksana_run_lag_seconds", "histogram", "", 2},
				{"ksana_runs_total", "counter", "status=missed", 1},
				{"ksana_runs_total", "counter", "status=success", 2},
				{"ksana_store_file_bytes", "gauge", "", 1234},
				{"ksana_store_flush_errors_total", "counter", "", 1},
				{"ksana_store_flush_seconds", "histogram", "", 2},
			},
		},
		{
			name: "namespace",
			ns:   "app",
			feed: func(m *metrics.Cron) { m.RunFinished(cron.Run{Status: cron.StatusFailed}) },
			want: []series{
				{"app_callback_latency_seconds", "histogram", "", 0},
				{"app_http_request_seconds", "histogram", "", 0},
				{"app_jobs", "gauge", "state=enabled", 0},
				{"app_jobs", "gauge", "state=paused", 0},
				{"app_run_lag_seconds", "histogram", "", 0},
				{"app_runs_total", "counter", "status=failed", 1},
				{"app_store_file_bytes", "gauge", "", 0},
				{"app_store_flush_errors_total", "counter", "", 0},
				{"app_store_flush_seconds", "histogram", "", 0},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := metrics.NewCron(metrics.CronConfig{Namespace: tt.ns})
			if tt.watch {
				m.Watch(newRunner(t))
			}
			if tt.feed != nil {
				tt.feed(m)
			}
			if diff := cmp.Diff(tt.want, gather(t, m)); diff != "" {
				t.Errorf("gathered series (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCronBuckets(t *testing.T) {
	t.Parallel()
	m := metrics.NewCron(metrics.CronConfig{})
	m.RunFinished(cron.Run{Status: cron.StatusSuccess, Attempts: 1, Latency: cron.Duration(3 * time.Millisecond)})
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "ksana_callback_latency_seconds" {
			continue
		}
		var bounds []float64
		for _, b := range f.GetMetric()[0].GetHistogram().GetBucket() {
			bounds = append(bounds, b.GetUpperBound())
		}
		if diff := cmp.Diff(metrics.CronBuckets, bounds); diff != "" {
			t.Errorf("buckets (-want +got):\n%s", diff)
		}
		return
	}
	t.Fatal("ksana_callback_latency_seconds not gathered")
}

func TestClaim(t *testing.T) {
	t.Parallel()
	zeroActions := func(except map[string]float64) []series {
		var out []series
		acts := slices.Clone(metrics.ClaimActions)
		slices.Sort(acts)
		for _, a := range acts {
			out = append(out, series{"ksana_claim_actions_total", "counter", "action=" + a, except[a]})
		}
		return out
	}
	tests := []struct {
		name    string
		reports []claim.Report
		want    []series
	}{
		{
			name: "before the first cycle",
			want: slices.Concat(zeroActions(nil), []series{
				{"ksana_claim_active_node_units", "gauge", "", 0},
				{"ksana_claim_cycle_seconds", "histogram", "", 0},
				{"ksana_claim_cycles_total", "counter", "result=error", 0},
				{"ksana_claim_cycles_total", "counter", "result=ok", 0},
				{"ksana_claim_deployments", "gauge", "", 0},
				{"ksana_claim_eligible", "gauge", "", 0},
				{"ksana_claim_fenced_cycles_total", "counter", "", 0},
				{"ksana_claim_probe_failures_total", "counter", "", 0},
				{"ksana_claim_problems_total", "counter", "", 0},
			}),
		},
		{
			name: "a cycle that claimed, then one that failed",
			reports: []claim.Report{
				{Duration: 20 * time.Millisecond, Active: 3, Deployments: 10, Eligible: true,
					Claimed: []string{"d1"}, Conflicts: []string{"d2"}, Started: []string{"d1", "x"},
					Restarted: []string{"y"}, Missing: []string{"x"}, ProbeFailures: 1,
					Problems: []error{errors.New("refused")}},
				{Duration: time.Second, Err: errors.New("membership down"), Fenced: true, Stopped: []string{"d1"}},
			},
			want: slices.Concat(zeroActions(map[string]float64{
				"claimed": 1, "conflict": 1, "started": 2, "restarted": 1, "daemon_missing": 1, "stopped": 1,
			}), []series{
				{"ksana_claim_active_node_units", "gauge", "", 3},
				{"ksana_claim_cycle_seconds", "histogram", "", 2},
				{"ksana_claim_cycles_total", "counter", "result=error", 1},
				{"ksana_claim_cycles_total", "counter", "result=ok", 1},
				{"ksana_claim_deployments", "gauge", "", 10},
				{"ksana_claim_eligible", "gauge", "", 1},
				{"ksana_claim_fenced_cycles_total", "counter", "", 1},
				{"ksana_claim_probe_failures_total", "counter", "", 1},
				{"ksana_claim_problems_total", "counter", "", 1},
			}),
		},
		{
			name: "released, not eligible",
			reports: []claim.Report{
				{Active: 2, Deployments: 4, Eligible: true},
				{Active: 2, Deployments: 5, Released: []string{"d4"}},
			},
			want: slices.Concat(zeroActions(map[string]float64{"released": 1}), []series{
				{"ksana_claim_active_node_units", "gauge", "", 2},
				{"ksana_claim_cycle_seconds", "histogram", "", 2},
				{"ksana_claim_cycles_total", "counter", "result=error", 0},
				{"ksana_claim_cycles_total", "counter", "result=ok", 2},
				{"ksana_claim_deployments", "gauge", "", 5},
				{"ksana_claim_eligible", "gauge", "", 0},
				{"ksana_claim_fenced_cycles_total", "counter", "", 0},
				{"ksana_claim_probe_failures_total", "counter", "", 0},
				{"ksana_claim_problems_total", "counter", "", 0},
			}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := metrics.NewClaim(metrics.ClaimConfig{})
			for _, r := range tt.reports {
				m.ObserveCycle(r)
			}
			got := gather(t, m)
			want := slices.Clone(tt.want)
			slices.SortFunc(want, func(a, b series) int { return strings.Compare(a.Name+" "+a.Labels, b.Name+" "+b.Labels) })
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("gathered series (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRegistries: the collectors go into any registry, together with a
// service's own metrics; a second collector of one kind needs its own
// namespace.
func TestRegistries(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	own := prometheus.NewCounter(prometheus.CounterOpts{Name: "app_requests_total", Help: "The service's own."})
	for _, c := range []prometheus.Collector{own, metrics.NewCron(metrics.CronConfig{}), metrics.NewClaim(metrics.ClaimConfig{}),
		metrics.NewCron(metrics.CronConfig{Namespace: "second"})} {
		if err := reg.Register(c); err != nil {
			t.Fatalf("register: %v", err)
		}
	}
	if err := reg.Register(metrics.NewCron(metrics.CronConfig{})); err == nil {
		t.Error("a second Cron with the same namespace was registered, want an error")
	}
	if err := reg.Register(metrics.NewClaim(metrics.ClaimConfig{})); err == nil {
		t.Error("a second Claim with the same namespace was registered, want an error")
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		"# TYPE app_requests_total counter",
		"# TYPE ksana_jobs gauge",
		`ksana_claim_cycles_total{result="ok"} 0`,
		"# TYPE second_run_lag_seconds histogram",
		`ksana_run_lag_seconds_bucket{le="0.001"} 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if t.Failed() {
		fmt.Println(string(body))
	}
}

// TestCronConcurrent feeds every hook from several goroutines while
// collecting (run with -race).
func TestCronConcurrent(t *testing.T) {
	t.Parallel()
	m := metrics.NewCron(metrics.CronConfig{})
	c := metrics.NewClaim(metrics.ClaimConfig{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(m, c)
	done := make(chan struct{})
	for i := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 100 {
				m.RunFinished(cron.Run{Status: cron.StatusSuccess, Attempts: 1})
				m.Request(httpapi.RequestInfo{Route: "/jobs", Status: 200 + i})
				m.Flush(jsonstore.FlushInfo{Bytes: i})
				c.ObserveCycle(claim.Report{Active: i + 1, Claimed: []string{"x"}})
			}
		}()
	}
	m.Watch(newRunner(t))
	for range 10 {
		if _, err := reg.Gather(); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		<-done
	}
	got := gather(t, m)
	var runs float64
	for _, s := range got {
		if s.Name == "ksana_runs_total" {
			runs = s.Value
		}
	}
	if runs != 400 {
		t.Errorf("ksana_runs_total = %v, want 400", runs)
	}
}
