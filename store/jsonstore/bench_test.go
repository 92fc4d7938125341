package jsonstore

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
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
	"github.com/ksana-dev/ksana/cron/httpapi"
)

// seedDir writes a jobs.json with n jobs into a fresh directory.
func seedDir(b testing.TB, n int) string {
	b.Helper()
	dir := b.TempDir()
	refs := make([][]byte, n)
	for i := range n {
		j := testJob(fmt.Sprintf("%032x", i))
		refs[i] = appendJob(nil, &j)
	}
	if err := os.WriteFile(filepath.Join(dir, JobsFile), appendDocument(nil, t0, refs), 0o600); err != nil {
		b.Fatal(err)
	}
	return dir
}

func jobID(i int) string { return fmt.Sprintf("%032x", i) }

// BenchmarkBookkeeping100k measures run bookkeeping (Record) with 100,000
// jobs in the store and rewrites coalesced every 50ms, against the naive
// way: a full rewrite of jobs.json after every change.
func BenchmarkBookkeeping100k(b *testing.B) {
	const n = 100_000
	dir := seedDir(b, n)
	var rewrites atomic.Int64
	var bytes atomic.Int64
	s, err := New(dir, Config{OnFlush: func(fi FlushInfo) { rewrites.Add(1); bytes.Store(int64(fi.Bytes)) }})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = jobID(i)
	}

	// Naive: one full rewrite per change (measured over a few changes).
	const naiveChanges = 5
	start := time.Now()
	for i := range naiveChanges {
		if err := s.Record(ctx, ids[i], cron.Bookkeeping{LastRunAt: t0.Add(time.Duration(i))}); err != nil {
			b.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	naive := float64(naiveChanges) / time.Since(start).Seconds()

	rewrites.Store(0)
	b.ResetTimer()
	start = time.Now()
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := int(next.Add(1)) % n
			if err := s.Record(ctx, ids[i], cron.Bookkeeping{LastRunAt: t0.Add(time.Duration(i)), LastStatus: cron.StatusSuccess}); err != nil {
				b.Error(err)
			}
		}
	})
	if err := s.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	el := time.Since(start)
	b.StopTimer()
	grouped := float64(b.N) / el.Seconds()
	b.ReportMetric(grouped, "updates/s")
	b.ReportMetric(naive, "naive-updates/s")
	b.ReportMetric(grouped/naive, "x-naive")
	b.ReportMetric(float64(rewrites.Load()), "rewrites")
	b.ReportMetric(float64(bytes.Load())/1e6, "file-MB")
}

// BenchmarkBookkeepingJournal100k measures run bookkeeping (Record) in
// journal mode with 100,000 jobs: each update is a record appended to the
// journal within a flush interval, and no rewrite of jobs.json happens
// below the threshold. The baseline, in the same run, is the naive way: a
// rewrite of jobs.json after every change (Compact). It reports updates/s
// and the bytes written per update of each, and their ratios.
func BenchmarkBookkeepingJournal100k(b *testing.B) {
	const n = 100_000
	dir := seedDir(b, n)
	var rewrites atomic.Int64
	var fileBytes atomic.Int64
	s, err := New(dir, Config{Journal: true, OnFlush: func(fi FlushInfo) { rewrites.Add(1); fileBytes.Store(int64(fi.Bytes)) }})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = jobID(i)
	}
	journalSize := func() int64 {
		s.jmu.Lock()
		defer s.jmu.Unlock()
		return s.jsize
	}

	// Naive: one full rewrite per change.
	const naiveChanges = 5
	start := time.Now()
	for i := range naiveChanges {
		if err := s.Record(ctx, ids[i], cron.Bookkeeping{LastRunAt: t0.Add(time.Duration(i))}); err != nil {
			b.Fatal(err)
		}
		if err := s.Compact(ctx); err != nil {
			b.Fatal(err)
		}
	}
	naive := float64(naiveChanges) / time.Since(start).Seconds()
	naiveBytes := float64(fileBytes.Load())

	rewrites.Store(0)
	j0 := journalSize()
	b.ResetTimer()
	start = time.Now()
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := int(next.Add(1)) % n
			if err := s.Record(ctx, ids[i], cron.Bookkeeping{LastRunAt: t0.Add(time.Duration(i)), NextRunAt: t0.Add(time.Hour), LastStatus: cron.StatusSuccess}); err != nil {
				b.Error(err)
			}
		}
	})
	if err := s.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	el := time.Since(start)
	b.StopTimer()
	perUpdate := float64(journalSize()-j0) / float64(b.N)
	if rewrites.Load() > 0 {
		perUpdate = math.NaN() // the threshold was passed: the figure would not be the journal's alone
	}
	grouped := float64(b.N) / el.Seconds()
	b.ReportMetric(grouped, "updates/s")
	b.ReportMetric(naive, "naive-updates/s")
	b.ReportMetric(grouped/naive, "x-naive")
	b.ReportMetric(perUpdate, "journal-B/update")
	b.ReportMetric(naiveBytes, "naive-B/update")
	b.ReportMetric(naiveBytes/perUpdate, "x-fewer-bytes")
	b.ReportMetric(float64(rewrites.Load()), "rewrites")
}

