package cron

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// nullStore keeps nothing, so that only the runner's own memory and time
// are measured.
type nullStore struct{}

func (nullStore) Load(context.Context) ([]Job, error)               { return nil, nil }
func (nullStore) Save(context.Context, Job) error                   { return nil }
func (nullStore) Delete(context.Context, string) error              { return nil }
func (nullStore) Record(context.Context, string, Bookkeeping) error { return nil }
func (nullStore) Flush(context.Context) error                       { return nil }

var noopExec = ExecutorFunc(func(ctx context.Context, j *Job, info RunInfo) Result {
	return Result{Status: StatusSuccess, Attempts: 1}
})

// sharedJob returns an every job whose name, URL and header map are shared
// by every job built from it; the id is left empty (the runner makes one).
func sharedJob() Job {
	return Job{Name: "bench", HTTP: HTTPConfig{URL: "http://127.0.0.1:9/hook", Headers: map[string]string{"X-Token": "abc"}},
		Schedule: ScheduleSpec{Kind: KindEvery, Every: Duration(time.Hour)}}
}

// BenchmarkAdd measures one Add (id generated, every job, store that keeps
// nothing) into a runner that grows to b.N jobs.
func BenchmarkAdd(b *testing.B) {
	r, _ := New(nullStore{}, noopExec, Config{})
	ctx := context.Background()
	j := sharedJob()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Add(ctx, j); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAdd1M adds 1,000,000 every jobs to a new runner, once per
// store in each op, and reports for each the seconds it took and the heap
// memory per job (runtime.MemStats before and after, after a GC, with the
// runner alive): store=null, a store that keeps nothing (the baseline: the
// runner's own cost); store=nil, the runner without a store, the in-memory
// choice; store=mem, over a MemStore, which keeps a second record of each
// job, and the newest [DefaultAuditKeep] audit entries (one per add);
// store=mem-audit1, over a MemStore with an audit log that keeps one
// entry ([Config.AuditLog]): the cost of the MemStore's records. The ratios are against store=null in the same op; the goal for
// store=nil is at most 1.15 times the bytes and 1.2 times the time, and
// under 250 bytes a job. Each op takes several seconds: run it with
// -benchtime=1x.
func BenchmarkAdd1M(b *testing.B) { benchAddMany(b, 1_000_000) }

// BenchmarkAdd100k is BenchmarkAdd1M at 100,000 jobs, the size at which
// a runner over a MemStore must cost at most 250 bytes a job.
func BenchmarkAdd100k(b *testing.B) { benchAddMany(b, 100_000) }

// benchAddMany is BenchmarkAdd1M with n jobs.
func benchAddMany(b *testing.B, n int) {
	cases := []struct {
		name string
		open func() Store
		log  bool // a log of one audit entry
	}{
		{"null", func() Store { return nullStore{} }, false},
		{"nil", func() Store { return nil }, false},
		{"mem", func() Store { return NewMemStore() }, false},
		{"mem-audit1", func() Store { return NewMemStore() }, true},
	}
	ctx := context.Background()
	j := sharedJob()
	perJob := make([]float64, len(cases))
	secs := make([]float64, len(cases))
	// Warm up: grow the heap once, so that the first case measured does
	// not pay for it alone.
	warm, _ := New(nullStore{}, noopExec, Config{})
	for range n {
		if _, err := warm.Add(ctx, j); err != nil {
			b.Fatal(err)
		}
	}
	warm = nil
	ops := 0
	for b.Loop() {
		ops++
		for i, tc := range cases {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			st := tc.open()
			var cfg Config
			if tc.log {
				cfg.AuditLog = &AuditBuffer{Keep: 1}
			}
			r, err := New(st, noopExec, cfg)
			if err != nil {
				b.Fatal(err)
			}
			began := time.Now()
			for range n {
				if _, err := r.Add(ctx, j); err != nil {
					b.Fatal(err)
				}
			}
			secs[i] += time.Since(began).Seconds()
			runtime.GC()
			runtime.ReadMemStats(&after)
			perJob[i] += float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
			runtime.KeepAlive(r)
			runtime.KeepAlive(st)
		}
	}
	for i := range cases {
		secs[i] /= float64(ops)
		perJob[i] /= float64(ops)
	}
	for i, tc := range cases {
		b.ReportMetric(secs[i], "s/"+count(n)+"-adds-"+tc.name)
		b.ReportMetric(perJob[i], "bytes/job-"+tc.name)
		if i > 0 {
			b.ReportMetric(perJob[i]/perJob[0], "bytes-ratio-"+tc.name+"/null")
			b.ReportMetric(secs[i]/secs[0], "time-ratio-"+tc.name+"/null")
		}
	}
}

// fireBench is a runner of n every jobs of varied intervals (1 to 61
// minutes) and phases, fired one slot at a time on the timer goroutine's
// path, without the clock: pop the earliest job, roll it to its next slot,
// park it, hand the run to the worker queue and mark its bookkeeping.
type fireBench struct {
	r      *Runner
	events []Run
}

func newFireBench(b *testing.B, n int) *fireBench {
	r, _ := New(nullStore{}, noopExec, Config{})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	j := sharedJob()
	for range n {
		j.Schedule.Every = Duration(time.Minute + time.Duration(rng.Int64N(int64(time.Hour))))
		j.Schedule.StartAt = t0.Add(time.Duration(rng.Int64N(int64(time.Hour))))
		if _, err := r.Add(ctx, j); err != nil {
			b.Fatal(err)
		}
	}
	f := &fireBench{r: r}
	r.mu.Lock()
	r.heap.peek(math.MaxInt64) // place the jobs added before any peek
	r.mu.Unlock()
	return f
}

// fire fires the earliest slot, then plays the workers and the recorder:
// it takes the queued run and clears the bookkeeping mark.
func (f *fireBench) fire() {
	r := f.r
	r.mu.Lock()
	it, _ := r.heap.peek(math.MaxInt64)
	r.fireDue(it.at, &f.events)
	for {
		t, ok := r.dequeue()
		if !ok {
			break
		}
		t.e.inflight--
	}
	for _, e := range r.dirty {
		e.dirty = false
	}
	clear(r.dirty)
	r.dirty = r.dirty[:0]
	f.events = f.events[:0]
	r.mu.Unlock()
}

// BenchmarkFire measures one fire (see fireBench) at 1k, 100k and 1M jobs.
// Each size runs on its own, so machine noise between the runs lands in
// their ratio: BenchmarkFireScaling measures the ratio.
func BenchmarkFire(b *testing.B) {
	for _, n := range []int{1_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("jobs=%s", count(n)), func(b *testing.B) {
			f := newFireBench(b, n)
			runtime.GC() // let no collection of the set-up overlap the timing
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				f.fire()
			}
		})
	}
}

