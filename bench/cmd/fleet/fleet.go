package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/redis/go-redis/v9"
)

// options are the fleet's size and load.
type options struct {
	Dispatcher string        // the dispatcher binary; empty: build it
	Redis      string        // redis:// URL; empty: start a redis-server
	Instances  int           // dispatcher processes
	Nodes      int           // node connections, spread over the instances
	Sessions   int           // session connections, spread over the instances
	Pools      int           // pools; node i serves pool i mod Pools
	Capacity   int           // jobs at once per node
	Work       time.Duration // a node's time per job
	Idle       time.Duration // idle phase
	Rate       float64       // jobs a second during the load
	Duration   time.Duration // load phase
	Drain      time.Duration // longest wait for the last answers
	Kill       bool          // kill -9 an instance mid-load
	Log        io.Writer     // progress lines
}

// report holds every figure of a run.
type report struct {
	Instances int     `json:"instances"`
	Nodes     int     `json:"nodes"`
	Sessions  int     `json:"sessions"`
	Capacity  int     `json:"capacity"`
	WorkMS    float64 `json:"work_ms"`
	Rate      float64 `json:"rate"`
	DurationS float64 `json:"duration_s"`

	// RegisterS: from the first dial until every node is registered and
	// every instance's /health counts all of them online.
	RegisterS float64 `json:"register_s"`

	IdleRedisPerS float64        `json:"idle_redis_cmds_per_s"`
	IdleTop       []commandRate  `json:"idle_redis_top"`
	IdleCPUPct    float64        `json:"idle_cpu_pct"` // all instances, % of one core
	RSSBeforeKiB  []int64        `json:"rss_before_kib"`
	RSSAfterKiB   []int64        `json:"rss_after_kib"`
	NodesPerInst  []int          `json:"nodes_per_instance"`
	MemPerNodeKiB float64        `json:"mem_per_node_kib"`
	Load          loadReport     `json:"load"`
	CPUPerJobMS   float64        `json:"cpu_ms_per_job"`
	KillPhase     *killReport    `json:"kill,omitempty"`
	NodeErrors    map[string]int `json:"errors,omitempty"` // error frames without a request id, by code
}

type commandRate struct {
	Command string  `json:"command"`
	PerS    float64 `json:"per_s"`
}

type loadReport struct {
	Sent       int            `json:"sent"`
	Answered   int            `json:"answered"`
	Results    int            `json:"results"`
	Unanswered int            `json:"unanswered"`
	JobsPerS   float64        `json:"jobs_per_s"`
	P50MS      float64        `json:"p50_ms"`
	P99MS      float64        `json:"p99_ms"`
	MaxMS      float64        `json:"max_ms"`
	Over1S     int            `json:"over_1s"`                  // results that took more than a second
	Open       []string       `json:"unanswered_ids,omitempty"` // up to 10
	Failures   map[string]int `json:"failures,omitempty"`
}

type killReport struct {
	Instance         string     `json:"instance"`
	NodesMoved       int        `json:"nodes_moved"`
	NodesBack        int        `json:"nodes_back"`
	NodesBackS       float64    `json:"nodes_back_s"`
	InFlight         int        `json:"in_flight"`
	InFlightAnswered int        `json:"in_flight_answered"`
	InFlightResults  int        `json:"in_flight_results"`
	InFlightLastS    float64    `json:"in_flight_last_s"`
	Load             loadReport `json:"load"`
}

func (o *options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, "fleet: "+format+"\n", args...)
	}
}

func (o *options) check() error {
	switch {
	case o.Instances < 1:
		return errors.New("-instances: at least 1")
	case o.Nodes < 1:
		return errors.New("-nodes: at least 1")
	case o.Sessions < 1:
		return errors.New("-sessions: at least 1")
	case o.Pools < 1:
		return errors.New("-pools: at least 1")
	case o.Capacity < 1:
		return errors.New("-capacity: at least 1")
	case o.Work < 0:
		return errors.New("-work: not negative")
	case o.Rate <= 0:
		return errors.New("-rate: more than 0")
	case o.Duration <= 0 || o.Idle <= 0 || o.Drain <= 0:
		return errors.New("-duration, -idle and -drain: more than 0")
	case o.Kill && o.Instances < 2:
		return errors.New("-kill needs -instances 2 or more (the nodes move to another instance)")
	}
	return nil
}

