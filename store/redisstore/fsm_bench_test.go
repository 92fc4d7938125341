package redisstore

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/fsm"
	"github.com/ksana-dev/ksana/internal/testenv"
	"github.com/redis/rueidis"
)

// BenchmarkOps measures the adapters' operations with 64 concurrent
// callers through rueidis auto-pipelining on the standalone server, next to
// the same server's rate for a trivial EVALSHA (raw_evalsha), the baseline
// the others are stated against:
//
//	go test -run '^$' -bench Ops -benchtime 2s ./store/redisstore/
//
// (without -race; the server is KSANA_TEST_REDIS_URL, default
// redis://127.0.0.1:6379).
func BenchmarkOps(b *testing.B) {
	c := newTestClient(b, []string{testenv.Addr(testenv.RedisURL(b))}, false)
	ctx := context.Background()
	callers := func(b *testing.B) {
		b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
		b.ReportAllocs()
	}
	report := func(b *testing.B) {
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	}
	var goroutine atomic.Int64

	raw := func(b *testing.B) {
		trivial := rueidis.NewLuaScript("return 1")
		key := testPrefix(b) + ":raw"
		callers(b)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := trivial.Exec(ctx, c, []string{key}, nil).Error(); err != nil {
					b.Error(err)
					return
				}
			}
		})
		report(b)
	}
	// The baseline runs first and last, to show drift on a shared machine.
	b.Run("raw_evalsha", raw)

	b.Run("fsm_apply", func(b *testing.B) {
		s, err := NewJobs(c, JobsConfig{Prefix: testPrefix(b), MaxAttempts: 1 << 30, TTL: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		callers(b)
		b.RunParallel(func(pb *testing.PB) {
			// Each caller owns a job and moves it dispatch, timeout,
			// dispatch, ...: every call is a real transition.
			id := "bench-" + strconv.FormatInt(goroutine.Add(1), 10)
			if _, _, err := openJob(ctx, s, id); err != nil {
				b.Error(err)
				return
			}
			attempt, ev := 1, fsm.Dispatch
			for pb.Next() {
				tr, err := s.ApplyJob(ctx, id, ev, attempt, "node-1")
				if err != nil || tr.Duplicate {
					b.Errorf("%s attempt %d: %v (duplicate %v)", ev, attempt, err, tr.Duplicate)
					return
				}
				attempt = tr.Job.Attempt
				if ev == fsm.Dispatch {
					ev = fsm.Timeout
				} else {
					ev = fsm.Dispatch
				}
			}
		})
		report(b)
	})

	b.Run("reserve", func(b *testing.B) {
		s, err := NewReservations(c, ReservationsConfig{Prefix: testPrefix(b)})
		if err != nil {
			b.Fatal(err)
		}
		callers(b)
		b.RunParallel(func(pb *testing.PB) {
			// Each caller owns a node of capacity 8 and reserves for 8
			// jobs in turn: after the first round every call renews.
			node := "node-" + strconv.FormatInt(goroutine.Add(1), 10)
			for i := 0; pb.Next(); i++ {
				if err := s.Reserve(ctx, node, strconv.Itoa(i%8), 8, time.Minute); err != nil {
					b.Error(err)
					return
				}
			}
		})
		report(b)
	})

	b.Run("raw_evalsha_again", raw)
}

// BenchmarkOpsVsRaw states each operation as a ratio to the raw rate
// measured interleaved with it: every round runs 2,000 trivial EVALSHA
// calls and then 2,000 calls of the operation, both with 64 concurrent
// callers, so that load from other processes on a shared machine weighs on
// both alike. The op/raw metric is the operation's rate over the raw rate:
//
//	go test -run '^$' -bench OpsVsRaw -benchtime 100x ./store/redisstore/
func BenchmarkOpsVsRaw(b *testing.B) {
	const callers, perRound = 64, 2000
	c := newTestClient(b, []string{testenv.Addr(testenv.RedisURL(b))}, false)
	ctx := context.Background()
	trivial := rueidis.NewLuaScript("return 1")
	rawKey := testPrefix(b) + ":raw"

	raw := make([]func() error, callers)
	for w := range raw {
		raw[w] = func() error { return trivial.Exec(ctx, c, []string{rawKey}, nil).Error() }
	}
	compare := func(b *testing.B, op []func() error) {
		var tRaw, tOp time.Duration
		for b.Loop() {
			tRaw += runCalls(b, perRound, raw)
			tOp += runCalls(b, perRound, op)
		}
		b.ReportMetric(float64(tRaw)/float64(tOp), "op/raw")
		b.ReportMetric(float64(b.N*perRound)/tOp.Seconds(), "ops/s")
		b.ReportMetric(float64(b.N*perRound)/tRaw.Seconds(), "raw-ops/s")
	}

	b.Run("fsm_apply", func(b *testing.B) {
		s, err := NewJobs(c, JobsConfig{Prefix: testPrefix(b), MaxAttempts: 1 << 30, TTL: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		op := make([]func() error, callers)
		for w := range op {
			id := "bench-" + strconv.Itoa(w)
			if _, _, err := openJob(ctx, s, id); err != nil {
				b.Fatal(err)
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
		compare(b, op)
	})
	// reserve renews the reservations of a full node (8 jobs in turn on a
	// capacity of 8); reserve_new adds a new job every call.
	reserveBench := func(b *testing.B, jobs, capacity int) {
		s, err := NewReservations(c, ReservationsConfig{Prefix: testPrefix(b)})
		if err != nil {
			b.Fatal(err)
		}
		op := make([]func() error, callers)
		for w := range op {
			node, i := "node-"+strconv.Itoa(w), 0
			op[w] = func() error {
				i++
				return s.Reserve(ctx, node, strconv.Itoa(i%jobs), capacity, time.Minute)
			}
		}
		compare(b, op)
	}
	b.Run("reserve", func(b *testing.B) { reserveBench(b, 8, 8) })
	b.Run("reserve_new", func(b *testing.B) {
		reserveBench(b, math.MaxInt, 1<<30)
	})
}
