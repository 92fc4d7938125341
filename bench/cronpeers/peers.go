// Package cronpeers measures ksana's cron.Runner beside robfig/cron v3 and
// go-co-op/gocron v2, in one process and on one workload, with no store on
// any side.
//
// # The workload
//
// n jobs each run once an hour at their own second of the hour, written as
// the six-field cron expression "S M * * * *" (second, minute, then every
// hour), which all three libraries read. The jobs are spread so that Rate
// of them fire each second: job i runs at second base + i/Rate of the hour,
// where base lies a few seconds after the set-up. robfig and gocron parse
// the expression at each add; ksana's runner does too (lib "ksana"), and
// the row "ksana-every" gives the same times as an every schedule (one hour
// from a start_at at the job's second), ksana's own form of a fixed
// interval, which needs no parse.
//
// The rows "robfig-once" and "ksana-once" are the other workload: n jobs
// that each run once, at a time of their own (job i at base + i/Rate
// seconds + (i mod Rate)/Rate of a second). robfig/cron has no one-time
// job: each is a value that is both the robfig.Schedule (its Next gives
// the job's time once, then the zero time, which robfig reads as never)
// and the robfig.Job, 16 bytes made per job by the caller and counted in
// its bytes per job. ksana's is a once schedule (run_at).
//
// The row "ids-once" schedules nothing: it is the floor of what an add
// of ksana does that robfig's does not, giving each job 128 random bits
// from crypto/rand in hex as its id and indexing it, so that the job can
// be found by its id (robfig hands out a counter and finds an entry by a
// scan of them all): the ids are read from the system in blocks, as
// ksana's are, and put in a Go map of id to position. It has no firing
// lag.
//
// # What is measured
//
//   - Add: the seconds taken by the n add calls (before the scheduler
//     starts, as each library's documentation shows), and Ready: add plus
//     start, until the scheduler is running. robfig computes each job's
//     first run time when it starts, not when the job is added, so its
//     add time leaves that work to Ready. AddCPU is the processor time of
//     the process during the adds, garbage collection included: on a
//     machine shared with other work it varies less than the wall clock.
//   - Bytes per job: the live heap (runtime.MemStats.HeapAlloc after two
//     collections) once the scheduler runs, less the same figure before
//     the scheduler was made, over n. The expressions' strings and the
//     callbacks are made before the first reading and shared by the jobs
//     (a callback for each second of the hour), so that only what the
//     library keeps for a job is counted.
//   - Firing lag: for the runs scheduled in a window of Window seconds
//     that starts at least a second after the scheduler is ready, the
//     callback's start less the run's scheduled time, at p50, p99 and the
//     maximum. The callback does nothing else.
package cronpeers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/ksana-dev/ksana/cron"
	robfig "github.com/robfig/cron/v3"
)

// Libs are the schedulers measured, in the order they run.
var Libs = []string{"robfig", "gocron", "ksana", "ksana-every", "robfig-once", "ksana-once", "ids-once"}

// once reports whether lib runs the workload of one-time jobs.
func once(lib string) bool { return lib == "robfig-once" || lib == "ksana-once" || lib == "ids-once" }

// Params set a measurement. The zero value takes the defaults.
type Params struct {
	// Rate is how many jobs fire each second. Default 1000.
	Rate int
	// Window is how long the firing lag is sampled. Default 10s.
	Window time.Duration
	// Lead is how far after the set-up the first job's second lies.
	// Default 5s.
	Lead time.Duration
	// Workers is the worker count of ksana's runner. Default 4 (the
	// runner's default).
	Workers int
}

func (p *Params) fill() {
	if p.Rate <= 0 {
		p.Rate = 1000
	}
	if p.Window <= 0 {
		p.Window = 10 * time.Second
	}
	if p.Lead <= 0 {
		p.Lead = 5 * time.Second
	}
}