// raiseFileLimit lifts the soft open-files limit to the hard one: every
// connection is a descriptor here and one in a dispatcher, which inherits
// the limit.
func raiseFileLimit(need uint64) error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
			return err
		}
	}
	if l.Cur < need {
		return fmt.Errorf("open-files limit %d is below the %d this fleet needs (raise the hard limit: ulimit -Hn)", l.Cur, need)
	}
	return nil
}

// fleet is one run's state; close stops everything it started.
type fleet struct {
	o        options
	dir      string
	redisSrv *redisServer
	rdb      *redis.Client
	prefix   string
	insts    []*instance
	urls     []string
	dial     *dialer
	nodes    []*fleetNode
	sessions []*fleetSession
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	nodeErrs counter

	regCount atomic.Int64 // nodes registered at least once
	regMu    sync.Mutex
	regLast  map[string]regEvent // node id -> its last registration

}

type regEvent struct {
	inst int
	at   time.Time
}

// run starts the fleet, measures it, stops it and returns the report.
func run(ctx context.Context, o options) (rep *report, err error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	if err := raiseFileLimit(uint64(o.Nodes + o.Sessions + 1024)); err != nil {
		return nil, err
	}
	f := &fleet{o: o, regLast: map[string]regEvent{}}
	defer func() {
		if cerr := f.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := f.start(ctx); err != nil {
		return nil, err
	}
	return f.measure(ctx)
}

func (f *fleet) start(ctx context.Context) error {
	o := &f.o
	dir, err := os.MkdirTemp("", "ksana-fleet-")
	if err != nil {
		return err
	}
	f.dir = dir
	bin := o.Dispatcher
	if bin == "" {
		o.logf("building cmd/dispatcher")
		if bin, err = buildDispatcher(ctx, dir); err != nil {
			return err
		}
	}
	url := o.Redis
	if url == "" {
		if f.redisSrv, err = startRedis(ctx); err != nil {
			return err
		}
		url = f.redisSrv.url
	}
	ropt, err := redis.ParseURL(url)
	if err != nil {
		return fmt.Errorf("-redis %q: %w", url, err)
	}
	f.rdb = redis.NewClient(ropt)
	if err := f.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis %s: %w", url, err)
	}
	f.prefix = "ksana-bench-" + randomHex(6)
	for i := range o.Instances {
		in, err := startInstance(ctx, bin, dir, "fleet-"+strconv.Itoa(i), url, f.prefix)
		if err != nil {
			return err
		}
		f.insts = append(f.insts, in)
		f.urls = append(f.urls, "ws://"+in.addr)
	}
	o.logf("%d instances on %s, key prefix %s", o.Instances, url, f.prefix)
	f.dial = newDialer(o.Instances, 64)
	return nil
}