// BenchmarkRewrite100k measures one full rewrite of jobs.json with 100,000
// jobs (one job changed: encode it, write, fsync, rename, fsync the
// directory), and the same document encoded with encoding/json.
func BenchmarkRewrite100k(b *testing.B) {
	const n = 100_000
	b.Run("jsonstore", func(b *testing.B) {
		dir := seedDir(b, n)
		var size int
		s, err := New(dir, Config{FlushInterval: time.Hour, OnFlush: func(fi FlushInfo) { size = fi.Bytes }})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		ctx := context.Background()
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			if err := s.Record(ctx, jobID(i%n), cron.Bookkeeping{LastRunAt: t0.Add(time.Duration(i))}); err != nil {
				b.Fatal(err)
			}
			if err := s.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(size)/1e6, "file-MB")
	})
	b.Run("encoding_json_only", func(b *testing.B) {
		jobs := make([]cron.Job, n)
		for i := range jobs {
			jobs[i] = testJob(jobID(i))
		}
		doc := struct {
			Version   int        `json:"version"`
			UpdatedAt time.Time  `json:"updated_at"`
			Jobs      []cron.Job `json:"jobs"`
		}{1, t0, jobs}
		for b.Loop() {
			if _, err := json.Marshal(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("appendJob_only", func(b *testing.B) {
		jobs := make([]cron.Job, n)
		for i := range jobs {
			jobs[i] = testJob(jobID(i))
		}
		var buf []byte
		for b.Loop() {
			buf = buf[:0]
			for i := range jobs {
				buf = appendJob(buf, &jobs[i])
			}
		}
	})
}

// BenchmarkDurableSave measures how long a durable Save (what an API write
// waits for) takes, with 16 concurrent writers, and reports p50 and p99.
func BenchmarkDurableSave(b *testing.B) {
	for _, mode := range []string{"rewrite", "journal"} {
		for _, n := range []int{1_000, 100_000} {
			b.Run(fmt.Sprintf("%s/jobs=%d", mode, n), func(b *testing.B) {
				s, err := New(seedDir(b, n), Config{Journal: mode == "journal"})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				ctx := context.Background()
				var mu sync.Mutex
				var lat []time.Duration
				var next atomic.Int64
				b.SetParallelism(8)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					var mine []time.Duration
					for pb.Next() {
						i := int(next.Add(1))
						j := testJob(jobID(i % n))
						j.Name = fmt.Sprint(i)
						start := time.Now()
						if err := s.Save(ctx, j); err != nil {
							b.Error(err)
						}
						mine = append(mine, time.Since(start))
					}
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				})
				b.StopTimer()
				slices.Sort(lat)
				q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1e6 }
				b.ReportMetric(q(0.5), "p50-ms")
				b.ReportMetric(q(0.99), "p99-ms")
			})
		}
	}
}

// BenchmarkOpen100k measures New over a jobs.json of 100,000 jobs.
func BenchmarkOpen100k(b *testing.B) {
	dir := seedDir(b, 100_000)
	for b.Loop() {
		s, err := New(dir, Config{})
		if err != nil {
			b.Fatal(err)
		}
		if s.Len() != 100_000 {
			b.Fatalf("loaded %d jobs", s.Len())
		}
		s.Close()
	}
}

// BenchmarkRunnerWrites measures durable API writes (cron.Runner.Update)
// through a Runner over the store, with 10,000 jobs, from one goroutine and
// from eight at once, in interleaved batches of 48 writes. It reports
// writes/s for each and their ratio: the runner lets writes to different
// jobs wait for the store together, so with the journal off eight writers
// share one rewrite of jobs.json instead of taking turns.
func BenchmarkRunnerWrites(b *testing.B) {
	const n, batch = 10_000, 48
	for _, mode := range []string{"rewrite", "journal"} {
		b.Run(mode, func(b *testing.B) {
			s, err := New(seedDir(b, n), Config{Journal: mode == "journal"})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			noop := cron.ExecutorFunc(func(context.Context, *cron.Job, cron.RunInfo) cron.Result {
				return cron.Result{Status: cron.StatusSuccess, Attempts: 1}
			})
			r, err := cron.New(s, noop, cron.Config{})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if err := r.Load(ctx); err != nil {
				b.Fatal(err)
			}
			var seq atomic.Int64
			write := func() {
				i := seq.Add(1)
				rename := func(j *cron.Job) error {
					j.Name = fmt.Sprint("w", i)
					return nil
				}
				if _, err := r.Update(ctx, jobID(int(i%n)), rename); err != nil {
					b.Error(err)
				}
			}
			var one, eight time.Duration
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				for range batch {
					write()
				}
				one += time.Since(start)
				start = time.Now()
				var wg sync.WaitGroup
				for range 8 {
					wg.Go(func() {
						for range batch / 8 {
							write()
						}
					})
				}
				wg.Wait()
				eight += time.Since(start)
			}
			rate := func(d time.Duration) float64 { return float64(b.N*batch) / d.Seconds() }
			b.ReportMetric(rate(one), "writes/s-1")
			b.ReportMetric(rate(eight), "writes/s-8")
			b.ReportMetric(rate(eight)/rate(one), "ratio-8/1")
		})
	}
}

