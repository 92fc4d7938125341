package console

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/httpapi"
)

var (
	bench1MOnce sync.Once
	bench1M     *benchFixture
)

type benchFixture struct {
	r   *cron.Runner
	c   *Console
	api *httpapi.Server
	mid string // the id of a job half way through
	hot string // a job with a full history
}

// benchRunner is a runner over no store (it keeps the runs itself) with
// 1M jobs, a third of each kind, and one job with a full history; built
// once for every benchmark of the run.
func benchRunner(b *testing.B) *benchFixture {
	bench1MOnce.Do(func() {
		const n = 1_000_000
		exec := cron.ExecutorFunc(func(ctx context.Context, j *cron.Job, info cron.RunInfo) cron.Result {
			return cron.Result{Status: cron.StatusFailed, Attempts: 3, HTTPStatus: 503, Error: "callback answered 503 Service Unavailable"}
		})
		done := make(chan cron.Run, 1000)
		r, err := cron.New(nil, exec, cron.Config{Observer: cron.ObserverFunc(func(run cron.Run) { done <- run })})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		at := time.Now().Add(24 * time.Hour)
		for i := range n {
			j := cron.Job{ID: fmt.Sprintf("job-%07d", i), Name: fmt.Sprintf("report %d for team %d", i, i%97),
				HTTP: cron.HTTPConfig{URL: "https://example.com/hook"}}
			switch i % 3 {
			case 0:
				j.Schedule = cron.Cron(fmt.Sprintf("%d 3 * * *", i%60))
			case 1:
				j.Schedule = cron.Every(time.Duration(1+i%600) * time.Minute)
			default:
				j.Schedule = cron.At(at.Add(time.Duration(i) * time.Second))
			}
			if _, err := r.Add(ctx, j); err != nil {
				b.Fatal(err)
			}
		}
		rctx, stop := context.WithCancel(ctx)
		ran := make(chan error, 1)
		go func() { ran <- r.Run(rctx) }()
		hot := "job-0000042"
		for range historyRuns {
			if _, err := r.RunNow(ctx, hot, cron.RunOptions{Force: true}); err != nil {
				b.Fatal(err)
			}
			<-done
		}
		stop()
		<-ran
		api, err := httpapi.New(r, httpapi.Config{})
		if err != nil {
			b.Fatal(err)
		}
		bench1M = &benchFixture{r: r, c: New(r, Config{API: api}), api: api, mid: fmt.Sprintf("job-%07d", n/2), hot: hot}
	})
	if bench1M == nil {
		b.Fatal("building the runner failed")
	}
	return bench1M
}

// BenchmarkPages1M renders the console's pages server-side over a runner
// with 1M jobs and reports the p99 of a render and the page's weight; the
// baseline of each list page is the API's JSON answer for the same page
// (GET /jobs?limit=50 with the same filter), as ratio_vs_api. The
// search's baseline is the page of jobs found by building a Job of each
// entry to test its name (Runner.List with the whole filter in JobQuery.Keep), as
// ratio_vs_job_scan.
//
//	go test -run '^$' -bench Pages1M -benchtime 200x ./cron/console/
func BenchmarkPages1M(b *testing.B) {
	f := benchRunner(b)
	cases := []struct {
		name, page, api string
	}{
		{"jobs", "/jobs", "/jobs?limit=50"},
		{"jobs-deep", "/jobs?after=" + f.mid, "/jobs?limit=50&after=" + f.mid},
		{"jobs-filtered-kind", "/jobs?kind=cron&enabled=true", "/jobs?limit=50&kind=cron&enabled=true"},
		{"jobs-filtered-search", "/jobs?q=TEAM+13&kind=every", ""},
		{"job", "/jobs/" + f.hot, "/jobs/" + f.hot + "/runs"},
		{"runs", "/runs", "/runs?limit=50"},
		{"runs-filtered", "/runs?status=failed&job=" + f.hot, "/runs?limit=50&status=failed&job=" + f.hot},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			for range 20 {
				timeGet(b, f.c, tc.page)
			}
			runtime.GC()
			var page, base, scanBase []time.Duration
			size := 0
			for b.Loop() {
				d, n := timeGet(b, f.c, tc.page)
				page, size = append(page, d), n
				if tc.api != "" {
					d, _ := timeGet(b, f.api, tc.api)
					base = append(base, d)
				}
				if tc.name == "jobs-filtered-search" {
					start := time.Now()
					if _, _, err := f.r.List(context.Background(), cron.JobQuery{Limit: DefaultPageSize, Keep: jobScanKeep("TEAM 13", cron.KindEvery)}); err != nil {
						b.Fatal(err)
					}
					scanBase = append(scanBase, time.Since(start))
				}
			}
			b.ReportMetric(float64(p99(page).Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(size)/1024, "KB/page")
			if len(base) > 0 {
				b.ReportMetric(float64(p99(page))/float64(p99(base)), "ratio_vs_api")
			}
			if len(scanBase) > 0 {
				b.ReportMetric(float64(p99(scanBase).Microseconds())/1000, "job-scan-p99-ms")
				b.ReportMetric(float64(p99(page))/float64(p99(scanBase)), "ratio_vs_job_scan")
			}
			if size >= 100<<10 {
				b.Errorf("%s weighs %d bytes, want < 100 KB", tc.page, size)
			}
		})
	}
}

func timeGet(b *testing.B, h http.Handler, path string) (time.Duration, int) {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	w := httptest.NewRecorder()
	start := time.Now()
	h.ServeHTTP(w, req)
	d := time.Since(start)
	if w.Code != http.StatusOK {
		b.Fatalf("GET %s: %d %s", path, w.Code, w.Body.String())
	}
	return d, w.Body.Len()
}

func p99(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)*99)/100]
}

// jobScanKeep tests the kind and the id or name of a Job built for each
// entry: how the search was made before the runner tested the text.
func jobScanKeep(q, kind string) func(*cron.Job) bool {
	return func(j *cron.Job) bool {
		return j.Schedule.Kind == kind && (containsFold(j.ID, q) || containsFold(j.Name, q))
	}
}

// containsFold reports whether sub is within s, ignoring case, as the
// runner's text filter does.
func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// BenchmarkOverview1M renders the overview over a runner with 1M jobs,
// with counts that are always stale (OverviewMaxAge 1ms): each request
// is answered from the last counts while they are computed again in the
// background, at most every ten times a scan takes. It reports the p99
// of a render and, as the baseline, the time of one scan of every job
// that the counts take (scan-ms), as ratio_vs_scan, and how many scans
// ended in the background while it ran (scans-meanwhile; a request every
// 20ms, 1000 requests make 20s).
//
//	go test -run '^$' -bench Overview1M -benchtime 1000x ./cron/console/
func BenchmarkOverview1M(b *testing.B) {
	f := benchRunner(b)
	c := New(f.r, Config{API: f.api, OverviewMaxAge: time.Millisecond})
	start := time.Now()
	c.overviewCounts()
	scan := time.Since(start)
	timeGet(b, c, "/") // the first, which waits for the counts
	runtime.GC()
	var page []time.Duration
	scans := map[time.Time]bool{}
	for b.Loop() {
		d, _ := timeGet(b, c, "/")
		page = append(page, d)
		scans[c.stats().At] = true
		time.Sleep(20 * time.Millisecond) // requests spread over the scans
	}
	b.ReportMetric(float64(p99(page).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(len(scans)-1), "scans-meanwhile")
	b.ReportMetric(float64(scan.Microseconds())/1000, "scan-ms")
	b.ReportMetric(float64(p99(page))/float64(scan), "ratio_vs_scan")
}
