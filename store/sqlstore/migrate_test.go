package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/claim"
)

func tableNames(t *testing.T, db *DB, kind string) []string {
	t.Helper()
	q := "SELECT name FROM sqlite_master WHERE type = ? AND name NOT LIKE 'sqlite_%' ORDER BY name"
	if db.d.name == "postgres" {
		q = "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND ? = 'index' ORDER BY indexname"
		if kind == "table" {
			q = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND ? = 'table' ORDER BY table_name"
		}
	}
	var names []string
	if err := db.x.Select(&names, db.d.sql(q), kind); err != nil {
		t.Fatal(err)
	}
	return names
}

func migrationRows(t *testing.T, db *DB) []string {
	t.Helper()
	var rows []struct {
		Version int    `db:"version"`
		Name    string `db:"name"`
	}
	if err := db.x.Select(&rows, "SELECT version, name FROM ksana_schema_migrations ORDER BY version"); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, fmt.Sprintf("%d %s", r.Version, r.Name))
	}
	return out
}

var wantMigrations = []string{"1 deployment", "2 deployment_type", "3 node_unit_and_indexes", "4 updated_at", "5 address_counts", "6 cron_jobs", "7 shared_order", "8 runs_history", "9 alerts", "10 pause", "11 idempotency", "12 audit_actions", "13 run_trigger", "14 run_status_index", "15 run_attempts", "16 alert_outbox", "17 job_keep_runs"}

func TestMigrateFresh(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			db := b.open(t)
			ctx := context.Background()
			v, err := db.SchemaVersion(ctx)
			if err != nil || v != SchemaVersion {
				t.Errorf("SchemaVersion = %d, %v; want %d, nil", v, err, SchemaVersion)
			}
			if diff := cmp.Diff(wantMigrations, migrationRows(t, db)); diff != "" {
				t.Errorf("ksana_schema_migrations mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"deployment", "deployment_address_count", "ksana_alert_outbox", "ksana_audit", "ksana_idempotency", "ksana_job", "ksana_job_change", "ksana_job_count", "ksana_lease", "ksana_member", "ksana_run", "ksana_schema_migrations", "ksana_settings", "node_unit"}, tableNames(t, db, "table")); diff != "" {
				t.Errorf("tables mismatch (-want +got):\n%s", diff)
			}
			wantIdx := map[string]bool{"deployment_address_idx": true, "deployment_enabled_order_idx": true, "node_unit_last_seen_idx": true,
				"deployment_claim_order_idx": true, "deployment_other_type_idx": true}
			for _, name := range tableNames(t, db, "index") {
				delete(wantIdx, name)
			}
			if len(wantIdx) > 0 {
				t.Errorf("indexes missing: %v", wantIdx)
			}
		})
	}
}

func TestMigrateIdempotent(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			u := b.url(t)
			db := mustOpen(t, u)
			ctx := context.Background()
			if err := db.Deployments().Add(ctx, claim.Deployment{ID: "kept", Enabled: true, Command: "x"}); err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				if err := db.Migrate(ctx); err != nil {
					t.Fatalf("Migrate #%d: %v", i+2, err)
				}
			}
			again := mustOpen(t, u) // Open migrates too
			if diff := cmp.Diff(wantMigrations, migrationRows(t, again)); diff != "" {
				t.Errorf("ksana_schema_migrations after re-runs mismatch (-want +got):\n%s", diff)
			}
			if _, err := again.Deployments().Get(ctx, "kept"); err != nil {
				t.Errorf("row written before the re-runs: %v", err)
			}
		})
	}
}

