//go:build unix

package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/store/sqlstore"
)

// benchJobs returns n every jobs calling url, interval apart, their slots
// spread evenly over the interval starting at start.
func benchJobs(n int, interval time.Duration, start time.Time, url string) []cron.Job {
	out := make([]cron.Job, n)
	for i := range out {
		st := start.Add(time.Duration(int64(interval) * int64(i) / int64(n)))
		out[i] = cron.Job{ID: fmt.Sprintf("%032x", i), Name: fmt.Sprint("job ", i), Type: "http",
			HTTP:     cron.HTTPConfig{Method: "POST", URL: url},
			Schedule: cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(interval), StartAt: st},
			Timeout:  cron.Duration(10 * time.Second), RetryBackoff: cron.Duration(5 * time.Second), NextRunAt: st}
	}
	return out
}

func writeJobsFile(b *testing.B, jobs []cron.Job) string {
	b.Helper()
	dir := b.TempDir()
	var buf bytes.Buffer
	buf.WriteString(`{"version":1,"updated_at":"","jobs":[`)
	for i, j := range jobs {
		if i > 0 {
			buf.WriteByte(',')
		}
		enc, err := json.Marshal(j)
		if err != nil {
			b.Fatal(err)
		}
		buf.Write(enc)
	}
	buf.WriteString("]}")
	if err := os.WriteFile(filepath.Join(dir, "jobs.json"), buf.Bytes(), 0o600); err != nil {
		b.Fatal(err)
	}
	return dir
}

// insertJobs writes jobs into ksana_job of dbURL (migrated first by a
// service start) with multi-row INSERTs.
func insertJobs(b *testing.B, dbURL string, jobs []cron.Job) {
	b.Helper()
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for start := 0; start < len(jobs); start += 1000 {
		var q strings.Builder
		q.WriteString("INSERT INTO ksana_job (id, part, config, next_run_at) VALUES ")
		var args []any
		for i, j := range jobs[start:min(start+1000, len(jobs))] {
			next := j.NextRunAt.UnixNano()
			j.NextRunAt = time.Time{}
			cfg, _ := json.Marshal(j)
			if i > 0 {
				q.WriteByte(',')
			}
			fmt.Fprintf(&q, "($%d, $%d, $%d, $%d)", len(args)+1, len(args)+2, len(args)+3, len(args)+4)
			args = append(args, j.ID, sqlstore.Partition(j.ID, sqlstore.DefaultPartitions), string(cfg), next)
		}
		if _, err := db.Exec(q.String(), args...); err != nil {
			b.Fatal(err)
		}
	}
}

// startBenchService runs the service in this process with env, over
// LOG_LEVEL=error, WORKERS=16 and MAX_RETRIES=0.
func startBenchService(b *testing.B, env map[string]string) (url string, svc *service, stop func()) {
	b.Helper()
	vars := map[string]string{"LOG_LEVEL": "error", "WORKERS": "16", "MAX_RETRIES": "0"}
	for k, v := range env {
		vars[k] = v
	}
	return serveBench(b, vars)
}

// serveBench runs the service in this process with exactly the settings
// vars, and returns once it answers /health.
func serveBench(b *testing.B, vars map[string]string) (url string, svc *service, stop func()) {
	b.Helper()
	cfg, err := loadConfig(func(k string) string { return vars[k] })
	if err != nil {
		b.Fatal(err)
	}
	svc, err = newService(cfg, newLogger(cfg, os.Stderr))
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.run(ctx, ln) }()
	url = "http://" + ln.Addr().String()
	for {
		if resp, err := http.Get(url + "/health"); err == nil {
			resp.Body.Close()
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return url, svc, func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}
}

// lagRecorder is a callback server that records the firing lag of each
// call: its arrival minus X-Ksana-Scheduled-At.
type lagRecorder struct {
	*httptest.Server
	mu    sync.Mutex
	from  time.Time
	lags  []time.Duration
	slots map[string]int
	dups  int
}

func newLagRecorder(b *testing.B) *lagRecorder {
	l := &lagRecorder{slots: map[string]int{}}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		at, err := time.Parse(time.RFC3339Nano, r.Header.Get("X-Ksana-Scheduled-At"))
		if err != nil {
			return
		}
		key := r.Header.Get("X-Ksana-Job-Id") + " " + r.Header.Get("X-Ksana-Scheduled-At")
		l.mu.Lock()
		if l.slots[key]++; l.slots[key] > 1 {
			l.dups++
		}
		if !l.from.IsZero() && now.After(l.from) {
			l.lags = append(l.lags, now.Sub(at))
		}
		l.mu.Unlock()
	}))
	b.Cleanup(l.Close)
	return l
}

