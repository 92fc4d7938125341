package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// consoleJobs returns n jobs, a third of each schedule kind, none due
// during the benchmark.
func consoleJobs(n int) []cron.Job {
	start := time.Now().UTC().Truncate(time.Second).Add(time.Hour)
	out := make([]cron.Job, n)
	for i := range out {
		j := cron.Job{ID: fmt.Sprintf("job-%07d", i), Name: fmt.Sprintf("report %d for team %d", i, i%97), Type: "http",
			HTTP:    cron.HTTPConfig{Method: "POST", URL: "http://127.0.0.1:9/hook"},
			Timeout: cron.Duration(10 * time.Second), RetryBackoff: cron.Duration(5 * time.Second)}
		switch i % 3 {
		case 0:
			j.Schedule = cron.Cron(fmt.Sprintf("%d 3 * * *", i%60))
			j.NextRunAt = start.Add(time.Duration(i%3600) * time.Second)
		case 1:
			j.Schedule = cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(time.Hour), StartAt: start.Add(time.Duration(i%3600) * time.Second)}
			j.NextRunAt = j.Schedule.StartAt
		default:
			j.Schedule = cron.At(start.Add(24*time.Hour + time.Duration(i)*time.Second))
			j.NextRunAt = j.Schedule.RunAt
		}
		out[i] = j
	}
	return out
}

// historyJobs and historyRuns: how many jobs get a full history on
// PostgreSQL, and how many runs each.
const (
	historyJobs = 100_000
	historyRuns = 50
)

// insertHistory gives the first historyJobs of the jobs historyRuns runs
// each, in one statement.
func insertHistory(b *testing.B, dbURL string) {
	b.Helper()
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	now := time.Now().Add(-time.Hour).UnixNano()
	if _, err := db.Exec(`INSERT INTO ksana_run (id, job_id, slot, scheduled_at, triggered_at, finished_at, status, attempts, http_status, error, latency)
		SELECT 'run-' || j || '-' || r, 'job-' || lpad(j::text, 7, '0'), true, $1::bigint - r * 60000000000, $1::bigint - r * 60000000000 + 3000000,
			$1::bigint - r * 60000000000 + 250000000, CASE WHEN r % 7 = 0 THEN 'failed' ELSE 'success' END, CASE WHEN r % 7 = 0 THEN 3 ELSE 1 END,
			CASE WHEN r % 7 = 0 THEN 503 ELSE 200 END, CASE WHEN r % 7 = 0 THEN 'callback answered 503 Service Unavailable' ELSE '' END, 250000000
		FROM generate_series(0, $2::int - 1) AS j, generate_series(1, $3::int) AS r`, now, historyJobs, historyRuns); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(`ANALYZE ksana_run; ANALYZE ksana_job`); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkConsole1M renders the console's pages through the service with
// 1M jobs, on the JSON file and on PostgreSQL (where 100k jobs have a
// history of 50 runs), and reports the p99 of each page and its weight;
// the baseline is the API's answer for the same page (GET /jobs?limit=50
// with the same filter; GET /jobs/{id}/runs for the job page; /health for
// the overview, whose counts are computed in the background) in the same
// run, as ratio_vs_api. Loading 1M jobs takes a while: run it alone.
//
//	go test -run '^$' -bench Console1M -benchtime 200x -timeout 30m ./cmd/ksana/
func BenchmarkConsole1M(b *testing.B) {
	const n = 1_000_000
	jobs := consoleJobs(n)
	for _, st := range []string{"json", "postgres"} {
		b.Run(st, func(b *testing.B) {
			env := map[string]string{}
			hot := "job-0000042"
			if st == "json" {
				env["KSANA_DATA"] = writeJobsFile(b, jobs)
			} else {
				dbURL := postgresSchemaURL(b, "ksana-console-bench")
				_, _, stop := startBenchService(b, map[string]string{"DATABASE_URL": dbURL}) // migrates
				stop()
				insertJobs(b, dbURL, jobs)
				insertHistory(b, dbURL)
				env["DATABASE_URL"] = dbURL
			}
			began := time.Now()
			url, _, stop := startBenchService(b, env)
			defer stop()
			if st == "postgres" {
				// The instance loads its partitions' jobs after it
				// answers: measure once it holds them all.
				for {
					var h struct {
						JobsHeld int `json:"jobs_held"`
					}
					resp, err := http.Get(url + "/health")
					if err != nil {
						b.Fatal(err)
					}
					_ = json.NewDecoder(resp.Body).Decode(&h)
					resp.Body.Close()
					if h.JobsHeld >= n {
						break
					}
					if time.Since(began) > 10*time.Minute {
						b.Fatalf("the instance holds %d jobs after 10 minutes", h.JobsHeld)
					}
					time.Sleep(500 * time.Millisecond)
				}
			}
			b.Logf("%s: service up with %d jobs in %s", st, n, time.Since(began).Round(time.Millisecond))
			mid := jobs[n/2].ID
			pages := []struct{ name, page, api string }{
				{"overview", "/ui/", "/health"},
				{"jobs", "/ui/jobs", "/jobs?limit=50"},
				{"jobs-deep", "/ui/jobs?after=" + mid, "/jobs?limit=50&after=" + mid},
				{"jobs-filtered", "/ui/jobs?kind=cron&enabled=true", "/jobs?limit=50&kind=cron&enabled=true"},
				{"job", "/ui/jobs/" + hot, "/jobs/" + hot + "/runs"},
			}
			for _, p := range pages {
				b.Run(p.name, func(b *testing.B) {
					// Warm up: the first requests after a start of 1M jobs
					// meet the collection of what loading left.
					for range 100 {
						timedGet(b, url+p.page)
						timedGet(b, url+p.api)
					}
					runtime.GC()
					var page, base []time.Duration
					size := 0
					for b.Loop() {
						d, n := timedGet(b, url+p.page)
						page, size = append(page, d), n
						d, _ = timedGet(b, url+p.api)
						base = append(base, d)
					}
					b.ReportMetric(float64(pct99(page).Microseconds())/1000, "p99-ms")
					b.ReportMetric(float64(pct99(base).Microseconds())/1000, "api-p99-ms")
					b.ReportMetric(float64(pct99(page))/float64(pct99(base)), "ratio_vs_api")
					b.ReportMetric(float64(size)/1024, "KB/page")
					if size >= 100<<10 {
						b.Errorf("%s weighs %d bytes, want < 100 KB", p.page, size)
					}
				})
			}
		})
	}
}

func timedGet(b *testing.B, url string) (time.Duration, int) {
	start := time.Now()
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d %v %.300s", url, resp.StatusCode, err, body)
	}
	return d, len(body)
}

func pct99(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)*99/100]
}
