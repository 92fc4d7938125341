package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Sentinel errors. Errors returned by this package wrap one of them, or the
// database driver's error.
var (
	// ErrInvalidURL: [Open] cannot tell which database a URL names, or the
	// URL is malformed.
	ErrInvalidURL = errors.New("sqlstore: invalid database url")
	// ErrNotFound: no deployment has the id.
	ErrNotFound = errors.New("sqlstore: deployment not found")
	// ErrExists: a deployment with the id exists already.
	ErrExists = errors.New("sqlstore: deployment exists")
	// ErrNoSchema: the PostgreSQL search path names no existing schema
	// ([*SchemaError] carries it).
	ErrNoSchema = errors.New("sqlstore: no schema to hold the tables")
)

// DB is an open database holding the deployment and node_unit tables. It is
// safe for concurrent use; one DB serves the [Deployments] and [Membership]
// adapters of one process.
type DB struct {
	x  *sqlx.DB
	d  *dialect
	pg *pgx.ConnConfig // PostgreSQL: the connection settings, for LISTEN

	asyncOnce sync.Once
	asyncX    *sqlx.DB // PostgreSQL: connections with synchronous_commit off (see async)
}

// async returns the pool for writes that need not be durable when they
// return: on PostgreSQL, connections with synchronous_commit off, whose
// commits are visible to every other transaction at once (a unique row
// still excludes every later insert) but reach the disk up to three
// wal_writer_delay later; on SQLite the one connection.
func (db *DB) async() *sqlx.DB {
	if db.d != postgresDialect || db.pg == nil {
		return db.x
	}
	db.asyncOnce.Do(func() {
		cfg := db.pg.Copy()
		if cfg.RuntimeParams == nil {
			cfg.RuntimeParams = map[string]string{}
		}
		cfg.RuntimeParams["synchronous_commit"] = "off"
		db.asyncX = sqlx.NewDb(stdlib.OpenDB(*cfg), postgresDialect.driver)
		n := db.x.Stats().MaxOpenConnections
		if n == 0 {
			n = 32
		}
		db.asyncX.SetMaxOpenConns(n)
		db.asyncX.SetMaxIdleConns(n)
	})
	return db.asyncX
}

// Open connects to the database that url names ([Connect]) and brings the
// schema up to date with [DB.Migrate].
//
//   - postgres://... or postgresql://...: PostgreSQL through pgx. Any
//     run-time parameter may be added to the query, such as
//     search_path=myschema; the tables go into the first schema of the
//     search path that exists ([DB.Schema]), public by default, and a
//     search path naming no existing schema is an error that says so.
//   - sqlite:PATH, file:PATH (an SQLite URI) or a plain PATH: an SQLite
//     file, created when missing (its directory must exist); ":memory:" is
//     a private in-memory database. The connection runs in WAL mode with a
//     10 s busy timeout, foreign keys on, synchronous=NORMAL, and
//     transactions that begin IMMEDIATE; query parameters of the modernc
//     driver given in the URL (_busy_timeout=...) take precedence. One DB
//     uses one connection, so writes in one process queue in Go rather than
//     on the file lock, while several processes share a file through
//     SQLite's locking.
func Open(ctx context.Context, url string) (*DB, error) {
	db, err := Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	if err := db.Migrate(ctx); err != nil {
		db.x.Close()
		return nil, err
	}
	return db, nil
}

// Connect is [Open] without the migration: it connects to the database
// that url names and checks the connection, and never creates or changes a
// table. It suits read-only tools, which check [DB.SchemaVersion] first (0:
// no table exists yet). An SQLite file is still created when missing,
// empty; open it as file:PATH?mode=ro to avoid that.
func Connect(ctx context.Context, url string) (*DB, error) {
	d, dsn, err := parseURL(url)
	if err != nil {
		return nil, err
	}
	var db *DB
	if d == postgresDialect {
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidURL, err)
		}
		db = openPostgres(cfg)
	} else {
		sdb, err := openSQLiteCached(d.driver, dsn)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: open sqlite: %w", err)
		}
		x := sqlx.NewDb(sdb, d.driver)
		x.SetMaxOpenConns(1)
		x.SetMaxIdleConns(1)
		db = &DB{x: x, d: d}
	}
	if err := db.ping(ctx); err != nil {
		db.x.Close()
		return nil, fmt.Errorf("sqlstore: connect %s: %w", d.name, err)
	}
	return db, nil
}

