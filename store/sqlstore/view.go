package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/ksana-dev/ksana/claim"
)

var _ claim.Viewer = (*Deployments)(nil)

// Shares reports whether m is the [Membership] of the same [DB]: the one
// [Deployments.View] heartbeats into.
func (s *Deployments) Shares(m claim.Membership) bool {
	mm, ok := m.(*Membership)
	return ok && mm != nil && mm.db == s.db
}

// viewActive lists the active node-units as the CTE "act"; on PostgreSQL
// it follows the heartbeat's CTE "hb", whose row stands for the node's own
// (the SELECT sees the table as it was before the upsert).
const (
	viewActivePostgres = `WITH hb AS (` + heartbeatSQL + ` RETURNING address, usage_endpoint),
	act AS (SELECT address, usage_endpoint FROM node_unit WHERE last_seen >= {since} AND address <> ?
		UNION ALL SELECT address, usage_endpoint FROM hb) `
	viewActiveSQLite = `WITH act AS (SELECT address, usage_endpoint FROM node_unit WHERE last_seen >= {since}) `
)

// viewSummary reads, after the act CTE, one row per active node-unit with
// its count, one per missing address with its count (one full join), and a
// row with an empty address when a deployment is unassigned. {endpoint} is
// the usage endpoint, or ” when it is not asked for.
const viewSummary = `SELECT COALESCE(a.address, c.address) AS address, CAST(COALESCE(c.n, 0) AS INTEGER) AS n,
		a.address IS NOT NULL AS active, COALESCE({endpoint}, '') AS usage_endpoint
	FROM act a FULL JOIN deployment_address_count c ON c.address = a.address
	UNION ALL
	SELECT '', 0, FALSE, '' WHERE EXISTS (SELECT 1 FROM deployment
		WHERE enabled AND type = 'deployment' AND address = '' AND id <> '')`

// versionsSQL: the rows a node runs or reports, by version.
const versionsSQL = `SELECT id, updated_at FROM deployment WHERE enabled AND type = 'deployment' AND address = ?
	UNION ALL
	SELECT id, updated_at FROM deployment WHERE enabled AND (type <> 'deployment' OR type IS NULL)`

// candidateWhere is the claim condition without the address part; each
// branch of a candidate query adds its own.
const candidateWhere = `enabled AND type = 'deployment' AND id <> ''`

// getChunk bounds the ids of one Get statement, far below either
// database's limit on parameters.
const getChunk = 1000

// View implements [claim.Viewer]. It begins a transaction (REPEATABLE READ
// on PostgreSQL; on SQLite one that takes the write lock at once), upserts
// self's node_unit row with the database's clock as [Membership.Heartbeat]
// does, and reads the summary in one statement: every active node-unit with
// the number of deployments bound to it, every other address deployments
// are bound to, and whether one is unassigned, from the
// deployment_address_count table that triggers keep. The view's reads
// stay in the transaction until Commit. Pair the Deployments with the
// [Membership] of the same DB: View heartbeats into its table.
func (s *Deployments) View(ctx context.Context, self claim.NodeUnit, ttl time.Duration, endpoints bool) (claim.View, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("sqlstore: view: ttl %v must be positive", ttl)
	}
	m := s.db.Membership()
	hbArgs, err := m.heartbeatArgs(self)
	if err != nil {
		return nil, err
	}
	var opts *sql.TxOptions
	if s.db.d.writableCTE {
		opts = &sql.TxOptions{Isolation: sql.LevelRepeatableRead}
	}
	tx, err := s.db.x.BeginTxx(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: view: begin: %w", err)
	}
	v := &view{db: s.db, tx: tx}
	ep := "''"
	if endpoints {
		ep = "a.usage_endpoint"
	}
	var (
		q    string
		args []any
	)
	if s.db.d.writableCTE {
		q = viewActivePostgres + viewSummary
		args = append(hbArgs, s.db.d.sinceArg(ttl), self.Address)
	} else {
		if _, err := tx.ExecContext(ctx, s.db.d.sql(heartbeatSQL), hbArgs...); err != nil {
			tx.Rollback()
			return nil, fmt.Errorf("sqlstore: view: heartbeat %q: %w", self.Address, err)
		}
		q = viewActiveSQLite + viewSummary
		args = []any{s.db.d.sinceArg(ttl)}
	}
	q = s.db.d.sql(strings.ReplaceAll(q, "{endpoint}", ep))
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		tx.Rollback()
		return nil, fmt.Errorf("sqlstore: view: heartbeat and summary %q: %w", self.Address, err)
	}
	defer rows.Close()
	v.sum.Bound = map[string]int{}
	for rows.Next() {
		var (
			addr, endpoint string
			n              int
			active         bool
		)
		if err := rows.Scan(&addr, &n, &active, &endpoint); err != nil {
			tx.Rollback()
			return nil, fmt.Errorf("sqlstore: view: summary: %w", err)
		}
		switch {
		case active:
			v.sum.Active = append(v.sum.Active, claim.NodeUnit{Address: addr, UsageEndpoint: endpoint})
		case addr == "":
			v.sum.Unassigned = true
			continue
		}
		if n > 0 {
			v.sum.Bound[addr] = n
		}
	}
	if err := rows.Err(); err != nil {
		tx.Rollback()
		return nil, fmt.Errorf("sqlstore: view: summary: %w", err)
	}
	return v, nil
}

