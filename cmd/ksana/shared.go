package main

import (
	"context"
	"log/slog"
	"net/url"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/store/sqlstore"
)

// dbStore is the SQL store of DATABASE_URL, shared with the other
// instances on the database (sqlstore.Shared: leases and the watcher of
// changes).
type dbStore struct {
	db *sqlstore.DB
	st *sqlstore.Shared
}

func openDB(cfg config, log *slog.Logger) (*dbStore, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db, err := sqlstore.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, &ConfigError{Var: "DATABASE_URL", Value: redactURL(cfg.DatabaseURL), Want: err.Error()}
	}
	if db.Dialect() == "postgres" {
		// database/sql keeps 2 idle connections by default: under
		// concurrent API writes every other statement would open a
		// connection (a new server process).
		db.SQL().SetMaxOpenConns(cfg.Workers + 16)
		db.SQL().SetMaxIdleConns(cfg.Workers + 16)
	}
	// A second process with the name of a live one is refused
	// (sqlstore.ErrInstanceInUse): both would hold every lease of that
	// name.
	st, err := db.Shared(ctx, sqlstore.SharedConfig{Instance: cfg.Instance, TTL: cfg.LeaseTTL, RunLimit: cfg.RunHistory, Logger: log})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &dbStore{db: db, st: st}, nil
}

// redactURL hides the password of a database URL.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

// notes are the /health fields of an instance on a database; jobs_held
// is the number of jobs r holds (those of the partitions held).
func (d *dbStore) notes(r *cron.Runner) map[string]any {
	l := d.st.Leases()
	return map[string]any{
		"jobs_held":       r.Len(),
		"store":           d.db.Dialect(),
		"instance":        l.Instance(),
		"partitions_held": len(l.Owned()),
		"members":         len(l.Members()),
	}
}

// close stops sharing (the leases released) and closes the database.
func (d *dbStore) close() error {
	err := d.st.Stop()
	if cerr := d.db.Close(); err == nil {
		err = cerr
	}
	return err
}
