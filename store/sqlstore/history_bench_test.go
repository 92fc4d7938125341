package sqlstore

import (
	"context"
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
	// Seeded by the server (generate_series): 10,000 jobs, 1M runs; the
	// constraints (but the primary key) and indexes of ksana_run are
	// dropped meanwhile and made again after, each in one pass.
	var cons, defs []struct {
		Name string `db:"name"`
		Def  string `db:"def"`
	}
	if err := db.x.SelectContext(ctx, &cons, `SELECT conname AS name, pg_get_constraintdef(oid) AS def FROM pg_constraint
		WHERE conrelid = 'ksana_run'::regclass AND contype <> 'p'`); err != nil {
		b.Fatal(err)
	}
	for _, c := range cons {
		exec(b, db, `ALTER TABLE ksana_run DROP CONSTRAINT `+c.Name)
	}
	if err := db.x.SelectContext(ctx, &defs, `SELECT indexname AS name, indexdef AS def FROM pg_indexes
		WHERE schemaname = current_schema() AND tablename = 'ksana_run' AND indexname <> 'ksana_run_pkey'`); err != nil {
		b.Fatal(err)
	}
	for _, d := range defs {
		exec(b, db, `DROP INDEX `+d.Name)
	}
	exec(b, db, `INSERT INTO ksana_job (id, config) SELECT 'j' || lpad(g::text, 5, '0'), '{}' FROM generate_series(0, 9999) AS g`)
	exec(b, db, `INSERT INTO ksana_run (id, job_id, slot, scheduled_at, triggered_at, finished_at, status, attempts, http_status, error, latency, reason, slots)
		SELECT md5(g::text), 'j' || lpad((g % 10000)::text, 5, '0'), TRUE, ?::bigint + (g / 10000) * 60000000000, ?::bigint + (g / 10000) * 60000000000 + 1000000,
			?::bigint + (g / 10000) * 60000000000 + 50000000,
			CASE g % 10 WHEN 0 THEN 'failed' WHEN 1 THEN 'missed' ELSE 'success' END,
			CASE g % 10 WHEN 1 THEN 0 ELSE 1 END, CASE g % 10 WHEN 0 THEN 503 WHEN 1 THEN 0 ELSE 200 END,
			CASE g % 10 WHEN 0 THEN 'http 503' ELSE '' END, 49000000,
			CASE g % 10 WHEN 1 THEN 'downtime' ELSE '' END, CASE g % 10 WHEN 1 THEN 4 ELSE 0 END
		FROM generate_series(0, 999999) AS g`, historyBenchBase.UnixNano(), historyBenchBase.UnixNano(), historyBenchBase.UnixNano())
	for _, d := range defs {
		exec(b, db, d.Def)
	}
	for _, c := range cons {
		exec(b, db, `ALTER TABLE ksana_run ADD CONSTRAINT `+c.Name+` `+c.Def)
	}
	exec(b, db, `ANALYZE ksana_run`)
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
