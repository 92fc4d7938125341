package dispatchpeers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/ksana-dev/ksana/internal/testenv"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/redisstore"
	"github.com/ksana-dev/ksana/store/storetest"
)

const (
	inFlight = 64   // jobs in flight in each system
	round    = 2000 // jobs per round; rounds of the two systems alternate
)

func randomName(prefix string) string {
	var b [6]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// BenchmarkPeers: see the package documentation.
func BenchmarkPeers(b *testing.B) {
	url := testenv.RedisURL(b)
	addr := testenv.Addr(url)
	ctx := context.Background()

	// asynq: a client enqueues, a server with inFlight workers handles.
	queue := randomName("ksana-bench-")
	prefix := randomName("ksana-bench-")
	// Both systems' keys go when the benchmark ends (the cleanups run
	// last to first: the keys are deleted, then the client closed).
	keys, err := redisstore.NewClient(redisstore.ClientConfig{URL: url})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(keys.Close)
	storetest.CleanupRedisKeys(b, prefix, keys)
	storetest.CleanupRedisKeys(b, "asynq:{"+queue+"}", keys)
	opt := asynq.RedisClientOpt{Addr: addr}
	client := asynq.NewClient(opt)
	defer client.Close()
	var handled atomic.Int64
	asynqDone := make(chan struct{}, round)
	// TaskCheckInterval: asynq's processor sleeps this long (default 1s)
	// when it finds its queues empty, as it does at the start of each
	// round; 10ms keeps that out of the figure without polling Redis hard
	// during the Dispatcher's rounds.
	srv := asynq.NewServer(opt, asynq.Config{
		Concurrency: inFlight, Queues: map[string]int{queue: 1}, LogLevel: asynq.ErrorLevel,
		TaskCheckInterval: 10 * time.Millisecond,
	})
	mux := asynq.NewServeMux()
	mux.HandleFunc("bench", func(context.Context, *asynq.Task) error {
		handled.Add(1)
		asynqDone <- struct{}{}
		return nil
	})
	if err := srv.Start(mux); err != nil {
		b.Fatal(err)
	}
	defer func() {
		srv.Shutdown() // the last server, started again after the count below
		insp := asynq.NewInspector(opt)
		insp.DeleteQueue(queue, true)
		insp.Close()
	}()
	asynqRound := func(n int) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		var next atomic.Int64
		for range inFlight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(n) {
					if _, err := client.Enqueue(asynq.NewTask("bench", []byte("x")), asynq.Queue(queue)); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		for range n {
			<-asynqDone
		}
		took := time.Since(start)
		wg.Wait()
		return took
	}

	// The Dispatcher: instance A holds the node, instance B the session.
	rc, err := redisstore.NewClient(redisstore.ClientConfig{URL: url})
	if err != nil {
		b.Fatal(err)
	}
	defer rc.Close()
	cfg := storetest.DispatchTestConfig("x")
	cfg.Dispatch.AckTimeout = 30 * time.Second // a loaded machine must not fail attempts over
	cfg.Dispatch.DefaultCapacity = scheduler.MaxCapacity
	p := storetest.NewTestPlane(b, storetest.DispatcherHarness{Stores: func() scheduler.Stores {
		st, err := redisstore.NewStores(rc, cfg, redisstore.StoresConfig{KeyPrefix: prefix})
		if err != nil {
			b.Fatal(err)
		}
		return st
	}})
	slow := func(c *scheduler.Config) { c.Dispatch.AckTimeout = 30 * time.Second }
	a := p.Start("inst-a", false, slow)
	d := p.Start("inst-b", false, slow)
	storetest.NewTestNode(scheduler.NodeInfo{NodeID: "n1", Capacity: scheduler.MaxCapacity}).Attach(b, a)
	sess := &session{done: make(chan struct{}, round)}
	if err := d.AttachSession(ctx, "s1", sess); err != nil {
		b.Fatal(err)
	}
	storetest.Eventually(b, "fleet", 10*time.Second, func() bool { f := d.Fleet(); return len(f) == 1 && f[0].Online })
	var seq atomic.Int64
	dispatchRound := func(n int) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		var next atomic.Int64
		for range inFlight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(n) {
					req := scheduler.Request{RequestID: fmt.Sprintf("r%d", seq.Add(1)), Payload: []byte("x")}
					if _, err := d.Submit(ctx, "s1", req); err != nil {
						b.Error(err)
						return
					}
					<-sess.done // one in flight per caller: a round trip
				}
			}()
		}
		wg.Wait()
		return time.Since(start)
	}

	// Warm both up, then alternate rounds.
	asynqRound(round / 4)
	dispatchRound(round / 4)
	var tAsynq, tDisp time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		tAsynq += asynqRound(n)
		tDisp += dispatchRound(n)
	}
	b.StopTimer()
	if sess.failed.Load() > 0 {
		b.Errorf("%d requests answered job_failed", sess.failed.Load())
	}
	asynqRate := float64(b.N) / tAsynq.Seconds()
	dispRate := float64(b.N) / tDisp.Seconds()
	b.ReportMetric(asynqRate, "asynq_tasks/s")
	b.ReportMetric(dispRate, "dispatcher_jobs/s")
	b.ReportMetric(dispRate/asynqRate, "dispatcher/asynq")

	// The server's work, counted as it counts it (INFO commandstats, the
	// commands that scripts run included), for each system alone: asynq's
	// server is stopped while a round of the Dispatcher is counted, and
	// the Dispatchers while a round of asynq is (each one's background
	// loops are part of its cost).
	srv.Shutdown()
	stats := func() storetest.CommandStats {
		s, err := storetest.RedisCommandStats(ctx, rc)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	s0 := stats()
	dispatchRound(round)
	dispCmds := stats().Sub(s0)
	p.StopAll()
	srv = asynq.NewServer(opt, asynq.Config{
		Concurrency: inFlight, Queues: map[string]int{queue: 1}, LogLevel: asynq.ErrorLevel,
		TaskCheckInterval: 10 * time.Millisecond,
	})
	if err := srv.Start(mux); err != nil {
		b.Fatal(err)
	}
	asynqRound(round / 4) // the new server's start-up is not counted
	s0 = stats()
	asynqRound(round)
	asynqCmds := stats().Sub(s0)
	per := func(n int64) float64 { return float64(n) / round }
	b.ReportMetric(per(dispCmds.Total()), "dispatcher_cmds/job")
	b.ReportMetric(per(dispCmds.Scripts()), "dispatcher_scripts/job")
	b.ReportMetric(per(asynqCmds.Total()), "asynq_cmds/task")
	b.ReportMetric(per(asynqCmds.Scripts()), "asynq_scripts/task")
	b.Logf("commands of %d Dispatcher jobs: %v", round, dispCmds)
	b.Logf("commands of %d asynq tasks: %v", round, asynqCmds)
}

// session counts the answers a Dispatcher hands it.
type session struct {
	done   chan struct{}
	failed atomic.Int64
}

func (s *session) Send(_ context.Context, m scheduler.Envelope) error {
	if m.Type == scheduler.TypeJobFailed {
		s.failed.Add(1)
	}
	s.done <- struct{}{}
	return nil
}
