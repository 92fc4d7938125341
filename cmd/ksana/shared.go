package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/store/sqlstore"
)

// dbStore is the SQL store of DATABASE_URL and what shares its jobs with
// the other instances: the leases and the watcher of changes.
type dbStore struct {
	db      *sqlstore.DB
	jobs    *sqlstore.Jobs
	leases  *sqlstore.Leases
	watcher *sqlstore.Watcher
	log     *slog.Logger
}

// instanceName is host-pid-random: unique among the instances of one
// database.
func instanceName() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
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
	name := cfg.Instance
	if name == "" {
		name = instanceName()
	}
	leases, err := db.Leases(sqlstore.LeasesConfig{Instance: name, TTL: cfg.LeaseTTL, Logger: log})
	if err != nil {
		db.Close()
		return nil, err
	}
	// Refuse a second process with the name of a live one: both would
	// hold every lease of that name.
	if err := leases.Register(ctx); err != nil {
		db.Close()
		return nil, err
	}
	jobs, err := db.Jobs(sqlstore.JobsConfig{Instance: name, Leases: leases})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &dbStore{db: db, jobs: jobs, leases: leases, log: log}, nil
}

// redactURL hides the password of a database URL.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

// watch starts following the changes, before the jobs are loaded.
func (d *dbStore) watch(ctx context.Context) error {
	w, err := d.jobs.Watcher(ctx, sqlstore.WatchConfig{Logger: d.log})
	if err != nil {
		return err
	}
	d.watcher = w
	return nil
}

// start runs the leases and the watcher until the returned function is
// called; that function waits for them, the leases released.
func (d *dbStore) start(ctx context.Context, r *cron.Runner) (stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := d.leases.Run(ctx); err != nil {
			d.log.Error("ksana: leases", "error", err)
		}
	})
	wg.Go(func() { d.watcher.Run(ctx, r) })
	return func() {
		cancel()
		wg.Wait()
	}
}

// notes are the /health fields of an instance on a database; jobs_held
// is the number of jobs r holds (those of the partitions held).
func (d *dbStore) notes(r *cron.Runner) map[string]any {
	return map[string]any{
		"jobs_held":       r.Len(),
		"store":           d.db.Dialect(),
		"instance":        d.leases.Instance(),
		"partitions_held": len(d.leases.Owned()),
		"members":         len(d.leases.Members()),
	}
}

func (d *dbStore) close() error { return d.db.Close() }
