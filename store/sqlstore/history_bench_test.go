package sqlstore

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// historyBenchBase is the first slot of the seeded history.
var historyBenchBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// historyQueries are the pages BenchmarkQueryRuns asks for, over 10,000
// jobs with 100 runs each, one a minute, every job at the same times (so
// that 10,000 runs tie on each scheduled_at): a tenth failed, a tenth
// missed (downtime), the rest success.
func historyQueries(mid cron.RunCursor) []struct {
	name string
	q    cron.RunQuery
} {
	return []struct {
		name string
		q    cron.RunQuery
	}{
		{"newest", cron.RunQuery{}},
		{"job", cron.RunQuery{JobIDs: []string{"j04242"}}},
		{"jobs3", cron.RunQuery{JobIDs: []string{"j00001", "j05000", "j09999"}}},
		{"status", cron.RunQuery{Statuses: []cron.Status{cron.StatusFailed}}},
		{"window", cron.RunQuery{Since: historyBenchBase.Add(40 * time.Minute), Until: historyBenchBase.Add(50 * time.Minute)}},
		{"job+status+window", cron.RunQuery{JobIDs: []string{"j04240"}, Statuses: []cron.Status{cron.StatusFailed},
			Since: historyBenchBase.Add(10 * time.Minute), Until: historyBenchBase.Add(90 * time.Minute)}},
		{"deep_page", cron.RunQuery{After: mid}},
	}
}

// BenchmarkQueryRuns measures a page (50 runs) of the history across
// jobs over 1M run rows on PostgreSQL, with each filter, against a
// baseline in the same run: the read of one run by its primary key (one
// round trip). Goal: every page under 50 ms.
//
//	go test -run XXX -bench QueryRuns -benchtime 200x ./store/sqlstore/
func BenchmarkQueryRuns(b *testing.B) {
	db := openTestPostgres(b)
	jobs := mustJobs(b, db, JobsConfig{})
	ctx := context.Background()
	start := time.Now()
	// Seeded by the server (generate_series): 10,000 jobs, 1M runs.
	seedRuns(b, db,
		`INSERT INTO ksana_job (id, config) SELECT 'j' || lpad(g::text, 5, '0'), '{}' FROM generate_series(0, 9999) AS g`,
		`INSERT INTO ksana_run (id, job_id, slot, scheduled_at, triggered_at, finished_at, status, attempts, http_status, error, latency, reason, slots)
		SELECT md5(g::text), 'j' || lpad((g % 10000)::text, 5, '0'), TRUE, ?::bigint + (g / 10000) * 60000000000, ?::bigint + (g / 10000) * 60000000000 + 1000000,
			?::bigint + (g / 10000) * 60000000000 + 50000000,
			CASE g % 10 WHEN 0 THEN 'failed' WHEN 1 THEN 'missed' ELSE 'success' END,
			CASE g % 10 WHEN 1 THEN 0 ELSE 1 END, CASE g % 10 WHEN 0 THEN 503 WHEN 1 THEN 0 ELSE 200 END,
			CASE g % 10 WHEN 0 THEN 'http 503' ELSE '' END, 49000000,
			CASE g % 10 WHEN 1 THEN 'downtime' ELSE '' END, CASE g % 10 WHEN 1 THEN 4 ELSE 0 END
		FROM generate_series(0, 999999) AS g`, historyBenchBase.UnixNano(), historyBenchBase.UnixNano(), historyBenchBase.UnixNano())
	b.Logf("seeded 1M runs in %v", time.Since(start).Round(time.Millisecond))
	var n int
	if err := db.x.GetContext(ctx, &n, `SELECT count(*) FROM ksana_run`); err != nil || n != 1_000_000 {
		b.Fatalf("%d runs seeded, %v", n, err)
	}
	mid := cron.RunCursor{ScheduledAt: historyBenchBase.Add(50 * time.Minute), RunID: "8"}
	b.Run("baseline_one_row_by_id", func(b *testing.B) {
		for b.Loop() {
			var id string
			if err := db.SQL().QueryRowContext(ctx, `SELECT id FROM ksana_run WHERE seq = $1`, 500000).Scan(&id); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, c := range historyQueries(mid) {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				runs, _, err := jobs.QueryRuns(ctx, c.q)
				if err != nil {
					b.Fatal(err)
				}
				if len(runs) == 0 {
					b.Fatal("an empty page")
				}
			}
		})
	}
}