// ping checks the connection. An SQLite file that another process is
// creating or switching to WAL at the same moment answers SQLITE_BUSY
// without waiting for the busy timeout; the ping is tried again for up to
// that timeout (10 s).
func (db *DB) ping(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := db.x.PingContext(ctx)
		if err == nil || db.d == postgresDialect || !strings.Contains(err.Error(), "SQLITE_BUSY") || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// openPostgres wraps a pgx configuration (tests add a tracer to it).
func openPostgres(cfg *pgx.ConnConfig) *DB {
	return &DB{x: sqlx.NewDb(stdlib.OpenDB(*cfg), postgresDialect.driver), d: postgresDialect, pg: cfg.Copy()}
}

// sqliteDefaults are the connection settings Open adds to an SQLite DSN
// unless the URL sets them.
var sqliteDefaults = [][2]string{
	{"_busy_timeout", "10000"},
	{"_journal_mode", "WAL"},
	{"_foreign_keys", "on"},
	{"_synchronous", "NORMAL"},
	{"_txlock", "immediate"},
}

// parseURL picks the dialect for raw and returns the DSN its driver takes.
func parseURL(raw string) (*dialect, string, error) {
	s := strings.TrimSpace(raw)
	lower := strings.ToLower(s)
	switch {
	case s == "":
		return nil, "", fmt.Errorf("%w: empty (want postgres://..., sqlite:PATH, file:PATH or a path)", ErrInvalidURL)
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"):
		return postgresDialect, s, nil
	case strings.Contains(lower, "://") && !strings.HasPrefix(lower, "sqlite:") && !strings.HasPrefix(lower, "file:"):
		scheme, _, _ := strings.Cut(s, "://")
		return nil, "", fmt.Errorf("%w: unsupported scheme %q in %q (want postgres, postgresql, sqlite or file)", ErrInvalidURL, scheme, raw)
	}
	uri := false
	switch {
	case strings.HasPrefix(lower, "sqlite:"):
		s = strings.TrimPrefix(s[len("sqlite:"):], "//")
	case strings.HasPrefix(lower, "file:"):
		uri = true
	}
	path, query, _ := strings.Cut(s, "?")
	if path == "" || path == "file:" {
		return nil, "", fmt.Errorf("%w: no database path in %q", ErrInvalidURL, raw)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, "", fmt.Errorf("%w: query of %q: %v", ErrInvalidURL, raw, err)
	}
	if !uri && path != ":memory:" {
		if dir := filepath.Dir(path); dir != "" {
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				return nil, "", fmt.Errorf("%w: directory %q of sqlite database %q does not exist", ErrInvalidURL, dir, path)
			}
		}
	}
	for _, kv := range sqliteDefaults {
		if !q.Has(kv[0]) {
			q.Add(kv[0], kv[1])
		}
	}
	return sqliteDialect, path + "?" + q.Encode(), nil
}

// Close closes the database connections.
func (db *DB) Close() error {
	err := db.x.Close()
	db.asyncOnce.Do(func() {}) // no pool is created after Close
	if db.asyncX != nil {
		err = errors.Join(err, db.asyncX.Close())
	}
	return err
}

// Schema returns the schema that holds (or will hold) the tables: on
// PostgreSQL the first schema of the search path that exists, "public"
// unless the URL sets search_path; on SQLite "main". It is an
// [*SchemaError] when the search path names no existing schema.
func (db *DB) Schema(ctx context.Context) (string, error) {
	if db.d != postgresDialect {
		return "main", nil
	}
	var cur *string
	if err := db.x.GetContext(ctx, &cur, "SELECT current_schema()"); err != nil {
		return "", fmt.Errorf("sqlstore: current schema: %w", err)
	}
	if cur != nil {
		return *cur, nil
	}
	var path string
	if err := db.x.GetContext(ctx, &path, "SHOW search_path"); err != nil {
		return "", fmt.Errorf("sqlstore: search_path: %w", err)
	}
	return "", &SchemaError{SearchPath: path}
}

// SchemaError reports a PostgreSQL search path that names no existing
// schema, so there is nowhere to create or read the tables.
type SchemaError struct {
	SearchPath string // the connection's search_path setting
}

// Error names the search path and says what to do.
func (e *SchemaError) Error() string {
	first, _, _ := strings.Cut(e.SearchPath, ",")
	first = strings.TrimSpace(first)
	return fmt.Sprintf("sqlstore: no schema of search_path %q exists: create it (CREATE SCHEMA %s) or set search_path in the database URL to an existing schema",
		e.SearchPath, first)
}

// Unwrap returns [ErrNoSchema].
func (e *SchemaError) Unwrap() error { return ErrNoSchema }

// Dialect returns "postgres" or "sqlite".
func (db *DB) Dialect() string { return db.d.name }

// SQL returns the underlying connection pool, for settings such as
// SetMaxOpenConns and for statements of the caller's own. Its bind type is
// the dialect's: use its Rebind for ? placeholders.
func (db *DB) SQL() *sqlx.DB { return db.x }

// Deployments returns the deployment table's adapter.
func (db *DB) Deployments() *Deployments { return &Deployments{db: db} }

// Membership returns the node_unit table's adapter.
func (db *DB) Membership() *Membership { return &Membership{db: db} }

// openWith opens dsn through the registered driver driverName in dialect d
// and migrates it (tests use it with a driver that records statements).
func openWith(ctx context.Context, d *dialect, driverName, dsn string) (*DB, error) {
	x, err := sqlx.Open(driverName, dsn)
	if err != nil {
		return nil, err
	}
	x = sqlx.NewDb(x.DB, d.driver) // bind type from the dialect, not the driver name
	if d == sqliteDialect {
		x.SetMaxOpenConns(1)
		x.SetMaxIdleConns(1)
	}
	db := &DB{x: x, d: d}
	if err := db.x.PingContext(ctx); err != nil {
		db.x.Close()
		return nil, err
	}
	if err := db.Migrate(ctx); err != nil {
		db.x.Close()
		return nil, err
	}
	return db, nil
}
