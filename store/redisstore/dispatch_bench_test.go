package redisstore

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/fsm"
	"github.com/ksana-dev/ksana/internal/testenv"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/storetest"
	"github.com/redis/rueidis"
)

// runCalls makes n calls spread over the goroutines of calls (one each)
// and returns the time taken.
func runCalls(b *testing.B, n int64, calls []func() error) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range calls {
		wg.Go(func() {
			for next.Add(1) <= n {
				if err := calls[w](); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// interleave runs rounds of perRound calls of base and then of op and
// returns the total time of each, so that load from other processes on a
// shared machine weighs on both.
func interleave(b *testing.B, perRound int64, base, op []func() error) (tBase, tOp time.Duration) {
	for b.Loop() {
		tBase += runCalls(b, perRound, base)
		tOp += runCalls(b, perRound, op)
	}
	return tBase, tOp
}

// BenchmarkOpsVsFloor states each Lua operation against its floor: a bare
// script that makes only the Redis calls the operation needs, without its
// checks, run interleaved with it (64 callers, 2,000 calls a round each):
//
//	go test -run '^$' -bench OpsVsFloor -benchtime 20x ./store/redisstore/
func BenchmarkOpsVsFloor(b *testing.B) {
	const callers, perRound = 64, 2000
	c := newTestClient(b, []string{testenv.Addr(testenv.RedisURL(b))}, false)
	ctx := context.Background()
	compare := func(b *testing.B, base, op []func() error) {
		tBase, tOp := interleave(b, perRound, base, op)
		b.ReportMetric(float64(tBase)/float64(tOp), "op/floor")
		b.ReportMetric(float64(b.N*perRound)/tOp.Seconds(), "ops/s")
		b.ReportMetric(float64(b.N*perRound)/tBase.Seconds(), "floor-ops/s")
	}
	b.Run("fsm_apply", func(b *testing.B) {
		prefix := testPrefix(b)
		s, err := NewJobs(c, JobsConfig{Prefix: prefix, MaxAttempts: 1 << 30, TTL: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		// The floor reads the hash, takes the time, writes the new state
		// and renews the TTL: the calls of a transition, nothing else.
		floor := rueidis.NewLuaScript(`
local h = redis.call('HMGET', KEYS[1], 'state', 'attempt', 'node_id', 'created_at_ms', 'updated_at_ms')
local t = redis.call('TIME')
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'attempt', h[2], 'node_id', ARGV[2], 'updated_at_ms', t[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 'ok ' .. ARGV[1] .. ' ' .. h[2] .. ' ' .. h[4] .. ' ' .. t[1] .. ' -' .. ARGV[2]`)
		base, op := make([]func() error, callers), make([]func() error, callers)
		for w := range callers {
			id := "bench-" + strconv.Itoa(w)
			if _, _, err := openJob(ctx, s, id); err != nil {
				b.Fatal(err)
			}
			fkey := NewKeys(prefix).JobFSM("floor-" + strconv.Itoa(w))
			if _, _, err := openJob(ctx, s, "floor-"+strconv.Itoa(w)); err != nil {
				b.Fatal(err)
			}
			base[w] = func() error {
				return floor.Exec(ctx, c, []string{fkey}, []string{"DISPATCHED", "node-1", "60000"}).Error()
			}
			attempt, ev := 1, fsm.Dispatch
			op[w] = func() error {
				tr, err := s.ApplyJob(ctx, id, ev, attempt, "node-1")
				if err != nil || tr.Duplicate {
					return fmt.Errorf("%s attempt %d: %v (duplicate %v)", ev, attempt, err, tr.Duplicate)
				}
				attempt = tr.Job.Attempt
				if ev == fsm.Dispatch {
					ev = fsm.Timeout
				} else {
					ev = fsm.Dispatch
				}
				return nil
			}
		}
		compare(b, base, op)
	})
	b.Run("reserve", func(b *testing.B) {
		prefix := testPrefix(b)
		s, err := NewReservations(c, ReservationsConfig{Prefix: prefix})
		if err != nil {
			b.Fatal(err)
		}
		// The floor of a renewal: the time, the expired members out, the
		// member's new score, the key's expiry.
		floor := rueidis.NewLuaScript(`
local t = redis.call('TIME')
local now = t[1] .. string.sub('00000' .. t[2], -6, -4)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + ARGV[2], ARGV[1])
redis.call('PEXPIREAT', KEYS[1], now + ARGV[2], 'GT')
return 1`)
		base, op := make([]func() error, callers), make([]func() error, callers)
		for w := range callers {
			node, fkey, i, j := "node-"+strconv.Itoa(w), NewKeys(prefix).NodeReserved("floor-"+strconv.Itoa(w)), 0, 0
			base[w] = func() error {
				j++
				return floor.Exec(ctx, c, []string{fkey}, []string{strconv.Itoa(j % 8), "60000"}).Error()
			}
			op[w] = func() error {
				i++
				return s.Reserve(ctx, node, strconv.Itoa(i%8), 8, time.Minute)
			}
		}
		compare(b, base, op)
	})

}

// BenchmarkDispatchEndToEnd measures jobs per second from Submit to the
// session's answer through two Dispatchers over one Redis (the node on
// one, the session on the other, the node answering at once), interleaved
// with the same server's raw XADD rate at the same concurrency (64
// callers, 500 jobs or XADDs a round). job/xadd is the ratio; redis-ops/job
// counts the Redis operations (a pipeline counts once) a job costs, the
// client's calls; redis-cmds/job the commands the server executed per job
// (INFO commandstats over the rounds of jobs, the commands that scripts run
// included, the instances' background loops too) and redis-scripts/job
// the script calls among them: run it on a Redis nothing else uses;
// go-cpu-µs/job and redis-cpu-µs/job the CPU time of this process and of
// the server during the rounds of jobs, per job (on a machine shared
// with other work these vary less than the rates); allocs/job and B/job
// the heap allocations of this process in those rounds, per job:
//
//	go test -run '^$' -bench DispatchEndToEnd -benchtime 10x ./store/redisstore/
func BenchmarkDispatchEndToEnd(b *testing.B) {
	const callers, perRound = 64, 500
	c := newTestClient(b, []string{testenv.Addr(testenv.RedisURL(b))}, false)
	ctx := context.Background()
	var ops atomic.Int64
	cfg := storetest.DispatchTestConfig("x")
	prefix := testPrefix(b)
	cfg.Dispatch.DefaultCapacity = 10000
	p := storetest.NewTestPlane(b, storetest.DispatcherHarness{Stores: func() scheduler.Stores {
		st, err := NewStores(c, cfg, StoresConfig{KeyPrefix: prefix, Group: "g", OpHook: func(string, string, time.Duration) { ops.Add(1) }})
		if err != nil {
			b.Fatal(err)
		}
		return st
	}})
	a := p.Start("inst-a", false, nil)
	d := p.Start("inst-b", false, nil)
	n := storetest.NewTestNode(scheduler.NodeInfo{NodeID: "n1", Capacity: 10000})
	n.Attach(b, a)
	done := make(chan struct{}, callers*perRound)
	sess := &countingSession{done: done}
	if err := d.AttachSession(ctx, "s1", sess); err != nil {
		b.Fatal(err)
	}
	storetest.Eventually(b, "fleet", 10*time.Second, func() bool { return len(d.Fleet()) == 1 && d.Fleet()[0].Online })
	rawKey := prefix + ":raw"
	base, op := make([]func() error, callers), make([]func() error, callers)
	var seq atomic.Int64
	for w := range callers {
		base[w] = func() error {
			return c.Do(ctx, c.B().Xadd().Key(rawKey).Maxlen().Almost().Threshold("1000").Id("*").FieldValue().FieldValue("f", "v").Build()).Error()
		}
		op[w] = func() error {
			r := "bench-" + strconv.FormatInt(seq.Add(1), 10)
			if _, err := d.Submit(ctx, "s1", scheduler.Request{RequestID: r, Payload: []byte("x")}); err != nil {
				return err
			}
			select {
			case <-done:
				return nil
			case <-time.After(10 * time.Second):
				return fmt.Errorf("request %s unanswered after 10s", r)
			}
		}
	}
	ops.Store(0)
	// The CPU the jobs cost, this process's and the server's, counted
	// around the rounds of jobs only.
	// So are the heap allocations, of both Dispatchers and the test's
	// node and session.
	var goCPU, redisCPU time.Duration
	var tBase, tOp time.Duration
	var allocs, allocBytes uint64
	var ms runtime.MemStats
	cmds := storetest.CommandStats{}
	var calls int64
	for b.Loop() {
		tBase += runCalls(b, perRound, base)
		runtime.ReadMemStats(&ms)
		m0, a0 := ms.Mallocs, ms.TotalAlloc
		g0, r0, c0, o0 := processCPU(b), serverCPU(b, c), commandStats(b, c), ops.Load()
		tOp += runCalls(b, perRound, op)
		goCPU, redisCPU = goCPU+processCPU(b)-g0, redisCPU+serverCPU(b, c)-r0
		for k, v := range commandStats(b, c).Sub(c0) {
			cmds[k] += v
		}
		calls += ops.Load() - o0
		runtime.ReadMemStats(&ms)
		allocs, allocBytes = allocs+ms.Mallocs-m0, allocBytes+ms.TotalAlloc-a0
	}
	jobs := float64(b.N * perRound)
	perJob := float64(calls) / jobs
	b.ReportMetric(float64(cmds.Total())/jobs, "redis-cmds/job")
	b.ReportMetric(float64(cmds.Scripts())/jobs, "redis-scripts/job")
	b.Logf("commands of %v jobs (INFO commandstats, scripts' commands included): %v", jobs, cmds)
	b.ReportMetric(float64(tBase)/float64(tOp), "job/xadd")
	b.ReportMetric(float64(goCPU.Microseconds())/jobs, "go-cpu-µs/job")
	b.ReportMetric(float64(allocs)/jobs, "allocs/job")
	b.ReportMetric(float64(allocBytes)/jobs, "B/job")
	b.ReportMetric(float64(redisCPU.Microseconds())/jobs, "redis-cpu-µs/job")
	b.ReportMetric(jobs/tOp.Seconds(), "jobs/s")
	b.ReportMetric(jobs/tBase.Seconds(), "xadd/s")
	b.ReportMetric(perJob, "redis-ops/job")
	// The floor: per job, as many sequential round trips of a small script
	// as a job makes Redis operations, at the same concurrency. No
	// dispatcher can beat it without making fewer operations.
	steps := int(perJob + 0.5)
	step := rueidis.NewLuaScript(`redis.call('HSET', KEYS[1], 'f', ARGV[1]) return 1`)
	floor := make([]func() error, callers)
	for w := range callers {
		key := prefix + ":floor:" + strconv.Itoa(w)
		floor[w] = func() error {
			for range steps {
				if err := step.Exec(ctx, c, []string{key}, []string{"v"}).Error(); err != nil {
					return err
				}
			}
			return nil
		}
	}
	tFloor, _ := interleaveOnce(b, perRound, floor)
	b.ReportMetric(tFloor.Seconds()/tOp.Seconds(), "job/floor")
}

// processCPU returns the user and system CPU time this process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU returns the user and system CPU time the Redis server used so
// far (INFO cpu).
func serverCPU(b *testing.B, c rueidis.Client) time.Duration {
	info, err := c.Do(context.Background(), c.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("INFO cpu %s: %q", k, v)
			}
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

// commandStats reads INFO commandstats of the server (see
// storetest.RedisCommandStats).
func commandStats(b *testing.B, c rueidis.Client) storetest.CommandStats {
	s, err := storetest.RedisCommandStats(context.Background(), c)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkIdleInstance counts what idle dispatch instances cost Redis:
// two Dispatchers with the default Config (the binary's defaults), one
// node attached to the first and one session to the second, no job, each
// round a window of 5 seconds. It reports the commands (INFO
// commandstats, scripts' commands included) and scripts the server
// executed per second and per instance, and the client calls (a pipeline
// counts once), on the standalone server and on the cluster. Run it on
// servers nothing else uses (KSANA_TEST_REDIS_URL,
// KSANA_TEST_REDIS_CLUSTER_URLS): the servers' counts are everyone's.
//
//	go test -run '^$' -bench IdleInstance -benchtime 3x ./store/redisstore/
func BenchmarkIdleInstance(b *testing.B) {
	for _, srv := range testServers(b) {
		b.Run(srv.name, func(b *testing.B) { benchIdleInstance(b, srv.client) })
	}
}

func benchIdleInstance(b *testing.B, c rueidis.Client) {
	ctx := context.Background()
	var ops atomic.Int64
	prefix := testPrefix(b)
	p := storetest.NewTestPlane(b, storetest.DispatcherHarness{Stores: func() scheduler.Stores {
		st, err := NewStores(c, scheduler.Config{}, StoresConfig{KeyPrefix: prefix, OpHook: func(string, string, time.Duration) { ops.Add(1) }})
		if err != nil {
			b.Fatal(err)
		}
		return st
	}})
	defaults := func(cfg *scheduler.Config) {
		*cfg = scheduler.Config{InstanceID: cfg.InstanceID}
	}
	a := p.Start("idle-a", false, defaults)
	d := p.Start("idle-b", false, defaults)
	storetest.NewTestNode(scheduler.NodeInfo{NodeID: "n1"}).Attach(b, a)
	if err := d.AttachSession(ctx, "s1", &countingSession{done: make(chan struct{}, 1)}); err != nil {
		b.Fatal(err)
	}
	time.Sleep(3 * time.Second) // past the start-up's steps
	const window = 5 * time.Second
	cmds := storetest.CommandStats{}
	var calls int64
	var took time.Duration
	for b.Loop() {
		c0, o0, t0 := commandStats(b, c), ops.Load(), time.Now()
		time.Sleep(window)
		for k, v := range commandStats(b, c).Sub(c0) {
			cmds[k] += v
		}
		calls, took = calls+ops.Load()-o0, took+time.Since(t0)
	}
	perSec := func(n int64) float64 { return float64(n) / took.Seconds() / 2 }
	b.ReportMetric(perSec(cmds.Total()), "redis-cmds/s/instance")
	b.ReportMetric(perSec(cmds.Scripts()), "redis-scripts/s/instance")
	b.ReportMetric(perSec(calls), "client-calls/s/instance")
	b.Logf("commands of two idle instances in %v: %v", took.Round(time.Millisecond), cmds)
}

// interleaveOnce runs b.N rounds of perRound calls of op.
func interleaveOnce(b *testing.B, perRound int64, op []func() error) (time.Duration, int) {
	var total time.Duration
	rounds := max(b.N, 1)
	for range rounds {
		total += runCalls(b, perRound, op)
	}
	return total, rounds
}

// countingSession signals one done per answer.
type countingSession struct{ done chan struct{} }

func (s *countingSession) Send(ctx context.Context, m scheduler.Envelope) error {
	s.done <- struct{}{}
	return nil
}

// BenchmarkDispatchLatency measures one request at a time, Submit to
// answer, through two Dispatchers over one Redis (the node attached to A,
// the session to B), beside its floor: the Redis round trips the job makes
// (counted by the operation hook), each timed as a bare PING in the same
// run. It reports p50 and p99, the floor and p50/floor:
//
//	go test -run '^$' -bench DispatchLatency -benchtime 2000x ./store/redisstore/
func BenchmarkDispatchLatency(b *testing.B) {
	c := newTestClient(b, []string{testenv.Addr(testenv.RedisURL(b))}, false)
	ctx := context.Background()
	var ops atomic.Int64
	cfg := storetest.DispatchTestConfig("x")
	prefix := testPrefix(b)
	p := storetest.NewTestPlane(b, storetest.DispatcherHarness{Stores: func() scheduler.Stores {
		st, err := NewStores(c, cfg, StoresConfig{KeyPrefix: prefix, OpHook: func(string, string, time.Duration) { ops.Add(1) }})
		if err != nil {
			b.Fatal(err)
		}
		return st
	}})
	// The loops at their default pace, so that the count is the job's.
	defaults := func(c *scheduler.Config) {
		c.OwnerTTL, c.Inbox, c.Fleet, c.Dispatch = 0, scheduler.InboxConfig{}, scheduler.FleetConfig{}, scheduler.DispatchConfig{}
	}
	a := p.Start("inst-a", false, defaults)
	d := p.Start("inst-b", false, defaults)
	storetest.NewTestNode(scheduler.NodeInfo{NodeID: "n1"}).Attach(b, a)
	sess := &countingSession{done: make(chan struct{}, 1)}
	if err := d.AttachSession(ctx, "s1", sess); err != nil {
		b.Fatal(err)
	}
	storetest.Eventually(b, "fleet", 10*time.Second, func() bool { f := d.Fleet(); return len(f) == 1 && f[0].Online })
	job := func(i int) time.Duration {
		start := time.Now()
		if _, err := d.Submit(ctx, "s1", scheduler.Request{RequestID: "lat-" + strconv.Itoa(i), Payload: []byte("x")}); err != nil {
			b.Fatal(err)
		}
		<-sess.done
		return time.Since(start)
	}
	ping := func() time.Duration {
		start := time.Now()
		if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for i := range 100 { // warm up
		job(-i - 1)
	}
	var lat, rtt []time.Duration
	ops.Store(0)
	b.ResetTimer()
	for i := range b.N {
		lat = append(lat, job(i))
		rtt = append(rtt, ping())
	}
	b.StopTimer()
	perJob := float64(ops.Load()) / float64(b.N)
	pct := func(ds []time.Duration, q float64) time.Duration {
		s := append([]time.Duration(nil), ds...)
		slices.Sort(s)
		return s[min(len(s)-1, int(q*float64(len(s))))]
	}
	floor := time.Duration(perJob * float64(pct(rtt, 0.5)))
	b.ReportMetric(float64(pct(lat, 0.5).Microseconds()), "p50-µs")
	b.ReportMetric(float64(pct(lat, 0.99).Microseconds()), "p99-µs")
	b.ReportMetric(float64(floor.Microseconds()), "floor-µs")
	b.ReportMetric(perJob, "redis-ops/job")
	b.ReportMetric(float64(pct(lat, 0.5))/float64(floor), "p50/floor")
}