// seedRuns fills ksana_run in a few statements run by the server: jobs,
// then runs (both written with ? placeholders). The indexes of ksana_run
// (but the primary key's and the run id's), and on PostgreSQL its
// constraints too, are dropped meanwhile and made again after, each in
// one pass; then the table is analyzed.
func seedRuns(b *testing.B, db *DB, jobs, runs string, args ...any) {
	b.Helper()
	ctx := context.Background()
	conn, err := db.x.Connx(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	run := func(q string, args ...any) {
		if _, err := conn.ExecContext(ctx, db.d.sql(q), args...); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	type def struct {
		Name string `db:"name"`
		Def  string `db:"def"`
	}
	var cons, defs []def
	if db.d == postgresDialect {
		if err := conn.SelectContext(ctx, &cons, `SELECT conname AS name, pg_get_constraintdef(oid) AS def FROM pg_constraint
			WHERE conrelid = 'ksana_run'::regclass AND contype <> 'p'`); err != nil {
			b.Fatal(err)
		}
		for _, c := range cons {
			run(`ALTER TABLE ksana_run DROP CONSTRAINT ` + c.Name)
		}
		if err := conn.SelectContext(ctx, &defs, `SELECT indexname AS name, indexdef AS def FROM pg_indexes
			WHERE schemaname = current_schema() AND tablename = 'ksana_run' AND indexname <> 'ksana_run_pkey'`); err != nil {
			b.Fatal(err)
		}
		run(`SET maintenance_work_mem = '256MB'`)
		defer run(`RESET maintenance_work_mem`)
	} else {
		if err := conn.SelectContext(ctx, &defs, `SELECT name, sql AS def FROM sqlite_master
			WHERE type = 'index' AND tbl_name = 'ksana_run' AND sql IS NOT NULL`); err != nil {
			b.Fatal(err)
		}
		// The foreign key is checked by the insert of the jobs first.
		run(`PRAGMA foreign_keys = OFF`)
		run(`PRAGMA cache_size = -262144`)
		defer run(`PRAGMA foreign_keys = ON`)
		defer run(`PRAGMA cache_size = -2000`)
	}
	for _, d := range defs {
		run(`DROP INDEX ` + d.Name)
	}
	run(jobs)
	run(runs, args...)
	for _, d := range defs {
		run(d.Def)
	}
	for _, c := range cons {
		run(`ALTER TABLE ksana_run ADD CONSTRAINT ` + c.Name + ` ` + c.Def)
	}
	run(`ANALYZE ksana_run`)
}

// The history of BenchmarkHistoryStatus: 200 jobs (j000 to j199) with
// 5,000 runs each, one a minute, every job at the same times (200 runs
// tie on each scheduled_at); job j's slot k failed when (j + k) % 20 is
// 0 (5%: 250 runs a job, 50,000 in all), missed when it is 1, else
// succeeded.
const (
	historyJobs   = 200
	historyPerJob = 5000
	historyPages  = 5 // pages read from the start, following the cursor
	historyRunsPG = `SELECT md5(g::text), 'j' || lpad((g % 200)::text, 3, '0'), TRUE, ?::bigint + (g / 200) * 60000000000, ?::bigint + (g / 200) * 60000000000 + 1000000,
			?::bigint + (g / 200) * 60000000000 + 50000000,
			CASE (g % 200 + g / 200) % 20 WHEN 0 THEN 'failed' WHEN 1 THEN 'missed' ELSE 'success' END,
			CASE (g % 200 + g / 200) % 20 WHEN 1 THEN 0 ELSE 1 END, CASE (g % 200 + g / 200) % 20 WHEN 0 THEN 503 WHEN 1 THEN 0 ELSE 200 END,
			CASE (g % 200 + g / 200) % 20 WHEN 0 THEN 'http 503' ELSE '' END, 49000000,
			CASE (g % 200 + g / 200) % 20 WHEN 1 THEN 'downtime' ELSE '' END, 0
		FROM generate_series(0, 999999) AS g`
	historyRunsSQLite = `WITH RECURSIVE s(g) AS (SELECT 0 UNION ALL SELECT g + 1 FROM s WHERE g < 999999)
		SELECT printf('%08x%08x', g, (g * 2654435761) % 4294967296), printf('j%03d', g % 200), 1, ? + (g / 200) * 60000000000, ? + (g / 200) * 60000000000 + 1000000,
			? + (g / 200) * 60000000000 + 50000000,
			CASE (g % 200 + g / 200) % 20 WHEN 0 THEN 'failed' WHEN 1 THEN 'missed' ELSE 'success' END,
			CASE (g % 200 + g / 200) % 20 WHEN 1 THEN 0 ELSE 1 END, CASE (g % 200 + g / 200) % 20 WHEN 0 THEN 503 WHEN 1 THEN 0 ELSE 200 END,
			CASE (g % 200 + g / 200) % 20 WHEN 0 THEN 'http 503' ELSE '' END, 49000000,
			CASE (g % 200 + g / 200) % 20 WHEN 1 THEN 'downtime' ELSE '' END, 0
		FROM s`
)

// historyStatusQueries are the query shapes of issue 36: a status filter
// with one job, with none and with three.
var historyStatusQueries = []struct {
	name string
	q    cron.RunQuery
}{
	{"job_status", cron.RunQuery{JobIDs: []string{"j042"}, Statuses: []cron.Status{cron.StatusFailed}}},
	{"status", cron.RunQuery{Statuses: []cron.Status{cron.StatusFailed}}},
	{"jobs3_status", cron.RunQuery{JobIDs: []string{"j001", "j100", "j199"}, Statuses: []cron.Status{cron.StatusFailed}}},
	{"jobs3_statuses2", cron.RunQuery{JobIDs: []string{"j001", "j100", "j199"}, Statuses: []cron.Status{cron.StatusFailed, cron.StatusMissed}}},
}

// BenchmarkHistoryStatus measures the pages of the history with a status
// filter (GET /runs?job=X&status=failed and the like) over 1M runs on
// SQLite and PostgreSQL (when KSANA_TEST_POSTGRES_URL is set): one op
// reads the first 5 pages (50 runs each) of a shape, following the
// cursor. It reports the p50 and the max of a page's time (ms/page), the
// runs returned a page, and, on PostgreSQL, from EXPLAIN (ANALYZE,
// BUFFERS) of the same pages, the rows the server read a page (index and
// table rows visited, those a filter removed included, a bitmap scan's
// index entries and table rows both; the mean and the
// max) and the buffers it touched. On SQLite it logs the query plan.
// Goal (issue 36): p50 <= 20 ms and max <= 100 ms on PostgreSQL.
//
//	go test -run XXX -bench HistoryStatus -benchtime 40x ./store/sqlstore/
func BenchmarkHistoryStatus(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			db := be.open(b)
			jobs := mustJobs(b, db, JobsConfig{})
			base := historyBenchBase.UnixNano()
			start := time.Now()
			if db.d == postgresDialect {
				seedRuns(b, db, `INSERT INTO ksana_job (id, config) SELECT 'j' || lpad(g::text, 3, '0'), '{}' FROM generate_series(0, 199) AS g`,
					`INSERT INTO ksana_run (id, job_id, slot, scheduled_at, triggered_at, finished_at, status, attempts, http_status, error, latency, reason, slots) `+historyRunsPG,
					base, base, base)
			} else {
				seedRuns(b, db, `WITH RECURSIVE s(g) AS (SELECT 0 UNION ALL SELECT g + 1 FROM s WHERE g < 199)
					INSERT INTO ksana_job (id, seq, config) SELECT printf('j%03d', g), g + 1, '{}' FROM s`,
					`INSERT INTO ksana_run (id, job_id, slot, scheduled_at, triggered_at, finished_at, status, attempts, http_status, error, latency, reason, slots) `+historyRunsSQLite,
					base, base, base)
			}
			b.Logf("%s: seeded %d runs in %v", be.name, historyJobs*historyPerJob, time.Since(start).Round(time.Millisecond))
			ctx := context.Background()
			for _, c := range historyStatusQueries {
				b.Run(c.name, func(b *testing.B) {
					var times []time.Duration
					var pages, runs int
					for b.Loop() {
						q := c.q
						for range historyPages {
							t0 := time.Now()
							page, next, err := jobs.QueryRuns(ctx, q)
							times = append(times, time.Since(t0))
							if err != nil {
								b.Fatal(err)
							}
							if len(page) == 0 {
								b.Fatal("an empty page")
							}
							pages, runs = pages+1, runs+len(page)
							if next.IsZero() {
								break
							}
							q.After = next
						}
					}
					slices.Sort(times)
					b.ReportMetric(0, "ns/op")
					b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms/page")
					b.ReportMetric(float64(times[len(times)-1].Microseconds())/1000, "max-ms/page")
					b.ReportMetric(float64(runs)/float64(pages), "runs/page")
					explainHistory(b, jobs, c.q)
				})
			}
		})
	}
}