// TestMigrateConcurrentOpens starts many Opens of one new database at once,
// as node-units starting together do: each must succeed and the schema be
// migrated exactly once.
func TestMigrateConcurrentOpens(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			n := 20
			if b.name == "sqlite" {
				n = 8
			}
			u := b.url(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var wg sync.WaitGroup
			errs := make([]error, n)
			dbs := make([]*DB, n)
			start := make(chan struct{})
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					dbs[i], errs[i] = Open(ctx, u)
				}()
			}
			close(start)
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("Open #%d: %v", i, err)
				} else {
					defer dbs[i].Close()
				}
			}
			if t.Failed() {
				return
			}
			if diff := cmp.Diff(wantMigrations, migrationRows(t, dbs[0])); diff != "" {
				t.Errorf("ksana_schema_migrations mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// legacyTable is the deployment table as it was before deployment.type.
var legacyTable = map[string]string{
	"postgres": `CREATE TABLE deployment (
		id TEXT PRIMARY KEY, package_name TEXT NOT NULL DEFAULT '', package_version TEXT NOT NULL DEFAULT '',
		command TEXT NOT NULL DEFAULT '', args TEXT NOT NULL DEFAULT '[]', env TEXT NOT NULL DEFAULT '{}',
		address TEXT NOT NULL DEFAULT '', enabled BOOLEAN NOT NULL DEFAULT FALSE,
		created_at TIMESTAMPTZ NOT NULL DEFAULT now(), updated_at TIMESTAMPTZ NOT NULL DEFAULT now())`,
	"sqlite": `CREATE TABLE deployment (
		id TEXT PRIMARY KEY, package_name TEXT NOT NULL DEFAULT '', package_version TEXT NOT NULL DEFAULT '',
		command TEXT NOT NULL DEFAULT '', args TEXT NOT NULL DEFAULT '[]', env TEXT NOT NULL DEFAULT '{}',
		address TEXT NOT NULL DEFAULT '', enabled BOOLEAN NOT NULL DEFAULT FALSE,
		created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
		updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')))`,
}

// rawExec runs statements on the database at u without this package.
func rawExec(t *testing.T, backend, u string, stmts ...string) {
	t.Helper()
	driverName := "pgx"
	if backend == "sqlite" {
		driverName = "sqlite"
	}
	raw, err := sql.Open(driverName, u)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, s := range stmts {
		if _, err := raw.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// TestMigrationBackfillsType: a deployment table of the old schema,
// without type, holding rows, migrates so that every old row reads
// type "deployment"; running the migration again changes nothing.
func TestMigrationBackfillsType(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			u := b.url(t)
			rawExec(t, b.name, u, legacyTable[b.name],
				`INSERT INTO deployment (id, command, address, enabled) VALUES ('old-1', 'a', '', TRUE)`,
				`INSERT INTO deployment (id, command, address, enabled) VALUES ('old-2', 'b', 'node-x', TRUE)`,
				`INSERT INTO deployment (id, command, address, enabled) VALUES ('old-3', 'c', '', FALSE)`,
			)
			for round := range 2 {
				db := mustOpen(t, u)
				all, err := db.Deployments().List(context.Background())
				if err != nil {
					t.Fatalf("round %d: List: %v", round, err)
				}
				got := map[string]string{}
				for _, d := range all {
					got[d.ID] = string(d.Type) + "@" + d.Address
				}
				want := map[string]string{"old-1": "deployment@", "old-2": "deployment@node-x", "old-3": "deployment@"}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("round %d: type@address after migration mismatch (-want +got):\n%s", round, diff)
				}
				if diff := cmp.Diff(wantMigrations, migrationRows(t, db)); diff != "" {
					t.Errorf("round %d: ksana_schema_migrations mismatch (-want +got):\n%s", round, diff)
				}
				db.Close()
			}
		})
	}
}

// TestMigrateKeepsExistingTypeColumn: a table whose type column another
// tool added already is left as it is, values included; an invalid value
// is returned to the loop (R11), not rewritten.
func TestMigrateKeepsExistingTypeColumn(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			u := b.url(t)
			rawExec(t, b.name, u, legacyTable[b.name],
				`ALTER TABLE deployment ADD COLUMN type TEXT NOT NULL DEFAULT 'deployment'`,
				`INSERT INTO deployment (id, type, enabled) VALUES ('dm', 'daemon', TRUE)`,
				`INSERT INTO deployment (id, type, enabled) VALUES ('odd', 'cronjob', TRUE)`,
				`INSERT INTO deployment (id, enabled) VALUES ('plain', TRUE)`,
			)
			db := mustOpen(t, u)
			ds, err := db.Deployments().Deployments(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]claim.Type{}
			for _, d := range ds {
				got[d.ID] = d.Type
			}
			want := map[string]claim.Type{"dm": claim.TypeDaemon, "odd": "cronjob", "plain": claim.TypeDeployment}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("types mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTypeColumnText: deployment.type is TEXT NOT NULL DEFAULT
// 'deployment'; a row inserted without a type reads back "deployment".
func TestTypeColumnText(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			db := b.open(t)
			var col struct {
				Type    string         `db:"type"`
				NotNull bool           `db:"notnull"`
				Default sql.NullString `db:"dflt"`
			}
			q := `SELECT type, "notnull", dflt_value AS dflt FROM pragma_table_info('deployment') WHERE name = 'type'`
			if b.name == "postgres" {
				q = `SELECT data_type AS type, is_nullable = 'NO' AS "notnull", column_default AS dflt
					FROM information_schema.columns
					WHERE table_schema = current_schema() AND table_name = 'deployment' AND column_name = 'type'`
			}
			if err := db.x.Get(&col, q); err != nil {
				t.Fatal(err)
			}
			wantDefault := map[string]string{"sqlite": "'deployment'", "postgres": "'deployment'::text"}[b.name]
			if !strings.EqualFold(col.Type, "text") || !col.NotNull || col.Default.String != wantDefault {
				t.Errorf("deployment.type column = %+v, want TEXT NOT NULL DEFAULT %s", col, wantDefault)
			}
			exec(t, db, "INSERT INTO deployment (id, enabled) VALUES (?, ?)", "no-type", true)
			d, err := db.Deployments().Get(context.Background(), "no-type")
			if err != nil || d.Type != claim.TypeDeployment {
				t.Errorf("row inserted without type: Type = %q, %v; want %q", d.Type, err, claim.TypeDeployment)
			}
		})
	}
}
