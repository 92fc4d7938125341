package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/ksana-dev/ksana/cron"
)

// seedPlanRuns writes 4 jobs (p0 to p3) with 60 runs each, one a minute
// at the same times: slot k of job j failed when (j + k) % 5 is 0, missed
// when it is 1, else succeeded; two runs of p0 are claimed and not
// finished (an empty status). It returns every finished run, newest first.
func seedPlanRuns(t *testing.T, db *DB) []cron.Run {
	t.Helper()
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var all []cron.Run
	for j := range 4 {
		exec(t, db, `INSERT INTO ksana_job (id, seq, config) VALUES (?, ?, '{}')`, fmt.Sprintf("p%d", j), j+1)
		for k := range 60 {
			st := cron.StatusSuccess
			switch (j + k) % 5 {
			case 0:
				st = cron.StatusFailed
			case 1:
				st = cron.StatusMissed
			}
			if j == 0 && k >= 58 {
				st = ""
			}
			r := cron.Run{ID: fmt.Sprintf("r%x-%d", (k*7919+j*31)%997, j), JobID: fmt.Sprintf("p%d", j),
				ScheduledAt: base.Add(time.Duration(k) * time.Minute), Status: st}
			exec(t, db, `INSERT INTO ksana_run (id, job_id, slot, scheduled_at, status) VALUES (?, ?, ?, ?, ?)`,
				r.ID, r.JobID, true, r.ScheduledAt.UnixNano(), string(st))
			if st != "" {
				all = append(all, r)
			}
		}
	}
	exec(t, db, `ANALYZE ksana_run`)
	slices.SortFunc(all, func(a, b cron.Run) int {
		if c := b.ScheduledAt.Compare(a.ScheduledAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return all
}

// planQueries are the shapes of GET /runs with a status filter, with the
// index each (job, status) read must use.
var planQueries = []struct {
	name  string
	q     cron.RunQuery
	index string
}{
	{"job_status", cron.RunQuery{JobIDs: []string{"p1"}, Statuses: []cron.Status{cron.StatusFailed}}, "ksana_run_job_status_time_idx"},
	{"status", cron.RunQuery{Statuses: []cron.Status{cron.StatusFailed}}, "ksana_run_status_time_idx"},
	{"jobs3_status", cron.RunQuery{JobIDs: []string{"p0", "p2", "p3"}, Statuses: []cron.Status{cron.StatusFailed}}, "ksana_run_job_status_time_idx"},
	{"jobs2_statuses2_dup", cron.RunQuery{JobIDs: []string{"p0", "p2", "p0"}, Statuses: []cron.Status{cron.StatusFailed, cron.StatusMissed, cron.StatusFailed}}, "ksana_run_job_status_time_idx"},
	{"statuses2", cron.RunQuery{Statuses: []cron.Status{cron.StatusFailed, cron.StatusMissed}}, "ksana_run_status_time_idx"},
	{"jobs2", cron.RunQuery{JobIDs: []string{"p0", "p3"}}, "ksana_run_job_time_idx"},
}

// TestQueryRunsPlan checks that each shape of a status-filtered history
// page is read along the index of its filters, from the first page and
// from a cursor, and that its pages hold the runs of the filter in the
// history's order, none twice.
func TestQueryRunsPlan(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			db := b.open(t)
			jobs := mustJobs(t, db, JobsConfig{})
			all := seedPlanRuns(t, db)
			ctx := context.Background()
			// SQLite has one connection: hold none.
			var conn sqlx.QueryerContext = db.x
			if db.d == postgresDialect {
				c, err := db.x.Connx(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				conn = c
				// A small table: make the planner cost a scan as on a large one.
				for _, s := range []string{"SET enable_seqscan = off", "SET enable_bitmapscan = off"} {
					if _, err := c.ExecContext(ctx, s); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, c := range planQueries {
				t.Run(c.name, func(t *testing.T) {
					for _, after := range []cron.RunCursor{{}, all[37].Cursor()} {
						q := c.q
						q.After = after
						text, args, err := jobs.runsQuery(q, q.PageSize()+1)
						if err != nil {
							t.Fatal(err)
						}
						var plan string
						if db.d == postgresDialect {
							var out string
							if err := sqlx.GetContext(ctx, conn, &out, `EXPLAIN (FORMAT JSON) `+text, args...); err != nil {
								t.Fatal(err)
							}
							var plans []struct{ Plan planNode }
							if err := json.Unmarshal([]byte(out), &plans); err != nil {
								t.Fatal(err)
							}
							plan = plans[0].Plan.String()
							if strings.Contains(plan, "Seq Scan") || strings.Count(plan, "Index Scan "+c.index) != arms(q) {
								t.Errorf("after %v: plan %s, want %d index scans on %s", after, plan, arms(q), c.index)
							}
						} else {
							var rows []struct {
								ID      int    `db:"id"`
								Parent  int    `db:"parent"`
								NotUsed int    `db:"notused"`
								Detail  string `db:"detail"`
							}
							if err := sqlx.SelectContext(ctx, conn, &rows, `EXPLAIN QUERY PLAN `+text, args...); err != nil {
								t.Fatal(err)
							}
							var n int
							var lines []string
							for _, r := range rows {
								lines = append(lines, r.Detail)
								if strings.HasPrefix(r.Detail, "SEARCH ksana_run USING INDEX "+c.index+" ") {
									n++
								}
								if strings.HasPrefix(r.Detail, "SCAN ksana_run") {
									n = -1000
								}
							}
							plan = strings.Join(lines, "; ")
							if n != arms(q) {
								t.Errorf("after %v: plan %s, want %d searches of %s", after, plan, arms(q), c.index)
							}
						}
					}
					// Pages of 7: the runs of the filter, in order.
					var want, got []string
					for _, r := range all {
						if (len(c.q.JobIDs) == 0 || slices.Contains(c.q.JobIDs, r.JobID)) &&
							(len(c.q.Statuses) == 0 || slices.Contains(c.q.Statuses, r.Status)) {
							want = append(want, r.ID)
						}
					}
					q := c.q
					q.Limit = 7
					for pages := 0; ; pages++ {
						if pages > 100 {
							t.Fatal("no end of pages")
						}
						page, next, err := jobs.QueryRuns(ctx, q)
						if err != nil {
							t.Fatal(err)
						}
						for _, r := range page {
							got = append(got, r.ID)
						}
						if next.IsZero() {
							break
						}
						q.After = next
					}
					if !slices.Equal(got, want) {
						t.Errorf("pages hold %v, want %v", got, want)
					}
				})
			}
		})
	}
}

// arms returns the reads of one (job, status) pair that a page of q takes.
func arms(q cron.RunQuery) int {
	var j, s []string
	for _, v := range q.JobIDs {
		if !slices.Contains(j, v) {
			j = append(j, v)
		}
	}
	for _, v := range q.Statuses {
		if !slices.Contains(s, string(v)) {
			s = append(s, string(v))
		}
	}
	return max(len(j), 1) * max(len(s), 1)
}