// BenchmarkFireScaling measures the cost of one fire at 1k, 100k and 1M
// jobs in one run, in interleaved batches of 2,000 fires, so that a change
// in the machine's speed during the run weighs on every size alike. It
// reports ns/fire per size and the ratios against 1k jobs, the baseline:
// the 1M/1k goal is under 3. One op is one batch for each size.
func BenchmarkFireScaling(b *testing.B) {
	const batch = 2000
	sizes := []int{1_000, 100_000, 1_000_000}
	fs := make([]*fireBench, len(sizes))
	for i, n := range sizes {
		fs[i] = newFireBench(b, n)
	}
	runtime.GC()
	spent := make([]time.Duration, len(sizes))
	rounds := 0
	b.ResetTimer()
	for b.Loop() {
		for i, f := range fs {
			t := time.Now()
			for range batch {
				f.fire()
			}
			spent[i] += time.Since(t)
		}
		rounds++
	}
	per := func(i int) float64 { return float64(spent[i].Nanoseconds()) / float64(rounds*batch) }
	for i, n := range sizes {
		b.ReportMetric(per(i), "ns/fire-"+count(n))
	}
	b.ReportMetric(per(1)/per(0), "ratio-100k/1k")
	b.ReportMetric(per(2)/per(0), "ratio-1M/1k")
}

func count(n int) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1_000:
		return fmt.Sprintf("%dk", n/1_000)
	}
	return fmt.Sprint(n)
}

// BenchmarkFiringLag runs 100,000 once jobs due evenly over 10 s on the
// real clock with a no-op executor and reports the firing lag (start of the
// run minus its scheduled time) at p50, p99 and max. Each op takes about
// 12 s: run it with -benchtime=1x.
func BenchmarkFiringLag(b *testing.B) {
	const n = 100_000
	const span = 10 * time.Second
	for b.Loop() {
		lags := make([]time.Duration, n)
		var got atomic.Int64
		done := make(chan struct{})
		obs := ObserverFunc(func(run Run) {
			i := got.Add(1)
			if i <= n {
				lags[i-1] = run.Lag()
			}
			if i == n {
				close(done)
			}
		})
		r, _ := New(nullStore{}, noopExec, Config{Observer: obs})
		ctx, cancel := context.WithCancel(context.Background())
		first := time.Now().Add(time.Second)
		j := sharedJob()
		j.Schedule = ScheduleSpec{Kind: KindOnce}
		for i := range n {
			j.Schedule.RunAt = first.Add(time.Duration(i) * span / n)
			if _, err := r.Add(ctx, j); err != nil {
				b.Fatal(err)
			}
		}
		errc := make(chan error, 1)
		go func() { errc <- r.Run(ctx) }()
		select {
		case <-done:
		case <-time.After(span + 30*time.Second):
			b.Fatalf("only %d of %d runs finished", got.Load(), n)
		}
		cancel()
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
		slices.Sort(lags)
		b.ReportMetric(float64(lags[n/2].Microseconds())/1000, "p50-lag-ms")
		b.ReportMetric(float64(lags[n*99/100].Microseconds())/1000, "p99-lag-ms")
		b.ReportMetric(float64(lags[n-1].Microseconds())/1000, "max-lag-ms")
	}
}

