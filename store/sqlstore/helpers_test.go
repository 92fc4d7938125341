package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/internal/testenv"
)

// backend opens a fresh, isolated, migrated database of one kind.
type backend struct {
	name string
	open func(t testing.TB) *DB
	// url returns the URL of a fresh, empty database (not opened).
	url func(t testing.TB) string
}

var backends = []backend{
	{"sqlite", openTestSQLite, sqliteTestURL},
	{"postgres", openTestPostgres, postgresTestURL},
}

func sqliteTestURL(t testing.TB) string {
	return filepath.Join(t.TempDir(), "test.db")
}

func openTestSQLite(t testing.TB) *DB {
	t.Helper()
	return mustOpen(t, sqliteTestURL(t))
}

// postgresTestURL creates a schema of its own for t, dropped when t ends,
// and returns a URL whose search_path selects it.
func postgresTestURL(t testing.TB) string {
	t.Helper()
	_, u := testenv.PostgresSchema(t)
	return u
}

func openTestPostgres(t testing.TB) *DB {
	t.Helper()
	db := mustOpen(t, postgresTestURL(t))
	db.SQL().SetMaxOpenConns(4)
	return db
}

func mustOpen(t testing.TB, u string) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db, err := Open(ctx, u)
	if err != nil {
		t.Fatalf("Open(%q): %v", u, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// exec runs a statement written with ? placeholders and dialect tokens.
func exec(t testing.TB, db *DB, q string, args ...any) sql.Result {
	t.Helper()
	res, err := db.x.ExecContext(context.Background(), db.d.sql(q), args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return res
}

// admin implements storetest.ClaimAdmin over the tables.
type admin struct{ db *DB }

func (a admin) PutDeployment(ctx context.Context, d claim.Deployment) error {
	args, env := "[]", "{}"
	if d.Args != nil {
		args = jsonOf(d.Args)
	}
	if d.Env != nil {
		env = jsonOf(d.Env)
	}
	timeOrNil := func(t time.Time) any {
		if t.IsZero() {
			return nil
		}
		return a.db.d.timeArg(t)
	}
	_, err := a.db.x.ExecContext(ctx, a.db.d.sql(`INSERT INTO deployment
		(id, type, enabled, address, package_name, package_version, command, args, env, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, COALESCE(?, {now}), COALESCE(?, {now}))
		ON CONFLICT (id) DO UPDATE SET type = excluded.type, enabled = excluded.enabled,
			address = excluded.address, package_name = excluded.package_name,
			package_version = excluded.package_version, command = excluded.command,
			args = excluded.args, env = excluded.env, created_at = excluded.created_at,
			updated_at = excluded.updated_at`),
		d.ID, string(d.Type), d.Enabled, d.Address, d.PackageName, d.PackageVersion, d.Command,
		args, env, timeOrNil(d.CreatedAt), timeOrNil(d.UpdatedAt))
	return err
}

func (a admin) GetDeployment(ctx context.Context, id string) (claim.Deployment, error) {
	return a.db.Deployments().Get(ctx, id)
}

func (a admin) BackdateNode(ctx context.Context, address string, age time.Duration) error {
	_, err := a.db.x.ExecContext(ctx, a.db.d.sql("UPDATE node_unit SET last_seen = {since} WHERE address = ?"), a.db.d.sinceArg(age), address)
	return err
}

// recorder is a database/sql driver that wraps another and records the
// text of every statement sent to the database.
type recorder struct {
	driver.Driver
	mu    sync.Mutex
	stmts []string
	rows  int // rows returned since the last takeCounts
}

// takeCounts returns the number of statements and of rows since the last
// take or takeCounts.
func (r *recorder) takeCounts() (stmts, rows int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	stmts, rows = len(r.stmts), r.rows
	r.stmts, r.rows = nil, 0
	return stmts, rows
}

func (r *recorder) record(q string) {
	r.mu.Lock()
	r.stmts = append(r.stmts, q)
	r.mu.Unlock()
}

// take returns the statements recorded since the last take.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stmts
	r.stmts = nil
	return s
}

func (r *recorder) Open(name string) (driver.Conn, error) {
	c, err := r.Driver.Open(name)
	if err != nil {
		return nil, err
	}
	return &recConn{Conn: c, r: r}, nil
}

type recConn struct {
	driver.Conn
	r *recorder
}

func (c *recConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	c.r.record(q)
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c *recConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.r.record(q)
	rows, err := c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
	if err != nil {
		return nil, err
	}
	return recRows{rows, c.r}, nil
}

func (c *recConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *recConn) CheckNamedValue(v *driver.NamedValue) error {
	if nc, ok := c.Conn.(driver.NamedValueChecker); ok {
		return nc.CheckNamedValue(v)
	}
	return driver.ErrSkip
}

func (c *recConn) ResetSession(ctx context.Context) error {
	if rs, ok := c.Conn.(driver.SessionResetter); ok {
		return rs.ResetSession(ctx)
	}
	return nil
}

func (c *recConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

var recorderSeq atomic.Int64

// openRecorded opens a fresh database of backend b through a recorder.
func openRecorded(t testing.TB, b backend) (*DB, *recorder) {
	t.Helper()
	u := b.url(t)
	var (
		r   *recorder
		d   *dialect
		dsn string
	)
	if b.name == "postgres" {
		r, d, dsn = &recorder{Driver: stdlib.GetDefaultDriver()}, postgresDialect, u
	} else {
		var err error
		r = &recorder{Driver: &sqlite.Driver{}}
		if d, dsn, err = parseURL(u); err != nil {
			t.Fatal(err)
		}
	}
	name := fmt.Sprintf("sqlstore-recorder-%d", recorderSeq.Add(1))
	sql.Register(name, r)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db, err := openWith(ctx, d, name, dsn)
	if err != nil {
		t.Fatalf("open %s through a recorder: %v", b.name, err)
	}
	t.Cleanup(func() { db.Close() })
	r.take()
	return db, r
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