// view is one open [Deployments.View].
type view struct {
	db  *DB
	tx  *sqlx.Tx // nil after Commit or Close
	sum claim.Summary
}

var errViewClosed = errors.New("sqlstore: view closed")

// q is where reads go: the transaction until Commit, then the pool.
func (v *view) q() sqlx.QueryerContext {
	if v.tx != nil {
		return v.tx
	}
	return v.db.x
}

func (v *view) Summary() claim.Summary { return v.sum }

// Versions implements [claim.View] in one statement over two index ranges.
func (v *view) Versions(ctx context.Context, address string) ([]claim.Version, error) {
	rows, err := v.q().QueryxContext(ctx, v.db.d.sql(versionsSQL), address)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: versions of %q: %w", address, err)
	}
	defer rows.Close()
	var out []claim.Version
	for rows.Next() {
		var (
			id string
			at dbTime
		)
		if err := rows.Scan(&id, &at); err != nil {
			return nil, fmt.Errorf("sqlstore: versions of %q: %w", address, err)
		}
		out = append(out, claim.Version{ID: id, UpdatedAt: at.Time})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: versions of %q: %w", address, err)
	}
	return out, nil
}

// Get implements [claim.View]: one statement per 1000 ids.
func (v *view) Get(ctx context.Context, ids []string) ([]claim.Deployment, error) {
	var out []claim.Deployment
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), getChunk)]
		ids = ids[len(chunk):]
		q, args, err := v.db.d.in("SELECT "+deploymentColumns+" FROM deployment WHERE enabled AND id IN (?)", chunk)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: get deployments: %w", err)
		}
		ds, err := scanDeployments(ctx, v.q(), q, args...)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: get deployments: %w", err)
		}
		out = append(out, ds...)
	}
	return out, nil
}

// candidateBranches returns the FROM items of a candidate query: the rows
// bound to a lost address (when lost is not empty) then the unassigned
// ones, each the first n in claim order and tagged g = 0 or 1.
func candidateBranches(lost []string, n int) (string, []any) {
	branch := func(g, cond string) string {
		return `SELECT * FROM (SELECT ` + g + ` AS g, ` + deploymentColumns + ` FROM deployment
			WHERE ` + candidateWhere + ` AND ` + cond + `
			ORDER BY updated_at, created_at, id LIMIT ?) AS b` + g
	}
	if len(lost) == 0 {
		return branch("1", "address = ''"), []any{n}
	}
	return branch("0", "address IN (?)") + " UNION ALL " + branch("1", "address = ''"), []any{lost, n, n}
}

// Candidates implements [claim.View] in one statement: the first
// offset+limit of each group in claim order, by index, then the window.
func (v *view) Candidates(ctx context.Context, lost []string, offset, limit int) ([]claim.Deployment, error) {
	if limit <= 0 {
		return nil, nil
	}
	from, args := candidateBranches(lost, offset+limit)
	q, args, err := v.db.d.in(`SELECT id, type, enabled, address, package_name, package_version, command, args, env, created_at, updated_at
		FROM (`+from+`) AS c ORDER BY g, updated_at, created_at, id LIMIT ? OFFSET ?`, append(args, limit, offset)...)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: candidates: %w", err)
	}
	ds, err := scanDeployments(ctx, v.q(), q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: candidates: %w", err)
	}
	return ds, nil
}

// CountCandidates implements [claim.View] in one statement that stops
// counting at limit.
func (v *view) CountCandidates(ctx context.Context, lost []string, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	cond, args := "address = ''", []any{}
	if len(lost) > 0 {
		cond, args = "(address = '' OR address IN (?))", []any{lost}
	}
	q, args, err := v.db.d.in(`SELECT count(*) FROM (SELECT 1 AS one FROM deployment WHERE `+candidateWhere+` AND `+cond+` LIMIT ?) AS c`, append(args, limit)...)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: count candidates: %w", err)
	}
	var n int
	if err := sqlx.GetContext(ctx, v.q(), &n, q, args...); err != nil {
		return 0, fmt.Errorf("sqlstore: count candidates: %w", err)
	}
	return n, nil
}

// Commit implements [claim.View]: it commits the transaction, storing the
// heartbeat.
func (v *view) Commit(ctx context.Context) error {
	if v.tx == nil {
		return errViewClosed
	}
	tx := v.tx
	v.tx = nil
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlstore: view: commit: %w", err)
	}
	return nil
}

// Close implements [claim.View]: before Commit it rolls the transaction
// back.
func (v *view) Close() error {
	if v.tx == nil {
		return nil
	}
	tx := v.tx
	v.tx = nil
	if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("sqlstore: view: rollback: %w", err)
	}
	return nil
}