// BenchmarkFireNaiveSort is the baseline of BenchmarkFire: the approach
// that sorts every entry by its next time on each fire (as robfig/cron
// does), at 1k and 100k jobs.
func BenchmarkFireNaiveSort(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("jobs=%s", count(n)), func(b *testing.B) {
			type naive struct {
				next     int64
				interval int64
			}
			rng := rand.New(rand.NewPCG(1, 2))
			es := make([]*naive, n)
			for i := range es {
				es[i] = &naive{next: rng.Int64N(int64(time.Hour)), interval: int64(time.Minute) + rng.Int64N(int64(time.Hour))}
			}
			for b.Loop() {
				slices.SortFunc(es, func(x, y *naive) int { return cmpInt(x.next, y.next) })
				es[0].next += es[0].interval
			}
		})
	}
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// BenchmarkTimerLagBaseline measures the lag of a bare time.Timer on this
// machine in the same run (2,000 timers of up to 1 ms): the floor under
// BenchmarkFiringLag.
func BenchmarkTimerLagBaseline(b *testing.B) {
	const n = 2000
	rng := rand.New(rand.NewPCG(3, 4))
	for b.Loop() {
		lags := make([]time.Duration, n)
		for i := range n {
			target := time.Now().Add(time.Duration(rng.Int64N(int64(time.Millisecond))))
			t := time.NewTimer(time.Until(target))
			<-t.C
			lags[i] = time.Since(target)
		}
		slices.Sort(lags)
		b.ReportMetric(float64(lags[n/2].Microseconds())/1000, "p50-lag-ms")
		b.ReportMetric(float64(lags[n*99/100].Microseconds())/1000, "p99-lag-ms")
		b.ReportMetric(float64(lags[n-1].Microseconds())/1000, "max-lag-ms")
	}
}

// BenchmarkBurst measures how long a runner takes to call 1,000 jobs due
// at the same instant, with a no-op executor, on the real clock: the jobs
// run each second, all at the start of the second, as cron expressions
// make them (kind=cron, "* * * * * *"; kind=every, every 1s from a whole
// second). One op is one burst (a second); it reports the lag of the
// burst's last run (the burst's length) and ns per run. The runner holds
// 100,000 other jobs, not due.
func BenchmarkBurst(b *testing.B) {
	const burst = 1000
	for _, kind := range []string{KindCron, KindEvery} {
		b.Run("kind="+kind, func(b *testing.B) {
			var mu sync.Mutex
			count := map[int64]int{}           // scheduled second -> runs
			worst := map[int64]time.Duration{} // scheduled second -> max lag
			done := make(chan time.Duration, 1024)
			exec := ExecutorFunc(func(_ context.Context, _ *Job, info RunInfo) Result {
				lag := time.Since(info.ScheduledAt)
				k := info.ScheduledAt.Unix()
				mu.Lock()
				worst[k] = max(worst[k], lag)
				if count[k]++; count[k] == burst {
					done <- worst[k]
				}
				mu.Unlock()
				return Result{Status: StatusSuccess, Attempts: 1}
			})
			r, _ := New(nil, exec, Config{})
			ctx, cancel := context.WithCancel(context.Background())
			j := sharedJob()
			for range 100_000 {
				if _, err := r.Add(ctx, j); err != nil {
					b.Fatal(err)
				}
			}
			switch kind {
			case KindCron:
				j.Schedule = ScheduleSpec{Kind: KindCron, Cron: "* * * * * *"}
			default:
				j.Schedule.Every = Duration(time.Second)
				j.Schedule.StartAt = time.Now().Truncate(time.Second)
			}
			for range burst {
				if _, err := r.Add(ctx, j); err != nil {
					b.Fatal(err)
				}
			}
			errc := make(chan error, 1)
			go func() { errc <- r.Run(ctx) }()
			runtime.GC()
			<-done // the first burst warms up
			var total time.Duration
			for b.Loop() {
				total += <-done
			}
			cancel()
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/burst")
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N*burst), "ns/run")
		})
	}
}