// Result is one library's figures at one size.
type Result struct {
	Lib  string
	Jobs int
	// Add is the time of the n add calls; Ready adds the start. AddCPU
	// is the processor time the process spent during the adds (the
	// garbage collector's included), which other processes on the
	// machine disturb less than the wall-clock time.
	Add, Ready, AddCPU time.Duration
	// BytesPerJob is the live heap the scheduler holds, per job.
	BytesPerJob float64
	// P50, P99 and Max are the firing lags of the Fired runs sampled.
	P50, P99, Max time.Duration
	// Fired is the number of runs sampled; Want the number due in the
	// window.
	Fired, Want int
}

// scheduler is one library behind the three calls the measurement needs.
type scheduler interface {
	// add adds a job that runs at second sec of each hour, from the
	// expression spec, or from start on (ksana-every).
	add(spec string, sec int, start time.Time) error
	start() error
	stop()
}

// recorder collects the lags of the runs scheduled in [from, to).
type recorder struct {
	from, to int64 // Unix ns; to == 0 until the window is set
	lags     []int64
	n        atomic.Int64
	full     chan struct{}
}

func (r *recorder) hit(scheduled int64) {
	if scheduled < r.from || scheduled >= atomic.LoadInt64(&r.to) {
		return
	}
	lag := time.Now().UnixNano() - scheduled
	i := r.n.Add(1) - 1
	if i < int64(len(r.lags)) {
		r.lags[i] = lag
		if i == int64(len(r.lags))-1 {
			close(r.full)
		}
	}
}

// hitSecond records a run of a job that fires at second sec of each hour,
// seen now: its scheduled time is the last such second at or before now.
func (r *recorder) hitSecond(sec int) {
	now := time.Now()
	t := now.Truncate(time.Hour).Add(time.Duration(sec) * time.Second)
	if t.After(now) {
		t = t.Add(-time.Hour)
	}
	r.hit(t.UnixNano())
}

// Measure runs the workload of n jobs on lib and returns its figures.
func Measure(lib string, n int, p Params) (Result, error) {
	p.fill()
	res := Result{Lib: lib, Jobs: n}
	span := (n + p.Rate - 1) / p.Rate // seconds the jobs' times cover
	if span > 3600 {
		return res, fmt.Errorf("%d jobs at %d a second do not fit in an hour", n, p.Rate)
	}
	setup := time.Now()
	base := setup.Add(p.Lead).Truncate(time.Second)
	baseSec := int(base.Sub(base.Truncate(time.Hour)) / time.Second)
	secOf := func(off int) int { return (baseSec + off) % 3600 }
	specs := make([]string, span)
	starts := make([]time.Time, span)
	for off := range span {
		s := secOf(off)
		specs[off] = fmt.Sprintf("%d %d * * * *", s%60, s/60)
		starts[off] = base.Add(time.Duration(off) * time.Second)
	}
	rec := &recorder{full: make(chan struct{})}
	atomic.StoreInt64(&rec.to, math.MinInt64)
	sch, err := open(lib, rec, p)
	if err != nil {
		return res, err
	}
	defer func() {
		if sch != nil {
			sch.stop()
		}
	}()

	before := liveHeap()
	cpu := cpuTime()
	began := time.Now()
	oneTime := once(lib)
	step := time.Second / time.Duration(p.Rate)
	for i := range n {
		off := i / p.Rate
		at := starts[off]
		if oneTime {
			at = at.Add(time.Duration(i%p.Rate) * step)
		}
		if err := sch.add(specs[off], secOf(off), at); err != nil {
			return res, fmt.Errorf("%s: add job %d: %w", lib, i, err)
		}
	}
	res.Add = time.Since(began)
	res.AddCPU = cpuTime() - cpu
	if err := sch.start(); err != nil {
		return res, err
	}
	res.Ready = time.Since(began)
	res.BytesPerJob = float64(liveHeap()-before) / float64(n)
	if lib == "ids-once" {
		runtime.KeepAlive(sch)
		return res, nil // nothing fires
	}

	// The window: whole seconds from a second after now (and not before
	// the first job's), within the span of the jobs' times.
	from := time.Now().Truncate(time.Second).Add(2 * time.Second)
	if from.Before(base) {
		from = base
	}
	to := from.Add(p.Window)
	if end := base.Add(time.Duration(span) * time.Second); to.After(end) {
		to = end
	}
	if !to.After(from) {
		return res, fmt.Errorf("%s: set-up took past the jobs' times: raise Lead", lib)
	}
	firstOff := int(from.Sub(base) / time.Second)
	lastOff := int(to.Sub(base)/time.Second) - 1
	res.Want = min(n, (lastOff+1)*p.Rate) - firstOff*p.Rate
	rec.lags = make([]int64, res.Want)
	rec.from = from.UnixNano()
	atomic.StoreInt64(&rec.to, to.UnixNano())

	select {
	case <-rec.full:
	case <-time.After(time.Until(to) + 30*time.Second):
	}
	sch.stop()
	sch = nil
	res.Fired = int(min(rec.n.Load(), int64(res.Want)))
	lags := rec.lags[:res.Fired]
	slices.Sort(lags)
	if len(lags) > 0 {
		res.P50 = time.Duration(lags[len(lags)/2])
		res.P99 = time.Duration(lags[len(lags)*99/100])
		res.Max = time.Duration(lags[len(lags)-1])
	}
	return res, nil
}

