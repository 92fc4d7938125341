package sqlstore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jmoiron/sqlx"
)

// The schema's history, one file per version: NNNN_name.sql for both
// databases, or NNNN_name.postgres.sql and NNNN_name.sqlite.sql where they
// differ. {now} and {timestamp} stand for the dialect's clock and
// point-in-time column type. A first line "-- skip-if-column: table.column"
// skips the file (still recording its version) when that column exists.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one version of the schema.
type migration struct {
	version    int
	name       string
	sql        string // in the dialect, ready to run
	skipTable  string // with skipColumn: skip when this column exists
	skipColumn string
}

// migrations returns the schema's history in d, oldest first.
func migrations(d *dialect) ([]migration, error) {
	paths, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	byVersion := map[int]migration{}
	for _, p := range paths {
		base := strings.TrimSuffix(strings.TrimPrefix(p, "migrations/"), ".sql")
		num, rest, ok := strings.Cut(base, "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil || version <= 0 {
			return nil, fmt.Errorf("migration file %s: name must be NNNN_name.sql", p)
		}
		name, only, hasDialect := strings.Cut(rest, ".")
		if hasDialect && only != d.name {
			continue
		}
		body, err := migrationFiles.ReadFile(p)
		if err != nil {
			return nil, err
		}
		m := migration{version: version, name: name}
		text := string(body)
		if first, _, _ := strings.Cut(text, "\n"); strings.HasPrefix(first, "-- skip-if-column:") {
			spec := strings.TrimSpace(strings.TrimPrefix(first, "-- skip-if-column:"))
			m.skipTable, m.skipColumn, ok = strings.Cut(spec, ".")
			if !ok {
				return nil, fmt.Errorf("migration file %s: skip-if-column wants table.column, got %q", p, spec)
			}
		}
		text = strings.ReplaceAll(text, "{timestamp}", d.timestamp)
		text = strings.ReplaceAll(text, "{now}", d.now)
		m.sql = text
		if prev, dup := byVersion[version]; dup && prev.name != "" {
			return nil, fmt.Errorf("migration version %d defined twice (%s and %s)", version, prev.name, name)
		}
		byVersion[version] = m
	}
	out := make([]migration, 0, len(byVersion))
	for _, m := range byVersion {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration version %d missing", i+1)
		}
	}
	return out, nil
}

// SchemaVersion is the newest schema version this package knows, the
// number of its migrations. A database migrated by [DB.Migrate] reports it
// from [DB.SchemaVersion].
const SchemaVersion = 17

const createVersionTable = `CREATE TABLE IF NOT EXISTS ksana_schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at {timestamp} NOT NULL DEFAULT ({now})
)`

// Migrate brings the schema up to [SchemaVersion]: it applies, in one
// transaction, every migration not yet recorded in the
// ksana_schema_migrations table. It is idempotent, and concurrent calls from
// any number of processes are safe: on PostgreSQL they queue on an advisory
// lock (one per schema), on SQLite on the write lock that BEGIN IMMEDIATE
// takes. [Open] calls it.
func (db *DB) Migrate(ctx context.Context) error {
	if _, err := db.Schema(ctx); err != nil {
		return err
	}
	ms, err := migrations(db.d)
	if err != nil {
		return fmt.Errorf("sqlstore: migrate: %w", err)
	}
	if len(ms) != SchemaVersion {
		return fmt.Errorf("sqlstore: migrate: %d migrations embedded, SchemaVersion says %d", len(ms), SchemaVersion)
	}
	tx, err := db.x.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlstore: migrate: begin: %w", err)
	}
	defer tx.Rollback()
	if err := db.migrateTx(ctx, tx, ms); err != nil {
		return fmt.Errorf("sqlstore: migrate: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlstore: migrate: commit: %w", err)
	}
	return nil
}

func (db *DB) migrateTx(ctx context.Context, tx *sqlx.Tx, ms []migration) error {
	if db.d.lock != "" {
		if _, err := tx.ExecContext(ctx, db.d.lock); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
	}
	vt := strings.ReplaceAll(createVersionTable, "{timestamp}", db.d.timestamp)
	vt = strings.ReplaceAll(vt, "{now}", db.d.now)
	if _, err := tx.ExecContext(ctx, vt); err != nil {
		return fmt.Errorf("create ksana_schema_migrations: %w", err)
	}
	var applied []int
	if err := tx.SelectContext(ctx, &applied, "SELECT version FROM ksana_schema_migrations"); err != nil {
		return fmt.Errorf("read ksana_schema_migrations: %w", err)
	}
	done := map[int]bool{}
	for _, v := range applied {
		done[v] = true
	}
	for _, m := range ms {
		if done[m.version] {
			continue
		}
		skip := false
		if m.skipColumn != "" {
			var err error
			if skip, err = db.d.hasColumn(ctx, tx, m.skipTable, m.skipColumn); err != nil {
				return fmt.Errorf("version %d (%s): %w", m.version, m.name, err)
			}
		}
		if !skip {
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("version %d (%s): %w", m.version, m.name, err)
			}
		}
		if _, err := tx.ExecContext(ctx, db.d.sql("INSERT INTO ksana_schema_migrations (version, name) VALUES (?, ?)"), m.version, m.name); err != nil {
			return fmt.Errorf("record version %d: %w", m.version, err)
		}
	}
	return nil
}

// SchemaVersion returns the newest schema version recorded in the
// database, 0 when none is (the tables do not exist yet). It changes
// nothing. A PostgreSQL search path naming no existing schema is an
// [*SchemaError].
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	if _, err := db.Schema(ctx); err != nil {
		return 0, err
	}
	ok, err := db.hasTable(ctx, "ksana_schema_migrations")
	if err != nil || !ok {
		return 0, err
	}
	var v int
	if err := db.x.GetContext(ctx, &v, "SELECT COALESCE(MAX(version), 0) FROM ksana_schema_migrations"); err != nil {
		return 0, fmt.Errorf("sqlstore: schema version: %w", err)
	}
	return v, nil
}

func (db *DB) hasTable(ctx context.Context, table string) (bool, error) {
	var n int
	if err := db.x.GetContext(ctx, &n, db.d.sql(db.d.tableExists), table); err != nil {
		return false, fmt.Errorf("sqlstore: look up table %s: %w", table, err)
	}
	return n > 0, nil
}