// explainHistory reads the first pages of q again under EXPLAIN and
// reports (PostgreSQL) the rows and buffers the server read a page, or
// logs (SQLite) the plan of the first and of the last page.
func explainHistory(b *testing.B, jobs *Jobs, q cron.RunQuery) {
	b.Helper()
	ctx := context.Background()
	var read, maxRead, buffers, pages int
	for i := range historyPages {
		text, args, err := jobs.runsQuery(q, q.PageSize()+1)
		if err != nil {
			b.Fatal(err)
		}
		if jobs.db.d == postgresDialect {
			var out string
			if err := jobs.db.x.GetContext(ctx, &out, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+text, args...); err != nil {
				b.Fatal(err)
			}
			var plans []struct{ Plan planNode }
			if err := json.Unmarshal([]byte(out), &plans); err != nil {
				b.Fatal(err)
			}
			n := plans[0].Plan.rowsRead()
			read, maxRead, buffers, pages = read+n, max(maxRead, n), buffers+plans[0].Plan.SharedHit+plans[0].Plan.SharedRead, pages+1
			if i == 0 {
				b.Logf("plan: %s", plans[0].Plan.String())
			}
		} else if i == 0 || i == historyPages-1 {
			var plan []struct {
				ID      int    `db:"id"`
				Parent  int    `db:"parent"`
				NotUsed int    `db:"notused"`
				Detail  string `db:"detail"`
			}
			if err := jobs.db.x.SelectContext(ctx, &plan, `EXPLAIN QUERY PLAN `+text, args...); err != nil {
				b.Fatal(err)
			}
			var lines []string
			for _, p := range plan {
				lines = append(lines, p.Detail)
			}
			b.Logf("page %d plan: %s", i+1, strings.Join(lines, "; "))
		}
		page, next, err := jobs.QueryRuns(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		if next.IsZero() || len(page) == 0 {
			break
		}
		q.After = next
	}
	if pages > 0 {
		b.ReportMetric(float64(read)/float64(pages), "rows-read/page")
		b.ReportMetric(float64(maxRead), "max-rows-read/page")
		b.ReportMetric(float64(buffers)/float64(pages), "buffers/page")
	}
}

// planNode is a node of PostgreSQL's EXPLAIN (FORMAT JSON).
type planNode struct {
	NodeType       string     `json:"Node Type"`
	Index          string     `json:"Index Name"`
	Relation       string     `json:"Relation Name"`
	ActualRows     int        `json:"Actual Rows"`
	ActualLoops    int        `json:"Actual Loops"`
	RemovedFilter  int        `json:"Rows Removed by Filter"`
	RemovedRecheck int        `json:"Rows Removed by Index Recheck"`
	SharedHit      int        `json:"Shared Hit Blocks"`
	SharedRead     int        `json:"Shared Read Blocks"`
	Plans          []planNode `json:"Plans"`
}

// rowsRead returns the rows the scans under p visited: those they
// returned and those their filters removed, in every loop (a bitmap scan
// counts twice: the index entries, then the table rows).
func (p planNode) rowsRead() int {
	n := 0
	switch p.NodeType {
	case "Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan", "Bitmap Index Scan":
		n = (p.ActualRows + p.RemovedFilter + p.RemovedRecheck) * p.ActualLoops
	}
	for _, c := range p.Plans {
		n += c.rowsRead()
	}
	return n
}

// String returns p in one line: each node's type, with its index or
// table, and its children in parentheses.
func (p planNode) String() string {
	s := p.NodeType
	if p.Index != "" {
		s += " " + p.Index
	} else if p.Relation != "" {
		s += " " + p.Relation
	}
	if len(p.Plans) > 0 {
		var cs []string
		for _, c := range p.Plans {
			cs = append(cs, c.String())
		}
		s += " (" + strings.Join(cs, ", ") + ")"
	}
	return s
}
