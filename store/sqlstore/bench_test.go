package sqlstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/claim/claimtest"
)

// BenchmarkCycle measures one claim-loop cycle on PostgreSQL with 10,000
// deployments and 100 active node-units, the measured node being the least
// loaded so that every cycle claims one deployment. Each statement sent to
// the server is counted through a recording driver: stmts/cycle. The
// baseline sub-benchmark is the cycle's one unavoidable statement alone,
// reading the enabled deployments.
func BenchmarkCycle(b *testing.B) {
	const deployments, nodes = 10_000, 100
	ctx := context.Background()
	db, rec := openRecorded(b, backends[1])
	seed := fmt.Sprintf(`INSERT INTO deployment (id, enabled, command, address)
		SELECT 'dep-' || lpad(i::text, 5, '0'), TRUE, '/bin/true',
			CASE WHEN i < %d THEN 'node-' || lpad((i %% %d + 1)::text, 3, '0') ELSE '' END
		FROM generate_series(0, %d) AS i`, deployments-nodes, nodes-1, deployments-1)
	exec(b, db, seed)
	m := db.Membership()
	for i := range nodes {
		if err := m.Heartbeat(ctx, claim.NodeUnit{Address: fmt.Sprintf("node-%03d", i)}); err != nil {
			b.Fatal(err)
		}
	}
	exec(b, db, "ANALYZE deployment")
	exec(b, db, "ANALYZE node_unit")

	b.Run("baseline=list", func(b *testing.B) {
		s := db.Deployments()
		for b.Loop() {
			ds, err := s.Deployments(ctx)
			if err != nil || len(ds) != deployments {
				b.Fatalf("Deployments = %d rows, %v", len(ds), err)
			}
		}
	})

	b.Run("cycle", func(b *testing.B) {
		runner := claimtest.NewRunner()
		loop, err := claim.New(db.Deployments(), m, runner, nil, claim.Config{
			Address: "node-000", Interval: time.Second, MembershipTTL: time.Hour,
		})
		if err != nil {
			b.Fatal(err)
		}
		rec.take()
		var stmts, cycles, claims int
		for b.Loop() {
			r, err := loop.Cycle(ctx)
			if err != nil {
				b.Fatal(err)
			}
			cycles++
			claims += len(r.Claimed)
			b.StopTimer()
			stmts += len(rec.take())
			// Hand the claimed deployment back, so the node stays least
			// loaded and the next cycle claims again.
			exec(b, db, "UPDATE deployment SET address = '' WHERE address = 'node-000'")
			rec.take()
			b.StartTimer()
		}
		if claims != cycles {
			b.Fatalf("%d claims in %d cycles, want one per cycle", claims, cycles)
		}
		perCycle := float64(stmts) / float64(cycles)
		if perCycle > 3 {
			b.Errorf("%.2f statements per cycle with nothing lost, want at most 3", perCycle)
		}
		b.ReportMetric(perCycle, "stmts/cycle")
	})
}
