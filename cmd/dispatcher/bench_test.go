//go:build unix

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/internal/testenv"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/redisstore"
	"github.com/ksana-dev/ksana/store/storetest"
)

// benchWindow is how many requests a session keeps outstanding.
const benchWindow = 64

// runWindowed runs n requests through submit, benchWindow at a time, and
// returns how long the run took and each request's latency. submit sends
// request i; answered yields i when its answer arrives.
func runWindowed(n int, submit func(i int), answered <-chan int) (time.Duration, []time.Duration) {
	sent := make([]time.Time, n)
	lat := make([]time.Duration, 0, n)
	start := time.Now()
	next := 0
	for ; next < min(benchWindow, n); next++ {
		sent[next] = time.Now()
		submit(next)
	}
	for range n {
		i := <-answered
		lat = append(lat, time.Since(sent[i]))
		if next < n {
			sent[next] = time.Now()
			submit(next)
			next++
		}
	}
	return time.Since(start), lat
}

func pct(lat []time.Duration, p float64) float64 {
	s := append([]time.Duration(nil), lat...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return float64(s[min(len(s)-1, int(float64(len(s))*p))]) / float64(time.Millisecond)
}

// benchSession is a library-level session: it hands each answer's request
// index to a channel.
type benchSession struct {
	mu    sync.Mutex
	index map[string]int
	ch    chan int
}

func (s *benchSession) Send(_ context.Context, m scheduler.Envelope) error {
	s.mu.Lock()
	i, ok := s.index[m.RequestID]
	delete(s.index, m.RequestID)
	s.mu.Unlock()
	if ok {
		s.ch <- i
	}
	return nil
}

// BenchmarkEndToEnd measures jobs per second and the latency from a
// session's request to its result through two dispatch instances on one
// Redis (KSANA_TEST_REDIS_URL), nodes on A answering at once, the session
// on B, benchWindow requests outstanding:
//
//   - library: two scheduler.Dispatchers in this process, with in-memory
//     nodes and session (no sockets);
//   - websocket: two dispatcher processes, example node processes
//     (-delay 0) on A, a WebSocket session on B.
//
// ws_share is the part of the end-to-end time per job that the WebSocket
// layer adds: 1 - library time per job / websocket time per job. ns/op is
// the websocket time per job.
//
//	go test -run '^$' -bench EndToEnd -benchtime 3000x ./cmd/dispatcher/
func BenchmarkEndToEnd(b *testing.B) {
	redisURL := testenv.RedisURL(b)
	n := b.N

	// Library level.
	redis := singleRedis(redisURL, randomPrefix(b))
	client := redisClient(b, redis)
	var libDs []*scheduler.Dispatcher
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for _, id := range []string{"lib-a", "lib-b"} {
		cfg := testPlane(id, &redis)
		st, err := redisstore.NewStores(client, cfg.Plane, redis.Stores)
		if err != nil {
			b.Fatal(err)
		}
		d, err := scheduler.NewDispatcher(st, cfg.Plane)
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); d.Run(ctx) }()
		libDs = append(libDs, d)
	}
	for i := range 3 {
		storetest.NewTestNode(scheduler.NodeInfo{NodeID: fmt.Sprintf("ln%d", i), Pools: []string{"p"}, Capacity: 64}).Attach(b, libDs[0])
	}
	sess := &benchSession{index: map[string]int{}, ch: make(chan int, n)}
	if err := libDs[1].AttachSession(ctx, "lib-s", sess); err != nil {
		b.Fatal(err)
	}
	for _, d := range libDs {
		storetest.Eventually(b, "library fleet", 20*time.Second, func() bool { return len(d.Fleet()) == 3 })
	}
	libRun := func(prefix string, n int) (time.Duration, []time.Duration) {
		return runWindowed(n, func(i int) {
			q := fmt.Sprintf("%s-%d", prefix, i)
			sess.mu.Lock()
			sess.index[q] = i
			sess.mu.Unlock()
			go func() {
				if _, err := libDs[1].Submit(ctx, "lib-s", scheduler.Request{RequestID: q, Pool: "p", Payload: []byte(q)}); err != nil {
					b.Error(err)
				}
			}()
		}, sess.ch)
	}

	// WebSocket level.
	dispatcherBin, nodeBin := binaries(b)
	dir := b.TempDir()
	wredis := redis
	wredis.Stores.KeyPrefix = randomPrefix(b)
	plane := testPlane("", &wredis)
	a := startProc(b, dir, "a", true, dispatcherBin, "-config", writeConfig(b, dir, "a", plane))
	bb := startProc(b, dir, "b", true, dispatcherBin, "-config", writeConfig(b, dir, "b", plane))
	for i := range 3 {
		startProc(b, dir, fmt.Sprintf("wn%d", i), false, nodeBin, "-url", wsURL(a.addr, "/ws/node"), "-id", fmt.Sprintf("wn%d", i), "-pools", "p", "-capacity", "64", "-delay", "0", "-quiet")
	}
	storetest.Eventually(b, "websocket fleet", 20*time.Second, func() bool { return health(bb.addr)["fleet_online"] == 3.0 })
	ws := mustDial(b, wsURL(bb.addr, "/ws/session", "session_id", "ws-s"), "")
	wsCh := make(chan int, n)
	var wmu sync.Mutex
	wsIndex := map[string]int{}
	go func() {
		for {
			select {
			case m := <-ws.in:
				if m.Type != "job_result" {
					b.Errorf("session got %+v", m)
					continue
				}
				wmu.Lock()
				i, ok := wsIndex[m.RequestID]
				delete(wsIndex, m.RequestID)
				wmu.Unlock()
				if ok {
					wsCh <- i
				}
			case <-ws.done:
				return
			}
		}
	}()
	wsRun := func(prefix string, n int) (time.Duration, []time.Duration) {
		return runWindowed(n, func(i int) {
			q := fmt.Sprintf("%s-%d", prefix, i)
			wmu.Lock()
			wsIndex[q] = i
			wmu.Unlock()
			ws.send(wire{Type: "job_request", RequestID: q, Pool: "p", Payload: []byte(q)})
		}, wsCh)
	}

	// Warm both up, then measure them one after the other.
	libRun("warm", 200)
	wsRun("warm", 200)
	// The machine is shared: the two run in alternating rounds, so that
	// both see the same load.
	b.ResetTimer()
	var libTook, wsTook time.Duration
	var libLat, wsLat []time.Duration
	const rounds = 4
	for r := range rounds {
		k := n / rounds
		if r == rounds-1 {
			k = n - k*(rounds-1)
		}
		took, lat := libRun(fmt.Sprintf("lib%d", r), k)
		libTook, libLat = libTook+took, append(libLat, lat...)
		took, lat = wsRun(fmt.Sprintf("ws%d", r), k)
		wsTook, wsLat = wsTook+took, append(wsLat, lat...)
	}
	b.StopTimer()
	libPer := float64(libTook) / float64(n)
	wsPer := float64(wsTook) / float64(n)
	b.ReportMetric(wsPer, "ns/op")
	b.ReportMetric(float64(n)/libTook.Seconds(), "lib_jobs/s")
	b.ReportMetric(float64(n)/wsTook.Seconds(), "ws_jobs/s")
	b.ReportMetric(pct(libLat, 0.5), "lib_p50_ms")
	b.ReportMetric(pct(libLat, 0.99), "lib_p99_ms")
	b.ReportMetric(pct(wsLat, 0.5), "ws_p50_ms")
	b.ReportMetric(pct(wsLat, 0.99), "ws_p99_ms")
	b.ReportMetric(1-libPer/wsPer, "ws_share")
}

