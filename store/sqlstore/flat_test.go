package sqlstore

import (
	"testing"
	"time"
)

// TestCycleFlatAsOthersGrow: a cycle in which nothing changed costs the
// same statements, rows and bytes (PostgreSQL) whether the deployments
// bound to the other node-units number 1,000 or 100,000 (10,000 on SQLite
// under the race detector); the cycle that reads every row grows with
// them, which shows the test can tell.
func TestCycleFlatAsOthersGrow(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("seeds 100,000 rows")
	}
	const nodes, small = 10, 1_000
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			large := 100_000
			if b.name == "sqlite" && raceEnabled {
				large = 10_000 // 100,000 inserts take minutes in instrumented SQLite
			}
			m := openMetered(t, b)
			db := m.db
			seedFleet(t, db, small, nodes)
			view := newFleetLoop(t, db.Deployments(), db)
			full := newFleetLoop(t, fullOnly{db.Deployments()}, db)
			before := steady(t, m, view, 2, 20)
			fullBefore := steady(t, m, full, 1, 1)

			// node-0000 keeps its deployments: the new ones go to the others.
			start := time.Now()
			addDeployments(t, db, small, large, 1, nodes)
			t.Logf("grew to %d deployments in %v", large, time.Since(start))
			after := steady(t, m, view, 2, 20)
			fullAfter := steady(t, m, full, 1, 1)

			t.Logf("view cycle: %d statements, %d rows, %d bytes, server CPU %v at %d deployments; %d, %d, %d, %v at %d",
				before.stmts, before.rows, before.bytes, before.serverCPU, small, after.stmts, after.rows, after.bytes, after.serverCPU, large)
			t.Logf("full cycle: %d statements, %d rows, %d bytes at %d; %d, %d, %d at %d",
				fullBefore.stmts, fullBefore.rows, fullBefore.bytes, small, fullAfter.stmts, fullAfter.rows, fullAfter.bytes, large)
			if before.stmts != after.stmts || before.rows != after.rows {
				t.Errorf("view cycle: %d statements and %d rows at %d deployments, %d and %d at %d; want the same",
					before.stmts, before.rows, small, after.stmts, after.rows, large)
			}
			// PostgreSQL: the heartbeat and the summary, the versions.
			// SQLite: the heartbeat apart.
			wantStmts := map[string]int{"postgres": 2, "sqlite": 3}[b.name]
			if before.stmts != wantStmts {
				t.Errorf("view cycle with nothing changed: %d statements, want %d", before.stmts, wantStmts)
			}
			if want := nodes + 2 + small/nodes; before.rows != want {
				t.Errorf("view cycle: %d rows, want %d: one per node-unit and one version per own row and daemon", before.rows, want)
			}
			// Counts travel as fixed-size integers, so the bytes do not move.
			if before.bytes != after.bytes {
				t.Errorf("view cycle: %d bytes at %d deployments, %d at %d; want the same", before.bytes, small, after.bytes, large)
			}
			if fullAfter.rows < (large/small)*fullBefore.rows/2 {
				t.Errorf("full cycle: %d rows at %d, %d at %d; want them to grow with the table", fullBefore.rows, small, fullAfter.rows, large)
			}
		})
	}
}
