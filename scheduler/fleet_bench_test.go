package scheduler_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/storetest"
)

// cpuTime is the processor time this process used so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFleetCPU is one Dispatcher over the in-memory stores with 100
// and with 10,000 nodes attached (10 pools, capacity 64, each answering at
// once) and one session that submits rounds of 200 requests to one pool
// and waits for their answers. It reports the processor time of the
// process per job: cpu-µs/job counts everything in the rounds, and
// net-cpu-µs/job takes off what the same Dispatcher uses idle over as
// long (its loops over the fleet: presence, snapshots), measured over 3s
// just before. ratio-10k/100 is net-cpu-µs/job at 10,000 nodes over that at
// 100, in the same run; the goal is at most 1.2.
func BenchmarkFleetCPU(b *testing.B) {
	const round = 200
	net := map[int]float64{}
	for _, n := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			st, err := scheduler.NewMemStores(storetest.DispatchTestConfig("a"))
			if err != nil {
				b.Fatal(err)
			}
			p := storetest.NewTestPlane(b, storetest.DispatcherHarness{Stores: func() scheduler.Stores { return st }})
			d := p.Start("a", false, func(c *scheduler.Config) {
				c.Fleet = scheduler.FleetConfig{} // the default refresh and presence, not the suite's fast ones
			})
			for i := range n {
				node := storetest.NewTestNode(scheduler.NodeInfo{NodeID: fmt.Sprintf("n%05d", i), Capacity: 64,
					Pools: []string{fmt.Sprintf("p%d", i%10)}, Models: []string{"m"}})
				node.Attach(b, d)
			}
			s := &countingSession{answered: make(chan struct{}, round)}
			if err := d.AttachSession(context.Background(), "s", s); err != nil {
				b.Fatal(err)
			}
			seq := 0
			submit := func() {
				for range round {
					seq++
					if _, err := d.Submit(context.Background(), "s", scheduler.Request{RequestID: fmt.Sprintf("r%d", seq), Pool: "p3", Model: "m", Payload: []byte("x")}); err != nil {
						b.Fatal(err)
					}
				}
				timeout := time.After(time.Minute)
				for range round {
					select {
					case <-s.answered:
					case <-timeout:
						b.Fatal("a round not answered within a minute")
					}
				}
				if f := s.failed.Load(); f > 0 {
					b.Fatalf("%d jobs failed", f)
				}
			}
			submit() // warm up
			// What the Dispatcher does idle, per second, over a few of its
			// fleet refreshes.
			const idle = 3 * time.Second
			c0 := cpuTime()
			time.Sleep(idle)
			idlePerSec := float64(cpuTime()-c0) / idle.Seconds()
			jobs := 0
			cpu0, began := cpuTime(), time.Now()
			for b.Loop() {
				submit()
				jobs += round
			}
			busy, took := cpuTime()-cpu0, time.Since(began)
			per := float64(busy.Microseconds()) / float64(jobs)
			net[n] = (float64(busy.Nanoseconds()) - idlePerSec*took.Seconds()) / 1e3 / float64(jobs)
			b.ReportMetric(per, "cpu-µs/job")
			b.ReportMetric(net[n], "net-cpu-µs/job")
			b.ReportMetric(idlePerSec/1e6, "idle-cpu-ms/s")
			if n > 100 && net[100] > 0 {
				b.ReportMetric(net[n]/net[100], "ratio-10k/100")
			}
		})
	}
}

// countingSession is a session that counts its answers, without keeping
// them: the benchmark's own cost stays flat.
type countingSession struct {
	answered chan struct{}
	failed   atomic.Int64
}

func (s *countingSession) Send(_ context.Context, m scheduler.Envelope) error {
	switch m.Type {
	case scheduler.TypeJobResult:
		s.answered <- struct{}{}
	case scheduler.TypeJobFailed:
		s.failed.Add(1)
		s.answered <- struct{}{}
	}
	return nil
}
