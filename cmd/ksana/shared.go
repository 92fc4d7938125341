package main

import (
	"context"
	"log/slog"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
// is the number of jobs r holds (those of the partitions held). The
// lease_* fields show how the lease renewals go: lease_age_ms (since the
// last renewal) and lease_gap_max_ms near KSANA_LEASE_TTL, or a
// lease_round_max_ms of seconds, mean the database commits too slowly
// for the TTL and the instance's partitions move although it is alive.
func (d *dbStore) notes(r *cron.Runner) map[string]any {
	l := d.st.Leases()
	s := l.Stats()
	age := int64(-1)
	if !s.LastRenewed.IsZero() {
		age = time.Since(s.LastRenewed).Milliseconds()
	}
	return map[string]any{
		"jobs_held":          r.Len(),
		"store":              d.db.Dialect(),
		"instance":           l.Instance(),
		"partitions_held":    len(l.Owned()),
		"members":            len(l.Members()),
		"lease_failures":     s.Failures,
		"lease_age_ms":       age,
		"lease_round_max_ms": s.MaxRound.Milliseconds(),
		"lease_gap_max_ms":   s.MaxGap.Milliseconds(),
		"partitions_gained":  s.Gained,
		"partitions_lost":    s.Lost,
	}
}

// leaseCollector exports the lease keeper's stats, read at each scrape.
type leaseCollector struct{ l *sqlstore.Leases }

var (
	leaseRoundsDesc = prometheus.NewDesc("ksana_lease_rounds_total",
		"Lease renewal rounds, by result (ok, failed).", []string{"result"}, nil)
	leaseAgeDesc = prometheus.NewDesc("ksana_lease_age_seconds",
		"Time since the last lease renewal; near KSANA_LEASE_TTL the instance is about to lose its partitions.", nil, nil)
	leaseRoundDesc = prometheus.NewDesc("ksana_lease_round_seconds",
		"How long the last lease renewal round took.", nil, nil)
	leaseRoundMaxDesc = prometheus.NewDesc("ksana_lease_round_max_seconds",
		"The longest lease renewal round since start.", nil, nil)
	leaseGapMaxDesc = prometheus.NewDesc("ksana_lease_gap_max_seconds",
		"The longest time between two lease renewals since start (a third of KSANA_LEASE_TTL while all is well).", nil, nil)
	partitionMovesDesc = prometheus.NewDesc("ksana_partitions_moved_total",
		"Partitions this instance took (gained) or gave up (lost: released, or run out) since start.", []string{"direction"}, nil)
)

func (leaseCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{leaseRoundsDesc, leaseAgeDesc, leaseRoundDesc, leaseRoundMaxDesc, leaseGapMaxDesc, partitionMovesDesc} {
		ch <- d
	}
}

func (c leaseCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.l.Stats()
	age := 0.0
	if !s.LastRenewed.IsZero() {
		age = time.Since(s.LastRenewed).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(leaseRoundsDesc, prometheus.CounterValue, float64(s.Rounds), "ok")
	ch <- prometheus.MustNewConstMetric(leaseRoundsDesc, prometheus.CounterValue, float64(s.Failures), "failed")
	ch <- prometheus.MustNewConstMetric(leaseAgeDesc, prometheus.GaugeValue, age)
	ch <- prometheus.MustNewConstMetric(leaseRoundDesc, prometheus.GaugeValue, s.LastRound.Seconds())
	ch <- prometheus.MustNewConstMetric(leaseRoundMaxDesc, prometheus.GaugeValue, s.MaxRound.Seconds())
	ch <- prometheus.MustNewConstMetric(leaseGapMaxDesc, prometheus.GaugeValue, s.MaxGap.Seconds())
	ch <- prometheus.MustNewConstMetric(partitionMovesDesc, prometheus.CounterValue, float64(s.Gained), "gained")
	ch <- prometheus.MustNewConstMetric(partitionMovesDesc, prometheus.CounterValue, float64(s.Lost), "lost")
}

// close stops sharing (the leases released) and closes the database.
func (d *dbStore) close() error {
	err := d.st.Stop()
	if cerr := d.db.Close(); err == nil {
		err = cerr
	}
	return err
}
