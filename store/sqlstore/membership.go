package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ksana-dev/ksana/claim"
)

var (
	_ claim.Membership       = (*Membership)(nil)
	_ claim.HeartbeatActiver = (*Membership)(nil)
)

// Membership is the node_unit table: one row per node-unit, whose
// last_seen the database's clock stamps on every heartbeat. A node-unit is
// active while last_seen is within a TTL of the database's clock, so the
// nodes' own clocks never matter.
type Membership struct {
	db *DB
}

// heartbeatSQL upserts one node_unit row. started_at takes the node's
// StartedAt when it gives one, else the database's clock on insert.
const heartbeatSQL = `INSERT INTO node_unit (address, usage_endpoint, started_at, last_seen)
	VALUES (?, ?, COALESCE(?, {now}), {now})
	ON CONFLICT (address) DO UPDATE SET
		usage_endpoint = excluded.usage_endpoint,
		started_at = COALESCE(?, node_unit.started_at),
		last_seen = excluded.last_seen`

const activeSQL = `SELECT address, usage_endpoint, started_at, last_seen
	FROM node_unit WHERE last_seen >= {since}`

type nodeUnitRow struct {
	Address       string `db:"address"`
	UsageEndpoint string `db:"usage_endpoint"`
	StartedAt     dbTime `db:"started_at"`
	LastSeen      dbTime `db:"last_seen"`
}

func (m *Membership) heartbeatArgs(n claim.NodeUnit) ([]any, error) {
	if n.Address == "" {
		return nil, errors.New("sqlstore: heartbeat: empty address")
	}
	var started any
	if !n.StartedAt.IsZero() {
		started = m.db.d.timeArg(n.StartedAt)
	}
	return []any{n.Address, n.UsageEndpoint, started, started}, nil
}

// Heartbeat inserts or updates n, stamping last_seen with the database's
// clock (n.LastSeen is ignored). A zero n.StartedAt keeps the stored
// started_at (on insert: the database's clock).
func (m *Membership) Heartbeat(ctx context.Context, n claim.NodeUnit) error {
	args, err := m.heartbeatArgs(n)
	if err != nil {
		return err
	}
	if _, err := m.db.x.ExecContext(ctx, m.db.d.sql(heartbeatSQL), args...); err != nil {
		return fmt.Errorf("sqlstore: heartbeat %q: %w", n.Address, err)
	}
	return nil
}

// Active returns the node-units whose last_seen is within ttl of the
// database's clock, ordered by address.
func (m *Membership) Active(ctx context.Context, ttl time.Duration) ([]claim.NodeUnit, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("sqlstore: active node-units: ttl %v must be positive", ttl)
	}
	var rows []nodeUnitRow
	if err := m.db.x.SelectContext(ctx, &rows, m.db.d.sql(activeSQL+" ORDER BY address"), m.db.d.sinceArg(ttl)); err != nil {
		return nil, fmt.Errorf("sqlstore: active node-units: %w", err)
	}
	return nodeUnits(rows), nil
}

// HeartbeatActive is [Membership.Heartbeat] then [Membership.Active] in one
// statement on PostgreSQL (a data-modifying WITH) and in one local
// transaction on SQLite. The result includes n and is ordered by address.
func (m *Membership) HeartbeatActive(ctx context.Context, n claim.NodeUnit, ttl time.Duration) ([]claim.NodeUnit, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("sqlstore: heartbeat and active: ttl %v must be positive", ttl)
	}
	args, err := m.heartbeatArgs(n)
	if err != nil {
		return nil, err
	}
	var rows []nodeUnitRow
	if m.db.d.writableCTE {
		// The SELECT sees the table as it was before the upsert, so the
		// node's own row comes from RETURNING.
		q := "WITH hb AS (" + heartbeatSQL + " RETURNING address, usage_endpoint, started_at, last_seen) " +
			activeSQL + " AND address <> ? UNION ALL SELECT address, usage_endpoint, started_at, last_seen FROM hb ORDER BY address"
		args = append(args, m.db.d.sinceArg(ttl), n.Address)
		if err := m.db.x.SelectContext(ctx, &rows, m.db.d.sql(q), args...); err != nil {
			return nil, fmt.Errorf("sqlstore: heartbeat and active %q: %w", n.Address, err)
		}
		return nodeUnits(rows), nil
	}
	tx, err := m.db.x.BeginTxx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: heartbeat and active %q: %w", n.Address, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, m.db.d.sql(heartbeatSQL), args...); err != nil {
		return nil, fmt.Errorf("sqlstore: heartbeat %q: %w", n.Address, err)
	}
	if err := tx.SelectContext(ctx, &rows, m.db.d.sql(activeSQL+" ORDER BY address"), m.db.d.sinceArg(ttl)); err != nil {
		return nil, fmt.Errorf("sqlstore: active node-units: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("sqlstore: heartbeat and active %q: %w", n.Address, err)
	}
	return nodeUnits(rows), nil
}

// Leave deletes the node_unit row of address; an unknown address is not
// an error.
func (m *Membership) Leave(ctx context.Context, address string) error {
	if _, err := m.db.x.ExecContext(ctx, m.db.d.sql("DELETE FROM node_unit WHERE address = ?"), address); err != nil {
		return fmt.Errorf("sqlstore: leave %q: %w", address, err)
	}
	return nil
}

func nodeUnits(rows []nodeUnitRow) []claim.NodeUnit {
	out := make([]claim.NodeUnit, len(rows))
	for i, r := range rows {
		out[i] = claim.NodeUnit{Address: r.Address, UsageEndpoint: r.UsageEndpoint, StartedAt: r.StartedAt.Time, LastSeen: r.LastSeen.Time}
	}
	return out
}