// close stops the clients and the instances, deletes the keys, stops
// Redis and removes the temp dir.
func (f *fleet) close() error {
	if f.cancel != nil {
		f.cancel()
		f.wg.Wait()
	}
	for _, in := range f.insts {
		in.kill()
	}
	var errs []error
	if f.rdb != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		n, err := deleteKeys(ctx, f.rdb, f.prefix)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("delete the keys of %s: %w", f.prefix, err))
		}
		f.o.logf("deleted %d keys of %s", n, f.prefix)
		f.rdb.Close()
	}
	if f.redisSrv != nil {
		f.redisSrv.stop()
	}
	if f.dir != "" {
		if err := os.RemoveAll(f.dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (f *fleet) onReg(n *fleetNode, inst int, at time.Time) {
	f.regMu.Lock()
	_, seen := f.regLast[n.id]
	f.regLast[n.id] = regEvent{inst, at}
	f.regMu.Unlock()
	if !seen {
		f.regCount.Add(1)
	}
}

func (f *fleet) pids() []int {
	var p []int
	for _, in := range f.insts {
		select {
		case <-in.exited:
		default:
			p = append(p, in.cmd.Process.Pid)
		}
	}
	return p
}

// cpu is the processor time of the live instances.
func (f *fleet) cpu() (float64, error) {
	sum := 0.0
	for _, pid := range f.pids() {
		s, err := cpuSeconds(pid)
		if err != nil {
			return 0, err
		}
		sum += s
	}
	return sum, nil
}

// waitFor polls cond every 100 ms until it holds or limit passes.
func waitFor(ctx context.Context, limit time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("%s: not within %v: %w", what, limit, err)
			}
			return fmt.Errorf("%s: not within %v", what, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (f *fleet) measure(ctx context.Context) (*report, error) {
	o := f.o
	rep := &report{Instances: o.Instances, Nodes: o.Nodes, Sessions: o.Sessions, Capacity: o.Capacity,
		WorkMS: ms(o.Work), Rate: o.Rate, DurationS: o.Duration.Seconds()}
	cctx, cancel := context.WithCancel(ctx)
	f.cancel = cancel

	// Memory before the nodes, once the instances have settled.
	if err := waitFor(ctx, 10*time.Second, "instances healthy", f.allHealthy(func(h health) bool { return h.Status == "ok" })); err != nil {
		return nil, err
	}
	time.Sleep(time.Second)
	for _, in := range f.insts {
		kib, err := rssKiB(in.cmd.Process.Pid)
		if err != nil {
			return nil, err
		}
		rep.RSSBeforeKiB = append(rep.RSSBeforeKiB, kib)
	}

	// 1. Registration.
	o.logf("attaching %d nodes", o.Nodes)
	start := time.Now()
	rep.NodesPerInst = make([]int, o.Instances)
	for i := range o.Nodes {
		n := &fleetNode{id: nodeID(i), pool: "pool-" + strconv.Itoa(i%o.Pools), capacity: o.Capacity, work: o.Work,
			urls: f.urls, home: i % o.Instances, dial: f.dial, errs: &f.nodeErrs, onReg: f.onReg,
			inst: -1, running: map[string]int{}}
		rep.NodesPerInst[n.home]++
		f.nodes = append(f.nodes, n)
		f.wg.Add(1)
		go func() { defer f.wg.Done(); n.run(cctx) }()
	}
	regLimit := 60*time.Second + time.Duration(o.Nodes)*10*time.Millisecond
	if err := waitFor(ctx, regLimit, "every node registered", func() (bool, error) {
		return f.regCount.Load() == int64(o.Nodes), nil
	}); err != nil {
		return nil, fmt.Errorf("%w (%d of %d)", err, f.regCount.Load(), o.Nodes)
	}
	if err := waitFor(ctx, regLimit, "every instance sees every node", f.allHealthy(func(h health) bool { return h.FleetOnline == o.Nodes })); err != nil {
		return nil, err
	}
	rep.RegisterS = time.Since(start).Seconds()
	o.logf("registered in %.2fs", rep.RegisterS)

	// 3. Memory per node connection.
	time.Sleep(time.Second)
	for _, in := range f.insts {
		kib, err := rssKiB(in.cmd.Process.Pid)
		if err != nil {
			return nil, err
		}
		rep.RSSAfterKiB = append(rep.RSSAfterKiB, kib)
	}
	var grown int64
	for i := range f.insts {
		grown += rep.RSSAfterKiB[i] - rep.RSSBeforeKiB[i]
	}
	rep.MemPerNodeKiB = float64(grown) / float64(o.Nodes)

	// Sessions.
	for i := range o.Sessions {
		s := &fleetSession{id: sessionID(i), urls: f.urls, home: i % o.Instances, dial: f.dial, errs: &f.nodeErrs,
			reqs: map[string]*request{}, open: map[string]*request{}, ready: make(chan struct{})}
		f.sessions = append(f.sessions, s)
		f.wg.Add(1)
		go func() { defer f.wg.Done(); s.run(cctx) }()
	}
	for _, s := range f.sessions {
		select {
		case <-s.ready:
		case <-time.After(30 * time.Second):
			return nil, fmt.Errorf("session %s did not connect within 30s", s.id)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}

	// 2. Idle Redis commands and processor time.
	o.logf("idle for %v", o.Idle)
	time.Sleep(time.Second)
	before, err := commandStats(ctx, f.rdb)
	if err != nil {
		return nil, err
	}
	cpu0, err := f.cpu()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	select {
	case <-time.After(o.Idle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	after, err := commandStats(ctx, f.rdb)
	if err != nil {
		return nil, err
	}
	cpu1, err := f.cpu()
	if err != nil {
		return nil, err
	}
	idleS := time.Since(t0).Seconds()
	idleCPU := (cpu1 - cpu0) / idleS
	rep.IdleCPUPct = 100 * idleCPU
	var total int64
	for cmd, n := range after {
		d := n - before[cmd]
		if cmd == "info" { // this program's own reading
			d = max(0, d-1)
		}
		if d > 0 {
			total += d
			rep.IdleTop = append(rep.IdleTop, commandRate{cmd, float64(d) / idleS})
		}
	}
	rep.IdleRedisPerS = float64(total) / idleS
	sort.Slice(rep.IdleTop, func(i, j int) bool { return rep.IdleTop[i].PerS > rep.IdleTop[j].PerS })
	rep.IdleTop = rep.IdleTop[:min(len(rep.IdleTop), 6)]

	// 4, 5. Load.
	o.logf("load: %.0f jobs/s for %v", o.Rate, o.Duration)
	cpuA, err := f.cpu()
	if err != nil {
		return nil, err
	}
	tA := time.Now()
	reqs := f.load(ctx, "load", o.Duration, nil)
	f.drain(ctx, reqs)
	cpuB, err := f.cpu()
	if err != nil {
		return nil, err
	}
	loadS := time.Since(tA).Seconds()
	f.locked(func() { rep.Load = summarize(reqs, o.Duration) })
	f.explain(ctx, rep.Load.Open)
	if rep.Load.Answered > 0 {
		rep.CPUPerJobMS = 1000 * max(0, cpuB-cpuA-idleCPU*loadS) / float64(rep.Load.Answered)
	}

	// 6. kill -9 mid-load.
	if o.Kill {
		kr, err := f.killPhase(ctx)
		if err != nil {
			return nil, err
		}
		rep.KillPhase = kr
	}
	rep.NodeErrors = f.nodeErrs.snapshot()
	return rep, nil
}

func (f *fleet) allHealthy(ok func(health) bool) func() (bool, error) {
	return func() (bool, error) {
		for _, in := range f.insts {
			select {
			case <-in.exited:
				continue
			default:
			}
			h, err := in.health(context.Background())
			if err != nil {
				return false, err
			}
			if !ok(h) {
				return false, fmt.Errorf("instance %s: %+v", in.id, h)
			}
		}
		return true, nil
	}
}

// load sends Rate requests a second for d, round-robin over the sessions
// and pools; at (when set) runs once at half-time. It returns the
// requests sent.
func (f *fleet) load(ctx context.Context, phase string, d time.Duration, at func()) []*request {
	o := f.o
	start := time.Now()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	var sent []*request
	half := at == nil
	for {
		el := time.Since(start)
		if el >= d || ctx.Err() != nil {
			return sent
		}
		if !half && el >= d/2 {
			half = true
			at()
		}
		due := int(o.Rate * el.Seconds())
		for len(sent) < due {
			k := len(sent)
			s := f.sessions[k%len(f.sessions)]
			id := fmt.Sprintf("%s-%d", phase, k)
			s.submit(ctx, id, "pool-"+strconv.Itoa(k%o.Pools))
			s.mu.Lock()
			sent = append(sent, s.reqs[id])
			s.mu.Unlock()
		}
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
}

// drain waits until every request is answered, or Drain passes.
func (f *fleet) drain(ctx context.Context, reqs []*request) {
	waitFor(ctx, f.o.Drain, "drain", func() (bool, error) {
		for _, s := range f.sessions {
			s.mu.Lock()
			n := len(s.open)
			s.mu.Unlock()
			if n > 0 {
				return false, nil
			}
		}
		return true, nil
	})
}

// locked runs fn with every session's lock held: the outcomes of the
// requests are written under them.
func (f *fleet) locked(fn func()) {
	for _, s := range f.sessions {
		s.mu.Lock()
	}
	defer func() {
		for _, s := range f.sessions {
			s.mu.Unlock()
		}
	}()
	fn()
}

func summarize(reqs []*request, d time.Duration) loadReport {
	var lr loadReport
	lr.Sent = len(reqs)
	var lat []time.Duration
	fails := map[string]int{}
	var first, last time.Time
	for _, r := range reqs {
		if r.answered.IsZero() {
			lr.Unanswered++
			if len(lr.Open) < 10 {
				lr.Open = append(lr.Open, r.id)
			}
			continue
		}
		lr.Answered++
		if r.failed != "" {
			fails[r.failed]++
			continue
		}
		lr.Results++
		lat = append(lat, r.answered.Sub(r.sent))
		if r.answered.Sub(r.sent) > time.Second {
			lr.Over1S++
		}
		if first.IsZero() || r.sent.Before(first) {
			first = r.sent
		}
		if r.answered.After(last) {
			last = r.answered
		}
	}
	if len(fails) > 0 {
		lr.Failures = fails
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		lr.P50MS = ms(lat[len(lat)/2])
		lr.P99MS = ms(lat[min(len(lat)-1, len(lat)*99/100)])
		lr.MaxMS = ms(lat[len(lat)-1])
		lr.JobsPerS = float64(lr.Results) / max(d.Seconds(), last.Sub(first).Seconds())
	}
	return lr
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// killPhase runs the load again and kill -9s the last instance at
// half-time.
func (f *fleet) killPhase(ctx context.Context) (*killReport, error) {
	o := f.o
	victim := len(f.insts) - 1
	kr := &killReport{Instance: f.insts[victim].id}
	var killAt time.Time
	var moved []*fleetNode
	var inflight []*request
	o.logf("kill phase: %.0f jobs/s for %v, kill -9 of %s at half-time", o.Rate, o.Duration, kr.Instance)
	reqs := f.load(ctx, "kill", o.Duration, func() {
		for _, n := range f.nodes {
			if n.instance() == victim {
				moved = append(moved, n)
			}
		}
		for _, s := range f.sessions {
			s.mu.Lock()
			for _, r := range s.open {
				inflight = append(inflight, r)
			}
			s.mu.Unlock()
		}
		killAt = time.Now()
		f.insts[victim].kill()
	})
	kr.NodesMoved, kr.InFlight = len(moved), len(inflight)
	back := func() (int, time.Duration) {
		f.regMu.Lock()
		defer f.regMu.Unlock()
		k, last := 0, time.Duration(0)
		for _, n := range moved {
			e := f.regLast[n.id]
			if e.inst != victim && e.at.After(killAt) {
				k++
				last = max(last, e.at.Sub(killAt))
			}
		}
		return k, last
	}
	waitFor(ctx, 60*time.Second, "nodes back", func() (bool, error) {
		k, _ := back()
		return k == len(moved), nil
	})
	k, last := back()
	kr.NodesBack, kr.NodesBackS = k, last.Seconds()
	f.drain(ctx, reqs)
	f.locked(func() { kr.Load = summarize(reqs, o.Duration) })
	f.explain(ctx, kr.Load.Open)
	f.locked(func() {
		for _, r := range inflight {
			if r.answered.IsZero() {
				continue
			}
			kr.InFlightAnswered++
			if r.failed == "" {
				kr.InFlightResults++
			}
			kr.InFlightLastS = max(kr.InFlightLastS, r.answered.Sub(killAt).Seconds())
		}
	})
	return kr, nil
}

// explain logs, for requests left unanswered, their job's record in Redis
// (without the payload) and the end of the live instances' logs.
func (f *fleet) explain(ctx context.Context, ids []string) {
	if len(ids) == 0 {
		return
	}
	sent := map[string]string{}
	f.locked(func() {
		for _, s := range f.sessions {
			for _, id := range ids {
				if r := s.reqs[id]; r != nil {
					sent[id] = fmt.Sprintf("session %s, sent %s, again %v", s.id, r.sent.Format("15:04:05.000"), r.resent)
				}
			}
		}
	})
	for _, id := range ids {
		f.o.logf("unanswered %s: %s", id, sent[id])
		job := scheduler.JobIDFor(id)
		keys, _, err := f.rdb.Scan(ctx, 0, f.prefix+":v1:jobs:*{job:"+job+"}:fsm", 100000).Result()
		if err != nil || len(keys) == 0 {
			f.o.logf("unanswered %s: no job record %s (%v)", id, job, err)
			continue
		}
		rec, err := f.rdb.HGetAll(ctx, keys[0]).Result()
		if err != nil {
			f.o.logf("unanswered %s: %v", id, err)
			continue
		}
		delete(rec, "payload")
		f.o.logf("unanswered %s: job %s: %v", id, job, rec)
	}
	for _, in := range f.insts {
		select {
		case <-in.exited:
		default:
			f.o.logf("log of %s (warnings):\n%s", in.id, in.tail())
		}
	}
}
