package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// seedJobs writes a jobs.json of n every-1h jobs (not due during the
// benchmark) into a fresh directory.
func seedJobs(b *testing.B, n int) string {
	b.Helper()
	dir := b.TempDir()
	start := time.Now().UTC().Truncate(time.Second)
	var buf bytes.Buffer
	buf.WriteString(`{"version":1,"updated_at":"","jobs":[`)
	for i := range n {
		if i > 0 {
			buf.WriteByte(',')
		}
		j := cron.Job{ID: fmt.Sprintf("%032x", i), Name: fmt.Sprint("job ", i), Type: "http",
			HTTP:     cron.HTTPConfig{Method: "POST", URL: "http://127.0.0.1:9/hook", Headers: map[string]string{"Content-Type": "application/json"}, Body: `{"n":1}`},
			Schedule: cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(time.Hour), StartAt: start.Add(time.Duration(i%3600) * time.Second)},
			Timeout:  cron.Duration(10 * time.Second), MaxRetries: 3, RetryBackoff: cron.Duration(5 * time.Second),
			NextRunAt: start.Add(time.Hour + time.Duration(i%3600)*time.Second)}
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

func benchService(b *testing.B, dir string) (url string, stop func()) {
	url, _, stop = serveBench(b, map[string]string{"KSANA_DATA": dir, "LOG_LEVEL": "error"})
	return url, stop
}

// BenchmarkAPICreate measures POST /jobs with durable acknowledgement: the
// latency of each create (p50, p99) and the rate, with 1,000 and 100,000
// jobs in the store, from 1 client and from 8.
func BenchmarkAPICreate(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		for _, clients := range []int{1, 8} {
			b.Run(fmt.Sprintf("jobs=%d/clients=%d", n, clients), func(b *testing.B) {
				url, stop := benchService(b, seedJobs(b, n))
				defer stop()
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
				var next atomic.Int64
				var mu sync.Mutex
				var lat []time.Duration
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for range clients {
					wg.Go(func() {
						var mine []time.Duration
						for next.Add(1) <= int64(b.N) {
							body := `{"http":{"url":"http://127.0.0.1:9/"},"schedule":{"kind":"every","every":"1h"}}`
							t0 := time.Now()
							resp, err := client.Post(url+"/jobs", "application/json", bytes.NewReader([]byte(body)))
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
							mine = append(mine, time.Since(t0))
						}
						mu.Lock()
						lat = append(lat, mine...)
						mu.Unlock()
					})
				}
				wg.Wait()
				el := time.Since(start)
				b.StopTimer()
				slices.Sort(lat)
				q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1e6 }
				b.ReportMetric(q(0.5), "p50-ms")
				b.ReportMetric(q(0.99), "p99-ms")
				b.ReportMetric(float64(len(lat))/el.Seconds(), "creates/s")
			})
		}
	}
}

// BenchmarkStartup measures a start over a jobs.json of 100,000 and of
// 1,000,000 enabled every jobs: open the store, load and schedule every
// job in the runner. (The million is left out under -short.)
func BenchmarkStartup(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			if testing.Short() && n > 100_000 {
				b.Skip("-short")
			}
			dir := seedJobs(b, n)
			cfg, err := loadConfig(func(k string) string { return map[string]string{"KSANA_DATA": dir}[k] })
			if err != nil {
				b.Fatal(err)
			}
			log := newLogger(cfg, io.Discard)
			for b.Loop() {
				svc, err := newService(cfg, log)
				if err != nil {
					b.Fatal(err)
				}
				if err := svc.runner.Load(context.Background()); err != nil {
					b.Fatal(err)
				}
				if svc.runner.Len() != n {
					b.Fatalf("loaded %d jobs", svc.runner.Len())
				}
				b.StopTimer()
				svc.store.Close()
				b.StartTimer()
			}
		})
	}
}