// BenchmarkCreateAPIvsRunner measures 64 concurrent creates of a job, each
// acknowledged once durable, on one store (journal on, as in cmd/ksana)
// with 10,000 jobs: through POST /jobs of cron/httpapi from 64 HTTP clients
// over loopback, and through Runner.Add from 64 goroutines, the baseline,
// in interleaved rounds. It reports the milliseconds per round of 64 for
// each and their ratio (the goal: ratio-api/add under 2), the same posts
// to the API over a runner without a store (the cost of the HTTP stack
// alone, client and server on this machine), and the journal
// syncs per round of each, which shows whether the creates of a round
// still share their syncs when they come through HTTP.
func BenchmarkCreateAPIvsRunner(b *testing.B) {
	const n, clients = 10_000, 64
	s, err := New(seedDir(b, n), Config{Journal: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	noop := cron.ExecutorFunc(func(context.Context, *cron.Job, cron.RunInfo) cron.Result {
		return cron.Result{Status: cron.StatusSuccess, Attempts: 1}
	})
	r, err := cron.New(s, noop, cron.Config{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := r.Load(ctx); err != nil {
		b.Fatal(err)
	}
	api, err := httpapi.New(r, httpapi.Config{})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(api)
	defer srv.Close()
	// The HTTP stack alone: the same API over a runner without a store.
	bare, err := cron.New(nil, noop, cron.Config{})
	if err != nil {
		b.Fatal(err)
	}
	bareAPI, err := httpapi.New(bare, httpapi.Config{})
	if err != nil {
		b.Fatal(err)
	}
	bareSrv := httptest.NewServer(bareAPI)
	defer bareSrv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}}
	const body = `{"http":{"url":"http://127.0.0.1:9/"},"schedule":{"kind":"every","every":"1h"}}`
	job := cron.Job{MaxRetries: cron.DefaultMaxRetries, HTTP: cron.HTTPConfig{URL: "http://127.0.0.1:9/"},
		Schedule: cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(time.Hour)}}
	postTo := func(base string) {
		resp, err := client.Post(base+"/jobs", "application/json", strings.NewReader(body))
		if err != nil {
			b.Error(err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			b.Errorf("POST /jobs: status %d", resp.StatusCode)
		}
	}
	post := func() { postTo(srv.URL) }
	postBare := func() { postTo(bareSrv.URL) }
	add := func() {
		if _, err := r.Add(ctx, job); err != nil {
			b.Error(err)
		}
	}
	syncs := func() int {
		s.jmu.Lock()
		defer s.jmu.Unlock()
		return s.jsyncs
	}
	var syncsAPI, syncsAdd int
	round := func(f func(), n *int) time.Duration {
		before := syncs()
		start := time.Now()
		var wg sync.WaitGroup
		for range clients {
			wg.Go(f)
		}
		wg.Wait()
		d := time.Since(start)
		*n += syncs() - before
		return d
	}
	round(post, new(int)) // open the clients' connections
	round(postBare, new(int))
	var viaAPI, viaAdd, viaBare time.Duration
	b.ResetTimer()
	for b.Loop() {
		viaAdd += round(add, &syncsAdd)
		viaAPI += round(post, &syncsAPI)
		viaBare += round(postBare, new(int))
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(ms(viaAdd), "ms/64-adds")
	b.ReportMetric(ms(viaAPI), "ms/64-posts")
	b.ReportMetric(ms(viaBare), "ms/64-posts-nostore")
	b.ReportMetric(float64(viaAPI)/float64(viaAdd), "ratio-api/add")
	b.ReportMetric(float64(syncsAdd)/float64(b.N), "syncs/64-adds")
	b.ReportMetric(float64(syncsAPI)/float64(b.N), "syncs/64-posts")
}
