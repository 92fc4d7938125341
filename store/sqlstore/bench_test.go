package sqlstore

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/claim"
)

// processCPU is the CPU time this process has used (user and system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cycleCost is what one cycle cost on average.
type cycleCost struct {
	stmts, rows, bytes float64
	serverCPU, nodeCPU time.Duration
}

func (c cycleCost) report(b *testing.B) {
	b.ReportMetric(c.stmts, "stmts/cycle")
	b.ReportMetric(c.rows, "rows/cycle")
	b.ReportMetric(c.bytes, "B-to-node/cycle")
	b.ReportMetric(float64(c.serverCPU.Microseconds()), "pg-µs/cycle")
	b.ReportMetric(float64(c.nodeCPU.Microseconds()), "node-µs/cycle")
}

// measureCycles runs loop's cycles under b.Loop; between cycles, outside
// the measurement, between runs (may be nil) restores the state.
func measureCycles(b *testing.B, m *meter, loop *claim.Loop, between func()) cycleCost {
	ctx := context.Background()
	// Warm: the first cycle reads every own row in full, the second once
	// more.
	for range 2 {
		if _, err := loop.Cycle(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if between != nil {
		between()
	}
	m.take()
	var (
		sum    sample
		cycles int
		node   time.Duration
	)
	for b.Loop() {
		cpu := processCPU()
		if _, err := loop.Cycle(ctx); err != nil {
			b.Fatal(err)
		}
		node += processCPU() - cpu
		cycles++
		b.StopTimer()
		s := m.take()
		sum.stmts += s.stmts
		sum.rows += s.rows
		sum.bytes += s.bytes
		sum.serverCPU += s.serverCPU
		if between != nil {
			between()
			m.take()
		}
		b.StartTimer()
	}
	n := float64(cycles)
	return cycleCost{stmts: float64(sum.stmts) / n, rows: float64(sum.rows) / n, bytes: float64(sum.bytes) / n,
		serverCPU: sum.serverCPU / time.Duration(cycles), nodeCPU: node / time.Duration(cycles)}
}

// BenchmarkCycle measures one claim-loop cycle of node-0000 on PostgreSQL
// in a fleet where nothing changes: 1k, 10k and 100k enabled deployments
// bound evenly to 10, 100 and 1,000 active node-units, and two daemons.
// Each size runs the cycle that reads every enabled row (full, the
// baseline) and the cycle through the Viewer (view), on one connection
// whose statements, rows and received bytes are counted, and whose server
// process's CPU time is read from /proc. view reports its bytes and
// PostgreSQL CPU as fractions of full's in the same run (x-of-full).
//
// BenchmarkCycle/claim is the same at 10k and 100 with node-0000 holding
// nothing, so that it claims one deployment every cycle (handed back
// between cycles).
func BenchmarkCycle(b *testing.B) {
	for _, deps := range []int{1_000, 10_000, 100_000} {
		for _, nodes := range []int{10, 100, 1_000} {
			b.Run(fmt.Sprintf("deployments=%d/nodes=%d", deps, nodes), func(b *testing.B) {
				m := openMetered(b, backends[1])
				seedFleet(b, m.db, deps, nodes)
				var full cycleCost
				b.Run("full", func(b *testing.B) {
					full = measureCycles(b, m, newFleetLoop(b, fullOnly{m.db.Deployments()}, m.db), nil)
					full.report(b)
				})
				b.Run("view", func(b *testing.B) {
					c := measureCycles(b, m, newFleetLoop(b, m.db.Deployments(), m.db), nil)
					c.report(b)
					if full.bytes > 0 && full.serverCPU > 0 {
						b.ReportMetric(c.bytes/full.bytes, "bytes-x-of-full")
						b.ReportMetric(float64(c.serverCPU)/float64(full.serverCPU), "pg-cpu-x-of-full")
					}
				})
			})
		}
	}
	b.Run("claim/deployments=10000/nodes=100", func(b *testing.B) {
		m := openMetered(b, backends[1])
		seedFleet(b, m.db, 10_000, 100)
		unbind := func() { exec(b, m.db, "UPDATE deployment SET address = '' WHERE address = 'node-0000'") }
		unbind()
		for _, mode := range []string{"full", "view"} {
			b.Run(mode, func(b *testing.B) {
				var store claim.Store = m.db.Deployments()
				if mode == "full" {
					store = fullOnly{store}
				}
				loop := newFleetLoop(b, store, m.db)
				c := measureCycles(b, m, loop, unbind)
				c.report(b)
			})
		}
	})
}