func (l *lagRecorder) measure(d time.Duration) (p50, p99 time.Duration, n, dups int) {
	l.mu.Lock()
	l.from, l.lags = time.Now(), nil
	l.mu.Unlock()
	time.Sleep(d)
	l.mu.Lock()
	defer l.mu.Unlock()
	lags := slices.Clone(l.lags)
	l.from = time.Time{}
	slices.Sort(lags)
	if len(lags) == 0 {
		return 0, 0, 0, l.dups
	}
	return lags[len(lags)/2], lags[len(lags)*99/100], len(lags), l.dups
}

// xacts returns the database's committed transactions (one per statement
// outside a transaction) so far.
func xacts(b *testing.B, dbURL string) int64 {
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var n int64
	if _, err := db.Exec("SELECT pg_stat_force_next_flush()"); err != nil {
		b.Log(err)
	}
	if err := db.QueryRow("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// runsByInstance returns how many runs of ksana_run each instance claimed.
func runsByInstance(b *testing.B, dbURL string) string {
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT instance, count(*) FROM ksana_run GROUP BY instance ORDER BY instance")
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			b.Fatal(err)
		}
		parts = append(parts, fmt.Sprintf("%s=%d", name, n))
	}
	return strings.Join(parts, " ")
}

// BenchmarkSharedFiringLag measures the firing lag (callback arrival minus
// scheduled time, p50 and p99) of 100,000 every-100s jobs (1,000 slots a
// second) on one service over the JSON file, then on one and on three
// services over one PostgreSQL schema, in the same run; and on PostgreSQL the database
// transactions per fired slot (pg_stat_database, while nothing else uses
// the database). Run it alone: go test -run XXX -bench SharedFiringLag
// -benchtime 1x ./cmd/ksana/
func BenchmarkSharedFiringLag(b *testing.B) {
	const n, interval, window = 100_000, 100 * time.Second, 20 * time.Second
	cb := newLagRecorder(b)
	start := time.Now().UTC().Truncate(time.Second).Add(-interval)
	jobs := benchJobs(n, interval, start, cb.URL)
	for b.Loop() {
		var jsonP99 time.Duration
		{
			_, _, stop := startBenchService(b, map[string]string{"KSANA_DATA": writeJobsFile(b, jobs)})
			time.Sleep(5 * time.Second)
			p50, p99, calls, dups := cb.measure(window)
			stop()
			b.ReportMetric(float64(p50)/1e6, "json-p50-ms")
			b.ReportMetric(float64(p99)/1e6, "json-p99-ms")
			b.Logf("json, 1 instance: %d calls in %v, lag p50 %v p99 %v, %d slots called twice", calls, window, p50, p99, dups)
			jsonP99 = p99
		}
		dbURL := postgresSchemaURL(b, "ksana_bench")
		env := func(name string) map[string]string {
			return map[string]string{"DATABASE_URL": dbURL, "KSANA_INSTANCE": name, "KSANA_LEASE_TTL": "3s"}
		}
		_, _, stop := startBenchService(b, env("bench-0")) // migrates
		stop()
		insertJobs(b, dbURL, jobs)
		{
			// One instance on PostgreSQL: the cost of the database alone.
			_, _, stop := startBenchService(b, env("bench-solo"))
			time.Sleep(5 * time.Second)
			p50, p99, calls, dups := cb.measure(window)
			stop()
			b.ReportMetric(float64(p50)/1e6, "pg1-p50-ms")
			b.ReportMetric(float64(p99)/1e6, "pg1-p99-ms")
			b.Logf("postgres, 1 instance: %d calls in %v, lag p50 %v p99 %v, %d slots called twice", calls, window, p50, p99, dups)
		}
		var stops []func()
		var svcs []*service
		for i := range 3 {
			_, svc, stop := startBenchService(b, env(fmt.Sprintf("bench-%d", i)))
			stops = append(stops, stop)
			svcs = append(svcs, svc)
		}
		time.Sleep(8 * time.Second) // the leases settle
		// Each instance holds only the jobs of its partitions, loaded as
		// it gains them: measure once every job is held by one of them.
		settled := time.Now()
		for {
			sum := 0
			for _, s := range svcs {
				sum += s.runner.Len()
			}
			if sum == n {
				break
			}
			if time.Since(settled) > time.Minute {
				b.Fatalf("after the leases settled and a minute, the instances hold %d of %d jobs", sum, n)
			}
			time.Sleep(50 * time.Millisecond)
		}
		b.Logf("every job held %v after the 8s for the leases", time.Since(settled).Round(time.Millisecond))
		x0 := xacts(b, dbURL)
		p50, p99, calls, dups := cb.measure(window)
		x1 := xacts(b, dbURL)
		share := runsByInstance(b, dbURL)
		var held []string
		for _, s := range svcs {
			held = append(held, fmt.Sprint(len(s.db.st.Leases().Owned())))
		}
		for _, s := range stops {
			s()
		}
		b.ReportMetric(float64(p50)/1e6, "pg3-p50-ms")
		b.ReportMetric(float64(p99)/1e6, "pg3-p99-ms")
		b.ReportMetric(float64(p99)/float64(max(jsonP99, 1)), "p99-ratio")
		b.ReportMetric(float64(x1-x0)/float64(max(calls, 1)), "db-xacts/slot")
		b.Logf("postgres, 3 instances (partitions held %s; runs by instance %s): %d calls in %v, lag p50 %v p99 %v, %d slots called twice, %d transactions",
			strings.Join(held, "/"), share, calls, window, p50, p99, dups, x1-x0)
	}
}

