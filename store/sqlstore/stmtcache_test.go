package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// openSQLiteBoth opens one SQLite file twice: through Connect (its
// connections keep their compiled statements) and through the driver as
// it is.
func openSQLiteBoth(tb testing.TB) (cached *DB, plain *sql.DB) {
	tb.Helper()
	url := "sqlite:" + filepath.Join(tb.TempDir(), "cache.db")
	db, err := Connect(context.Background(), url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	d, dsn, err := parseURL(url)
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := sql.Open(d.driver, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	raw.SetMaxOpenConns(1)
	tb.Cleanup(func() { raw.Close() })
	if _, err := db.SQL().Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"); err != nil {
		tb.Fatal(err)
	}
	for i := range 100 {
		if _, err := db.SQL().Exec("INSERT INTO t (id, v) VALUES (?, ?)", i, fmt.Sprint("v", i)); err != nil {
			tb.Fatal(err)
		}
	}
	return db, raw
}

// cacheLen is how many statements the pool's one connection keeps.
func cacheLen(t *testing.T, db *DB) int {
	t.Helper()
	c, err := db.SQL().Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := -1
	if err := c.Raw(func(dc any) error {
		n = len(dc.(*cachingConn).stmts)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// A query whose rows are still open when a transaction runs the same text
// again gets a statement of its own: both read their rows in full.
func TestStmtCacheNestedQuery(t *testing.T) {
	db, _ := openSQLiteBoth(t)
	ctx := context.Background()
	tx, err := db.SQL().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	const q = "SELECT id FROM t WHERE id >= ? ORDER BY id"
	outer, err := tx.QueryContext(ctx, q, 90)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for outer.Next() {
		var id int
		if err := outer.Scan(&id); err != nil {
			t.Fatal(err)
		}
		inner, err := tx.QueryContext(ctx, q, 98)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		for inner.Next() {
			n++
		}
		if err := inner.Close(); err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			t.Fatalf("the inner query read %d rows, want 2", n)
		}
		got = append(got, id)
	}
	if err := outer.Close(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 || got[0] != 90 || got[9] != 99 {
		t.Fatalf("the outer query read %v, want 90 to 99", got)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// The cached statement is free again: another run of the text reads
	// from its start.
	var first int
	if err := db.SQL().QueryRowContext(ctx, q, 5).Scan(&first); err != nil || first != 5 {
		t.Fatalf("the text run again read %d, %v; want 5", first, err)
	}
}

// The cache keeps at most stmtCacheSize texts, and a text dropped from it
// still runs.
func TestStmtCacheBound(t *testing.T) {
	db, _ := openSQLiteBoth(t)
	for i := range stmtCacheSize + 20 {
		var v string
		if err := db.SQL().QueryRow(fmt.Sprintf("SELECT v FROM t WHERE id = ? AND %d = %d", i, i), i%100).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprint("v", i%100); v != want {
			t.Fatalf("query %d read %q, want %q", i, v, want)
		}
	}
	if n := cacheLen(t, db); n > stmtCacheSize || n < stmtCacheSize/2 {
		t.Fatalf("the connection keeps %d statements, want at most %d (and most of them)", n, stmtCacheSize)
	}
	var v string
	if err := db.SQL().QueryRow("SELECT v FROM t WHERE id = ? AND 0 = 0", 7).Scan(&v); err != nil || v != "v7" {
		t.Fatalf("an evicted text read %q, %v; want v7", v, err)
	}
}

// BenchmarkSQLiteStatements runs a read by key and an update, the stores'
// commonest statements, through the connections of Connect (compiled once)
// and through the driver as it is (compiled at each call), alternating in
// one run; ratio-plain/cached is how many times longer the driver alone
// takes.
func BenchmarkSQLiteStatements(b *testing.B) {
	db, raw := openSQLiteBoth(b)
	for _, op := range []string{"read", "update"} {
		b.Run(op, func(b *testing.B) {
			var spent [2]time.Duration
			for i := 0; b.Loop(); i++ {
				for k, c := range []*sql.DB{db.SQL().DB, raw} {
					start := time.Now()
					var err error
					if op == "read" {
						var v string
						err = c.QueryRow("SELECT v FROM t WHERE id = ?", i%100).Scan(&v)
					} else {
						_, err = c.Exec("UPDATE t SET v = ? WHERE id = ?", fmt.Sprint("u", i), i%100)
					}
					if err != nil {
						b.Fatal(err)
					}
					spent[k] += time.Since(start)
				}
			}
			b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "ns-cached/op")
			b.ReportMetric(float64(spent[1].Nanoseconds())/float64(b.N), "ns-plain/op")
			b.ReportMetric(float64(spent[1])/float64(spent[0]), "ratio-plain/cached")
		})
	}
}