// cpuTime returns the processor time (user and system) the process has
// used.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// liveHeap returns the bytes of live heap after two collections.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

func open(lib string, rec *recorder, p Params) (scheduler, error) {
	switch lib {
	case "robfig":
		return newRobfig(rec), nil
	case "gocron":
		return newGocron(rec)
	case "ksana":
		return newKsana(rec, p, false)
	case "ksana-every":
		return newKsana(rec, p, true)
	case "robfig-once":
		return &robfigOnceSched{c: robfig.New(robfig.WithSeconds()), rec: rec}, nil
	case "ids-once":
		return &idsFloor{ids: map[string]int32{}}, nil
	case "ksana-once":
		k, err := newKsana(rec, p, false)
		if err == nil {
			k.once = true
			k.job.Schedule = cron.ScheduleSpec{Kind: cron.KindOnce}
		}
		return k, err
	}
	return nil, fmt.Errorf("unknown lib %q (want one of %v)", lib, Libs)
}

// robfig/cron v3, six fields with seconds. Each job is a pointer to the
// callback of its second: no allocation of the caller's per job.
type robfigSched struct {
	c    *robfig.Cron
	jobs [3600]robfigJob
}

type robfigJob struct {
	rec *recorder
	sec int
}

func (j *robfigJob) Run() { j.rec.hitSecond(j.sec) }

func newRobfig(rec *recorder) *robfigSched {
	s := &robfigSched{c: robfig.New(robfig.WithSeconds())}
	for i := range s.jobs {
		s.jobs[i] = robfigJob{rec: rec, sec: i}
	}
	return s
}

func (s *robfigSched) add(spec string, sec int, _ time.Time) error {
	_, err := s.c.AddJob(spec, &s.jobs[sec])
	return err
}

func (s *robfigSched) start() error { s.c.Start(); return nil }

func (s *robfigSched) stop() { <-s.c.Stop().Done() }

// robfig/cron v3 with one-time jobs: each is its own Schedule and Job.
type robfigOnceSched struct {
	c   *robfig.Cron
	rec *recorder
}

type robfigOnce struct {
	at  int64 // Unix ns
	rec *recorder
}

// Next returns the job's time while it is after t, then the zero time
// (never again).
func (o *robfigOnce) Next(t time.Time) time.Time {
	if t.UnixNano() < o.at {
		return time.Unix(0, o.at)
	}
	return time.Time{}
}

func (o *robfigOnce) Run() { o.rec.hit(o.at) }