// BenchmarkSharedAPICreate measures POST /jobs through one instance, 8
// clients, on the JSON file and on PostgreSQL in the same run, each
// write acknowledged durably; and the floors on PostgreSQL: 8 clients
// inserting a job's row with nothing else (floor-insert), and with a
// trigger that notifies each insert as ksana_job's does
// (floor-insert-notify). PostgreSQL serializes the commits of the
// transactions that notify, fsync included, so the second floor is the
// one the API meets (vs-floor).
func BenchmarkSharedAPICreate(b *testing.B) {
	run := func(b *testing.B, url string) float64 {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
		var next atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for next.Add(1) <= int64(b.N) {
					resp, err := client.Post(url+"/jobs", "application/json",
						strings.NewReader(`{"http":{"url":"http://127.0.0.1:9/"},"schedule":{"kind":"every","every":"1h"}}`))
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 201 {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
		}
		wg.Wait()
		return float64(b.N) / time.Since(start).Seconds()
	}
	var jsonRate, pgRate float64
	b.Run("json", func(b *testing.B) {
		url, _, stop := startBenchService(b, map[string]string{"KSANA_DATA": b.TempDir()})
		defer stop()
		b.ResetTimer()
		jsonRate = run(b, url)
		b.ReportMetric(jsonRate, "creates/s")
	})
	b.Run("postgres", func(b *testing.B) {
		url, _, stop := startBenchService(b, map[string]string{"DATABASE_URL": postgresSchemaURL(b, "ksana_bench_api")})
		defer stop()
		b.ResetTimer()
		rate := run(b, url)
		b.ReportMetric(rate, "creates/s")
		if jsonRate > 0 {
			b.ReportMetric(rate/jsonRate, "vs-json")
		}
		pgRate = rate
	})
	for _, notify := range []bool{false, true} {
		name := "floor-insert"
		if notify {
			name += "-notify"
		}
		b.Run(name, func(b *testing.B) {
			db, err := sql.Open("pgx", postgresSchemaURL(b, "ksana_bench_floor"))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			db.SetMaxIdleConns(8)
			stmts := []string{"CREATE TABLE floor_job (id TEXT PRIMARY KEY, seq BIGSERIAL, part INTEGER NOT NULL, config TEXT NOT NULL)"}
			if notify {
				stmts = append(stmts, `CREATE FUNCTION floor_notify() RETURNS trigger LANGUAGE plpgsql AS $$
					BEGIN PERFORM pg_notify('floor_jobs', NEW.id); RETURN NULL; END $$`,
					"CREATE TRIGGER floor_notify AFTER INSERT ON floor_job FOR EACH ROW EXECUTE FUNCTION floor_notify()")
			}
			for _, q := range stmts {
				if _, err := db.Exec(q); err != nil {
					b.Fatal(err)
				}
			}
			cfg := `{"name":"","enabled":true,"type":"http","http":{"method":"GET","url":"http://127.0.0.1:9/","body":""},"schedule":{"kind":"every","every":"1h"},"timeout":"10s","max_retries":3,"retry_backoff":"5s"}`
			var next atomic.Int64
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
						if _, err := db.Exec("INSERT INTO floor_job (id, part, config) VALUES ($1, $2, $3)", fmt.Sprint("j", i), i%1024, cfg); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			rate := float64(b.N) / time.Since(start).Seconds()
			b.ReportMetric(rate, "inserts/s")
			if notify && rate > 0 {
				b.ReportMetric(pgRate/rate, "api-vs-floor")
			}
		})
	}
}
