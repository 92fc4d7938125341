package sqlstore

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/internal/testenv"
)

// TestConnectDoesNotMigrate: Connect leaves a fresh database without a
// table, SchemaVersion reads 0 from it without creating one, and Migrate
// afterwards brings it to SchemaVersion.
func TestConnectDoesNotMigrate(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			db, err := Connect(ctx, b.url(t))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			v, err := db.SchemaVersion(ctx)
			if err != nil || v != 0 {
				t.Fatalf("SchemaVersion = %d, %v; want 0, nil", v, err)
			}
			if got := tableNames(t, db, "table"); len(got) != 0 {
				t.Errorf("tables after Connect and SchemaVersion: %v, want none", got)
			}
			if err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			if v, err := db.SchemaVersion(ctx); err != nil || v != SchemaVersion {
				t.Errorf("SchemaVersion after Migrate = %d, %v; want %d", v, err, SchemaVersion)
			}
		})
	}
}

func TestSchemaName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pgURL := postgresTestURL(t)
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, url, want string
	}{
		{"sqlite", sqliteTestURL(t), "main"},
		{"postgres search_path", pgURL, u.Query().Get("search_path")},
		{"postgres default", testenv.PostgresURL(t), "public"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := Connect(ctx, tt.url)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			got, err := db.Schema(ctx)
			if err != nil || got != tt.want {
				t.Errorf("Schema() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestMissingSchema: a search_path naming no existing schema fails Open,
// Migrate and SchemaVersion with an error that names the search path and
// says what to do, instead of PostgreSQL's "no schema has been selected".
func TestMissingSchema(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, err := url.Parse(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", "ksana_no_such_schema")
	u.RawQuery = q.Encode()

	want := `sqlstore: no schema of search_path "ksana_no_such_schema" exists: create it (CREATE SCHEMA ksana_no_such_schema) or set search_path in the database URL to an existing schema`
	_, err = Open(ctx, u.String())
	if !errors.Is(err, ErrNoSchema) {
		t.Fatalf("Open: %v, want ErrNoSchema", err)
	}
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("Open error (-want +got):\n%s", diff)
	}
	db, err := Connect(ctx, u.String())
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer db.Close()
	var se *SchemaError
	if _, err := db.SchemaVersion(ctx); !errors.As(err, &se) || se.SearchPath != "ksana_no_such_schema" {
		t.Errorf("SchemaVersion: %v, want a *SchemaError for ksana_no_such_schema", err)
	}
	if err := db.Migrate(ctx); !errors.Is(err, ErrNoSchema) || strings.Contains(err.Error(), "SQLSTATE") {
		t.Errorf("Migrate: %v, want ErrNoSchema without the driver's message", err)
	}
}
