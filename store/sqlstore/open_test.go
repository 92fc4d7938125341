package sqlstore

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "n.db")
	defaults := "_busy_timeout=10000&_foreign_keys=on&_journal_mode=WAL&_synchronous=NORMAL&_txlock=immediate"
	tests := []struct {
		name, in    string
		wantDialect string
		wantDSN     string
		wantErr     string // substring; "" means success
	}{
		{"postgres", "postgres://u:p@h:5432/db?sslmode=disable", "postgres", "postgres://u:p@h:5432/db?sslmode=disable", ""},
		{"postgresql upper case", "PostgreSQL://h/db", "postgres", "PostgreSQL://h/db", ""},
		{"plain path", db, "sqlite", db + "?" + defaults, ""},
		{"sqlite: prefix", "sqlite:" + db, "sqlite", db + "?" + defaults, ""},
		{"sqlite:// prefix", "sqlite://" + db, "sqlite", db + "?" + defaults, ""},
		{"relative path", "n.db", "sqlite", "n.db?" + defaults, ""},
		{"memory", ":memory:", "sqlite", ":memory:?" + defaults, ""},
		{"user setting wins", db + "?_busy_timeout=5", "sqlite", db + "?_busy_timeout=5&_foreign_keys=on&_journal_mode=WAL&_synchronous=NORMAL&_txlock=immediate", ""},
		{"file uri", "file:" + db + "?mode=rwc", "sqlite", "file:" + db + "?" + defaults + "&mode=rwc", ""},
		{"empty", "  ", "", "", "empty"},
		{"other scheme", "mysql://h/db", "", "", `unsupported scheme "mysql"`},
		{"no path", "sqlite:", "", "", "no database path"},
		{"missing directory", filepath.Join(dir, "no", "such", "n.db"), "", "", "does not exist"},
		{"bad query", db + "?a=%zz", "", "", "query"},
	}
	for _, tt := range tests {
		d, dsn, err := parseURL(tt.in)
		if tt.wantErr != "" {
			if !errors.Is(err, ErrInvalidURL) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: parseURL(%q) error = %v, want ErrInvalidURL mentioning %q", tt.name, tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: parseURL(%q): %v", tt.name, tt.in, err)
			continue
		}
		if d.name != tt.wantDialect || dsn != tt.wantDSN {
			t.Errorf("%s: parseURL(%q) = %s %q, want %s %q", tt.name, tt.in, d.name, dsn, tt.wantDialect, tt.wantDSN)
		}
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"postgres://h/db", "sqlite:x.db", "file:x.db?mode=ro", "x.db", ":memory:", "", "mysql://x", "sqlite:?", "a?b=%", "sqlite://"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, dsn, err := parseURL(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidURL) {
				t.Fatalf("parseURL(%q) error %v does not wrap ErrInvalidURL", s, err)
			}
			return
		}
		if d == nil || dsn == "" {
			t.Fatalf("parseURL(%q) = %v, %q without error", s, d, dsn)
		}
		if d == sqliteDialect {
			_, q, ok := strings.Cut(dsn, "?")
			vals, perr := url.ParseQuery(q)
			if !ok || perr != nil || vals.Get("_txlock") == "" || vals.Get("_busy_timeout") == "" {
				t.Fatalf("parseURL(%q) = %q: want the connection defaults in the query", s, dsn)
			}
		}
	})
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name, url, want string
	}{
		{"unknown scheme", "redis://127.0.0.1:6379", "unsupported scheme"},
		{"bad postgres url", "postgres://h:notaport/db", "invalid database url"},
		{"missing directory", filepath.Join(t.TempDir(), "missing", "x.db"), "does not exist"},
	}
	for _, tt := range tests {
		db, err := Open(ctx, tt.url)
		if err == nil {
			db.Close()
			t.Errorf("%s: Open(%q) succeeded, want an error", tt.name, tt.url)
			continue
		}
		if !errors.Is(err, ErrInvalidURL) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Open(%q) = %v, want ErrInvalidURL mentioning %q", tt.name, tt.url, err, tt.want)
		}
	}
}

func TestOpenSQLiteSettings(t *testing.T) {
	t.Parallel()
	db := mustOpen(t, "sqlite:"+filepath.Join(t.TempDir(), "s.db"))
	var got struct {
		Journal string `db:"journal_mode"`
		Busy    int    `db:"timeout"`
		FK      int    `db:"foreign_keys"`
	}
	for _, q := range []struct {
		sql  string
		dest any
	}{
		{"PRAGMA journal_mode", &got.Journal},
		{"PRAGMA busy_timeout", &got.Busy},
		{"PRAGMA foreign_keys", &got.FK},
	} {
		if err := db.x.Get(q.dest, q.sql); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	want := struct {
		Journal string `db:"journal_mode"`
		Busy    int    `db:"timeout"`
		FK      int    `db:"foreign_keys"`
	}{"wal", 10000, 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("connection settings mismatch (-want +got):\n%s", diff)
	}
	if db.Dialect() != "sqlite" {
		t.Errorf("Dialect() = %q, want sqlite", db.Dialect())
	}
}

func TestDBTimeScan(t *testing.T) {
	t.Parallel()
	want := time.Date(2026, 1, 14, 8, 30, 15, 123_000_000, time.UTC)
	tests := []struct {
		name string
		in   any
		want time.Time
		err  bool
	}{
		{"time in a zone", want.In(time.FixedZone("x", 3600)), want, false},
		{"sqlite text", "2026-01-14 08:30:15.123", want, false},
		{"bytes", []byte("2026-01-14 08:30:15.123"), want, false},
		{"no fraction", "2026-01-14 08:30:15", want.Truncate(time.Second), false},
		{"rfc3339", "2026-01-14T09:30:15.123+01:00", want, false},
		{"unix millis", want.UnixMilli(), want, false},
		{"null", nil, time.Time{}, false},
		{"garbage", "yesterday", time.Time{}, true},
		{"wrong type", 1.5, time.Time{}, true},
	}
	for _, tt := range tests {
		var got dbTime
		err := got.Scan(tt.in)
		if (err != nil) != tt.err {
			t.Errorf("%s: Scan(%v) error = %v, want error %v", tt.name, tt.in, err, tt.err)
			continue
		}
		if !got.Time.Equal(tt.want) {
			t.Errorf("%s: Scan(%v) = %v, want %v", tt.name, tt.in, got.Time, tt.want)
		}
	}
	// What SQLite stores reads back as the same instant.
	var back dbTime
	if err := back.Scan(sqliteDialect.timeArg(want)); err != nil || !back.Time.Equal(want) {
		t.Errorf("Scan(timeArg(%v)) = %v, %v; want the same instant", want, back.Time, err)
	}
}