func (s *robfigOnceSched) add(_ string, _ int, at time.Time) error {
	o := &robfigOnce{at: at.UnixNano(), rec: s.rec}
	s.c.Schedule(o, o)
	return nil
}

func (s *robfigOnceSched) start() error { s.c.Start(); return nil }

func (s *robfigOnceSched) stop() { <-s.c.Stop().Done() }

// idsFloor gives each job a random id and indexes it, and does nothing
// else (see the package documentation).
type idsFloor struct {
	ids   map[string]int32
	block [16 * 64]byte
	off   int
}

func (f *idsFloor) add(string, int, time.Time) error {
	if f.off == 0 || f.off == len(f.block) {
		if _, err := rand.Read(f.block[:]); err != nil {
			return err
		}
		f.off = 0
	}
	f.ids[hex.EncodeToString(f.block[f.off:f.off+16])] = int32(len(f.ids))
	f.off += 16
	return nil
}

func (f *idsFloor) start() error { return nil }

func (f *idsFloor) stop() {}

// go-co-op/gocron v2, a CronJob with seconds. Each job's task is the
// function of its second, made once.
type gocronSched struct {
	s     gocron.Scheduler
	tasks [3600]func()
}

func newGocron(rec *recorder) (*gocronSched, error) {
	s, err := gocron.NewScheduler()
	if err != nil {
		return nil, err
	}
	g := &gocronSched{s: s}
	for i := range g.tasks {
		g.tasks[i] = func() { rec.hitSecond(i) }
	}
	return g, nil
}

func (g *gocronSched) add(spec string, sec int, _ time.Time) error {
	_, err := g.s.NewJob(gocron.CronJob(spec, true), gocron.NewTask(g.tasks[sec]))
	return err
}

func (g *gocronSched) start() error { g.s.Start(); return nil }

func (g *gocronSched) stop() { _ = g.s.Shutdown() }

// ksana's cron.Runner without a store. A job is an HTTP callback whose
// executor records the lag and calls nothing.
type ksanaSched struct {
	r      *cron.Runner
	every  bool // every 1h from a start_at, not a cron expression
	once   bool // once at its run_at
	job    cron.Job
	cancel context.CancelFunc
	done   chan error
}

func newKsana(rec *recorder, p Params, every bool) (*ksanaSched, error) {
	exec := cron.ExecutorFunc(func(_ context.Context, _ *cron.Job, info cron.RunInfo) cron.Result {
		rec.hit(info.ScheduledAt.UnixNano())
		return cron.Result{Status: cron.StatusSuccess, Attempts: 1}
	})
	r, err := cron.New(nil, exec, cron.Config{Workers: p.Workers})
	if err != nil {
		return nil, err
	}
	k := &ksanaSched{r: r, every: every,
		job: cron.Job{Name: "bench", HTTP: cron.HTTPConfig{URL: "http://127.0.0.1:9/hook"}}}
	if every {
		k.job.Schedule = cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(time.Hour)}
	} else {
		k.job.Schedule = cron.ScheduleSpec{Kind: cron.KindCron}
	}
	return k, nil
}

func (k *ksanaSched) add(spec string, _ int, start time.Time) error {
	j := k.job
	switch {
	case k.once:
		j.Schedule.RunAt = start
	case k.every:
		j.Schedule.StartAt = start
	default:
		j.Schedule.Cron = spec
	}
	_, err := k.r.Add(context.Background(), j)
	return err
}

func (k *ksanaSched) start() error {
	ctx, cancel := context.WithCancel(context.Background())
	k.cancel = cancel
	k.done = make(chan error, 1)
	go func() { k.done <- k.r.Run(ctx) }()
	return nil
}

func (k *ksanaSched) stop() {
	if k.cancel != nil {
		k.cancel()
		<-k.done
		k.cancel = nil
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1_000 && n%1_000 == 0:
		return fmt.Sprintf("%dk", n/1_000)
	}
	return fmt.Sprint(n)
}
