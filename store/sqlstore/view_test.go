package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/claim/claimtest"
)

var viewT0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// endpointProbe answers from a table by the node's usage endpoint, so a
// node read without its endpoint fails its probe.
type endpointProbe map[string]claim.Usage

func (p endpointProbe) Usage(ctx context.Context, n claim.NodeUnit) (claim.Usage, error) {
	u, ok := p[n.UsageEndpoint]
	if !ok {
		return claim.Usage{}, fmt.Errorf("no usage at endpoint %q of %s", n.UsageEndpoint, n.Address)
	}
	return u, nil
}

// TestViewLoopResourceUsage: under resource_usage a cycle through the view
// probes every active node at its usage endpoint (the view reads them
// only for this policy), commits before probing, and then reads its
// candidate: the least loaded node claims one deployment per cycle, in
// candidate order, and the other none.
func TestViewLoopResourceUsage(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := b.open(t)
			for i := range 3 {
				exec(t, db, "INSERT INTO deployment (id, enabled, command, created_at, updated_at) VALUES (?, TRUE, 'x', ?, ?)",
					fmt.Sprintf("d%d", i), db.d.timeArg(viewT0.Add(time.Duration(i)*time.Minute)), db.d.timeArg(viewT0.Add(time.Duration(i)*time.Minute)))
			}
			probe := endpointProbe{"http://n1/usage": {CPUPercent: 5}, "http://n2/usage": {CPUPercent: 50}}
			newLoop := func(addr string) *claim.Loop {
				l, err := claim.New(db.Deployments(), db.Membership(), claimtest.NewRunner(), probe, claim.Config{
					Address: addr, UsageEndpoint: "http://" + addr + "/usage", MembershipTTL: time.Hour,
					Policy: claim.ResourceUsagePolicy(claim.DefaultWeights),
				})
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			n1, n2 := newLoop("n1"), newLoop("n2")
			if err := db.Membership().Heartbeat(ctx, claim.NodeUnit{Address: "n2", UsageEndpoint: "http://n2/usage"}); err != nil {
				t.Fatal(err)
			}
			var got [][]string
			for range 4 {
				for _, l := range []*claim.Loop{n1, n2} {
					r, err := l.Cycle(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if r.ProbeFailures != 0 {
						t.Errorf("%d probes failed, want none: every active node read with its endpoint", r.ProbeFailures)
					}
					got = append(got, r.Claimed)
				}
			}
			want := [][]string{{"d0"}, nil, {"d1"}, nil, {"d2"}, nil, nil, nil}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("claims per cycle (n1, n2, n1, ...) mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMigrateBackfillsAddressCounts: a deployment table of the old schema
// with bound rows migrates with the counts per address filled in, and the
// counts then follow writes made without this package.
func TestMigrateBackfillsAddressCounts(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			u := b.url(t)
			rawExec(t, b.name, u, legacyTable[b.name],
				`INSERT INTO deployment (id, command, address, enabled) VALUES ('a1', 'x', 'node-a', TRUE)`,
				`INSERT INTO deployment (id, command, address, enabled) VALUES ('a2', 'x', 'node-a', TRUE)`,
				`INSERT INTO deployment (id, command, address, enabled) VALUES ('a3', 'x', 'node-a', FALSE)`,
				`INSERT INTO deployment (id, command, address, enabled) VALUES ('b1', 'x', 'node-b', TRUE)`,
				`INSERT INTO deployment (id, command, address, enabled) VALUES ('f1', 'x', '', TRUE)`,
			)
			db := mustOpen(t, u)
			bound := func() map[string]int {
				t.Helper()
				v, err := db.Deployments().View(ctx, claim.NodeUnit{Address: "me"}, time.Minute, false)
				if err != nil {
					t.Fatal(err)
				}
				defer v.Close()
				return v.Summary().Bound
			}
			if diff := cmp.Diff(map[string]int{"node-a": 2, "node-b": 1}, bound()); diff != "" {
				t.Errorf("counts after migration mismatch (-want +got):\n%s", diff)
			}
			rawExec(t, b.name, u,
				`UPDATE deployment SET address = 'node-b' WHERE address = 'node-a'`,
				`DELETE FROM deployment WHERE id = 'f1'`,
				`INSERT INTO deployment (id, command, address, enabled) VALUES ('c1', 'x', 'node-c', TRUE)`,
			)
			if diff := cmp.Diff(map[string]int{"node-b": 3, "node-c": 1}, bound()); diff != "" {
				t.Errorf("counts after writes by hand mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestViewReportsInvalidRowsEveryCycle: through the view, a row of invalid
// type and a daemon with an address (bound to another node-unit) are
// reported in every cycle's Problems, also in the cycles that read no row
// in full.
func TestViewReportsInvalidRowsEveryCycle(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			m := openMetered(t, b)
			exec(t, m.db, `INSERT INTO deployment (id, type, enabled, address, command) VALUES
				('bad', 'cronjob', TRUE, 'elsewhere', 'x'), ('dm', 'daemon', TRUE, 'elsewhere', 'x'), ('ok', 'deployment', TRUE, 'elsewhere', 'x')`)
			if err := m.db.Membership().Heartbeat(ctx, claim.NodeUnit{Address: "elsewhere"}); err != nil {
				t.Fatal(err)
			}
			loop, err := claim.New(m.db.Deployments(), m.db.Membership(), claimtest.NewRunner(), nil, claim.Config{Address: "me", MembershipTTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 4 {
				m.take()
				r, err := loop.Cycle(ctx)
				if err != nil {
					t.Fatal(err)
				}
				s := m.take()
				var codes []string
				for _, p := range r.Problems {
					var e *claim.Error
					if errors.As(p, &e) {
						codes = append(codes, string(e.Code)+" "+e.ID)
					}
				}
				slices.Sort(codes)
				want := []string{"ERR_DAEMON_ADDRESS_SET dm", "ERR_INVALID_TYPE bad"}
				if diff := cmp.Diff(want, codes); diff != "" {
					t.Errorf("cycle %d (%d statements): problems mismatch (-want +got):\n%s", i, s.stmts, diff)
				}
				if i >= 2 && s.rows != 2+2 { // me and elsewhere with their counts, two versions
					t.Errorf("cycle %d: %d rows read, want 4 (nothing in full)", i, s.rows)
				}
			}
		})
	}
}