// redisOps sums scheduler_phase2_redis_op_total over every op and result
// of an instance's /metrics.
func redisOps(addr string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	sum := 0.0
	for _, m := range regexp.MustCompile(`(?m)^scheduler_phase2_redis_op_total\{[^}]*\} (\S+)$`).FindAllSubmatch(body, -1) {
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		sum += v
	}
	return sum
}

// BenchmarkLatency measures one request at a time, from a WebSocket
// session's job_request on dispatcher process B to its job_result, the
// node process (-delay 0) on dispatcher process A, over one Redis. Beside
// p50 and p99 it reports the floor: the Redis operations the job costs
// (the instances' scheduler_phase2_redis_op_total, background loops
// included) times a bare PING's round trip, plus two WebSocket round trips
// (the session's and the node's), each timed as a ping frame to B:
//
//	go test -run '^$' -bench Latency -benchtime 2000x ./cmd/dispatcher/
func BenchmarkLatency(b *testing.B) {
	redis := singleRedis(testenv.RedisURL(b), randomPrefix(b))
	client := redisClient(b, redis)
	ctx := context.Background()
	dispatcherBin, nodeBin := binaries(b)
	dir := b.TempDir()
	plane := testPlane("", &redis)
	// The loops at their default pace, so that the count is the job's.
	plane.Plane.OwnerTTL, plane.Plane.Inbox, plane.Plane.Fleet = 45*time.Second, scheduler.InboxConfig{Block: time.Second, ClaimMinIdle: 30 * time.Second, DeadMinIdle: time.Minute, ScanInterval: 5 * time.Second}, scheduler.FleetConfig{PresenceTTL: 45 * time.Second, RefreshInterval: 2 * time.Second}
	plane.Plane.Dispatch.SweepInterval = 500 * time.Millisecond
	a := startProc(b, dir, "a", true, dispatcherBin, "-config", writeConfig(b, dir, "a", plane))
	bb := startProc(b, dir, "b", true, dispatcherBin, "-config", writeConfig(b, dir, "b", plane))
	startProc(b, dir, "n0", false, nodeBin, "-url", wsURL(a.addr, "/ws/node"), "-id", "n0", "-pools", "p", "-delay", "0", "-quiet")
	storetest.Eventually(b, "fleet", 20*time.Second, func() bool { return health(bb.addr)["fleet_online"] == 1.0 })
	ws := mustDial(b, wsURL(bb.addr, "/ws/session", "session_id", "lat"), "")
	job := func(q string) time.Duration {
		start := time.Now()
		ws.send(wire{Type: "job_request", RequestID: q, Pool: "p", Payload: []byte(q)})
		if m := ws.expect("job_result"); m.RequestID != q {
			b.Fatalf("answer %+v, want %s", m, q)
		}
		return time.Since(start)
	}
	wsPing := func() time.Duration {
		start := time.Now()
		ws.send(wire{Type: "ping"})
		ws.expect("pong")
		return time.Since(start)
	}
	redisPing := func() time.Duration {
		start := time.Now()
		if err := client.Do(ctx, client.B().Ping().Build()).Error(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for i := range 100 {
		job(fmt.Sprintf("warm-%d", i))
	}
	ops0 := redisOps(a.addr) + redisOps(bb.addr)
	var lat, rtt, wrtt []time.Duration
	b.ResetTimer()
	for i := range b.N {
		lat = append(lat, job(fmt.Sprintf("lat-%d", i)))
		rtt = append(rtt, redisPing())
		wrtt = append(wrtt, wsPing())
	}
	b.StopTimer()
	perJob := (redisOps(a.addr) + redisOps(bb.addr) - ops0) / float64(b.N)
	floor := perJob*pct(rtt, 0.5) + 2*pct(wrtt, 0.5)
	b.ReportMetric(pct(lat, 0.5), "p50_ms")
	b.ReportMetric(pct(lat, 0.99), "p99_ms")
	b.ReportMetric(floor, "floor_ms")
	b.ReportMetric(perJob, "redis-ops/job")
	b.ReportMetric(pct(lat, 0.5)/floor, "p50/floor")
}

// BenchmarkRedisWork counts what two dispatcher processes cost Redis, as
// the server counts it (INFO commandstats, the commands that scripts run
// included), with the binary's default paces: first idle (three example
// nodes on A, a session on B, no job; 10 seconds), then at a steady 150
// requests a second from the session (b.N requests). It reports the
// commands and scripts an idle instance costs a second, and the commands
// and scripts per job at that rate (the idle loops included). Run it on a
// Redis nothing else uses (KSANA_TEST_REDIS_URL):
//
//	go test -run '^$' -bench RedisWork -benchtime 3000x ./cmd/dispatcher/
func BenchmarkRedisWork(b *testing.B) {
	redis := singleRedis(testenv.RedisURL(b), randomPrefix(b))
	client := redisClient(b, redis)
	ctx := context.Background()
	dispatcherBin, nodeBin := binaries(b)
	dir := b.TempDir()
	plane := testPlane("", &redis)
	plane.Plane.OwnerTTL, plane.Plane.Inbox, plane.Plane.Fleet = 45*time.Second, scheduler.InboxConfig{Block: time.Second, ClaimMinIdle: 30 * time.Second, DeadMinIdle: time.Minute, ScanInterval: 5 * time.Second}, scheduler.FleetConfig{PresenceTTL: 45 * time.Second, RefreshInterval: 2 * time.Second}
	plane.Plane.Dispatch = scheduler.Config{}.WithDefaults().Dispatch
	a := startProc(b, dir, "a", true, dispatcherBin, "-config", writeConfig(b, dir, "a", plane))
	bb := startProc(b, dir, "b", true, dispatcherBin, "-config", writeConfig(b, dir, "b", plane))
	for i := range 3 {
		startProc(b, dir, fmt.Sprintf("n%d", i), false, nodeBin, "-url", wsURL(a.addr, "/ws/node"), "-id", fmt.Sprintf("n%d", i), "-pools", "p", "-capacity", "64", "-delay", "0", "-quiet")
	}
	storetest.Eventually(b, "fleet", 20*time.Second, func() bool { return health(bb.addr)["fleet_online"] == 3.0 })
	ws := mustDial(b, wsURL(bb.addr, "/ws/session", "session_id", "work"), "")
	stats := func() storetest.CommandStats {
		s, err := storetest.RedisCommandStats(ctx, client)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	time.Sleep(3 * time.Second) // past the start-up's steps
	s0, t0 := stats(), time.Now()
	time.Sleep(10 * time.Second)
	idle, idleFor := stats().Sub(s0), time.Since(t0)
	answered := make(chan struct{}, b.N)
	go func() {
		for {
			select {
			case m := <-ws.in:
				if m.Type == "job_result" || m.Type == "job_failed" {
					answered <- struct{}{}
				}
			case <-ws.done:
				return
			}
		}
	}()
	b.ResetTimer()
	s0 = stats()
	tick := time.NewTicker(time.Second / 150)
	for i := range b.N {
		<-tick.C
		ws.send(wire{Type: "job_request", RequestID: fmt.Sprintf("w-%d", i), Pool: "p", Payload: []byte("x")})
	}
	tick.Stop()
	for range b.N {
		select {
		case <-answered:
		case <-time.After(30 * time.Second):
			b.Fatal("requests unanswered after 30s")
		}
	}
	work := stats().Sub(s0)
	b.StopTimer()
	perSec := func(n int64) float64 { return float64(n) / idleFor.Seconds() / 2 }
	b.ReportMetric(perSec(idle.Total()), "idle-cmds/s/instance")
	b.ReportMetric(perSec(idle.Scripts()), "idle-scripts/s/instance")
	b.ReportMetric(float64(work.Total())/float64(b.N), "cmds/job")
	b.ReportMetric(float64(work.Scripts())/float64(b.N), "scripts/job")
	b.Logf("idle, two instances, %v: %v", idleFor.Round(time.Millisecond), idle)
	b.Logf("%d jobs at 150/s: %v", b.N, work)
}

// BenchmarkNodeConnMemory measures what an idle node connection costs the
// dispatcher process: one process (in memory), then 500 nodes of capacity
// 4 attached over WebSocket and registered; the process's resident memory
// (VmRSS) before and after, per connection. b.N is ignored: one round.
//
//	go test -run '^$' -bench NodeConnMemory -benchtime 1x ./cmd/dispatcher/
func BenchmarkNodeConnMemory(b *testing.B) {
	const nodes = 500
	dispatcherBin, _ := binaries(b)
	dir := b.TempDir()
	p := startProc(b, dir, "a", true, dispatcherBin, "-listen", "127.0.0.1:0")
	rss := func() int64 {
		s, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
		if err != nil {
			b.Skipf("no /proc: %v", err)
		}
		for _, l := range strings.Split(string(s), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				if err != nil {
					b.Fatal(err)
				}
				return kb << 10
			}
		}
		b.Fatal("no VmRSS")
		return 0
	}
	time.Sleep(time.Second)
	before := rss()
	for b.Loop() {
		for i := range nodes {
			w := mustDial(b, wsURL(p.addr, "/ws/node"), "")
			w.send(wire{Type: "register", NodeID: fmt.Sprintf("n%d", i), Pools: []string{"p"}, Capacity: 4})
			w.expect("registered")
		}
	}
	time.Sleep(2 * time.Second) // the fleet refreshes, goroutines settle
	after := rss()
	b.ReportMetric(float64(after-before)/nodes/1024, "KiB/conn")
	b.Logf("RSS %d MiB before, %d MiB with %d nodes", before>>20, after>>20, nodes)
}
