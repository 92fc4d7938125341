package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// dialect holds every difference between PostgreSQL and SQLite that the
// package's SQL depends on. Statements are written once, with ? placeholders
// and the tokens below, and turned into a dialect's text by [dialect.sql].
type dialect struct {
	name      string // "postgres" or "sqlite": the value of [DB.Dialect]
	driver    string // database/sql driver name, also sqlx's bind-type key
	bind      int    // sqlx bind type: sqlx.DOLLAR or sqlx.QUESTION
	now       string // the database clock as an SQL expression
	timestamp string // column type of a point in time
	// since returns an SQL expression for "the database clock minus d"
	// whose one placeholder takes sinceArg(d).
	since    string
	sinceArg func(d time.Duration) any
	// columnExists is a query with two placeholders, table and column,
	// returning one count.
	columnExists string
	// tableExists is a query with one placeholder, the table, returning
	// one count.
	tableExists string
	// writableCTE: INSERT ... RETURNING may stand in a WITH clause, so a
	// heartbeat and the active list take one statement.
	writableCTE bool
	// lock, when non-empty, is run first inside the migration
	// transaction to serialise concurrent migrations.
	lock string
}

// sqliteTimeLayout is how SQLite stores a point in time: UTC with
// millisecond precision, the layout of strftime('%Y-%m-%d %H:%M:%f'). Text in
// this layout sorts in time order.
const sqliteTimeLayout = "2006-01-02 15:04:05.000"

var (
	postgresDialect = &dialect{
		name:        "postgres",
		driver:      "pgx",
		bind:        sqlx.DOLLAR,
		writableCTE: true,
		now:         "now()",
		timestamp:   "TIMESTAMPTZ",
		since:       "(now() - (CAST(? AS BIGINT) * INTERVAL '1 millisecond'))",
		sinceArg:    func(d time.Duration) any { return d.Milliseconds() },
		columnExists: `SELECT count(*) FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = ? AND column_name = ?`,
		tableExists: `SELECT count(*) FROM information_schema.tables
			WHERE table_schema = current_schema() AND table_name = ?`,
		// One lock per schema, held until the migration transaction ends.
		lock: `SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.ksana_schema_migrations'))`,
	}
	sqliteDialect = &dialect{
		name:      "sqlite",
		driver:    "sqlite",
		bind:      sqlx.QUESTION,
		now:       "strftime('%Y-%m-%d %H:%M:%f', 'now')",
		timestamp: "TEXT",
		since:     "strftime('%Y-%m-%d %H:%M:%f', 'now', ?)",
		sinceArg: func(d time.Duration) any {
			return fmt.Sprintf("-%d.%03d seconds", d.Milliseconds()/1000, d.Milliseconds()%1000)
		},
		columnExists: `SELECT count(*) FROM pragma_table_info(?) WHERE name = ?`,
		tableExists:  `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`,
		// The migration transaction starts with BEGIN IMMEDIATE
		// (_txlock=immediate), which already takes the write lock.
		lock: "",
	}
)

// sql returns q in the dialect: {now} becomes the database clock, {since}
// the clock minus a duration, and ? placeholders the driver's form.
func (d *dialect) sql(q string) string {
	q = strings.ReplaceAll(q, "{now}", d.now)
	q = strings.ReplaceAll(q, "{since}", d.since)
	return sqlx.Rebind(d.bind, q)
}

// in expands the slice arguments of q (written with ? and dialect tokens)
// into as many placeholders as they have elements, as sqlx.In does, and
// returns the dialect's text.
func (d *dialect) in(q string, args ...any) (string, []any, error) {
	q = strings.ReplaceAll(q, "{now}", d.now)
	q = strings.ReplaceAll(q, "{since}", d.since)
	q, args, err := sqlx.In(q, args...)
	if err != nil {
		return "", nil, err
	}
	return sqlx.Rebind(d.bind, q), args, nil
}

// hasColumn reports whether table has column.
func (d *dialect) hasColumn(ctx context.Context, q sqlx.QueryerContext, table, column string) (bool, error) {
	var n int
	if err := sqlx.GetContext(ctx, q, &n, d.sql(d.columnExists), table, column); err != nil {
		return false, fmt.Errorf("look up column %s.%s: %w", table, column, err)
	}
	return n > 0, nil
}

// dbTime scans a point in time from either database: time.Time from
// PostgreSQL, text in [sqliteTimeLayout] (or RFC 3339) from SQLite.
type dbTime struct{ time.Time }

var textTimeLayouts = []string{
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
	time.RFC3339Nano,
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02",
}

// Scan implements sql.Scanner.
func (t *dbTime) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		t.Time = time.Time{}
		return nil
	case time.Time:
		t.Time = v.UTC()
		return nil
	case int64: // Unix milliseconds, as a tool might have written them
		t.Time = time.UnixMilli(v).UTC()
		return nil
	case []byte:
		return t.parse(string(v))
	case string:
		return t.parse(v)
	}
	return fmt.Errorf("cannot scan %T into a time", v)
}

func (t *dbTime) parse(s string) error {
	for _, layout := range textTimeLayouts {
		if p, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			t.Time = p.UTC()
			return nil
		}
	}
	return fmt.Errorf("cannot parse time %q", s)
}

// timeArg returns t as a statement argument that compares and sorts
// correctly against the dialect's stored points in time.
func (d *dialect) timeArg(t time.Time) any {
	if d.name == "sqlite" {
		return t.UTC().Format(sqliteTimeLayout)
	}
	return t
}
