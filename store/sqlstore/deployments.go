package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/ksana-dev/ksana/claim"
)

var _ claim.Store = (*Deployments)(nil)

// Deployments is the deployment table: the [claim.Store] a claim loop uses,
// and the administration a command line needs ([Deployments.Add],
// [Deployments.SetEnabled], [Deployments.List], [Deployments.Delete]).
// Every method runs one statement, with every value passed as a parameter.
type Deployments struct {
	db *DB
}

// deploymentColumns reads a row; text columns are COALESCEd so that a table
// created by an older tool, with NULLs, still reads.
const deploymentColumns = `id, COALESCE(type, '') AS type, enabled, COALESCE(address, '') AS address,
	COALESCE(package_name, '') AS package_name, COALESCE(package_version, '') AS package_version,
	COALESCE(command, '') AS command, COALESCE(CAST(args AS TEXT), '') AS args,
	COALESCE(CAST(env AS TEXT), '') AS env, created_at, updated_at`

// deploymentRow is one row as scanned, in the order of deploymentColumns.
type deploymentRow struct {
	ID             string
	Type           string
	Enabled        bool
	Address        string
	PackageName    string
	PackageVersion string
	Command        string
	Args           string
	Env            string
	CreatedAt      dbTime
	UpdatedAt      dbTime
}

func (r *deploymentRow) deployment() (claim.Deployment, error) {
	d := claim.Deployment{
		ID:             r.ID,
		Type:           claim.Type(r.Type),
		Enabled:        r.Enabled,
		Address:        r.Address,
		PackageName:    r.PackageName,
		PackageVersion: r.PackageVersion,
		Command:        r.Command,
		CreatedAt:      r.CreatedAt.Time,
		UpdatedAt:      r.UpdatedAt.Time,
	}
	switch r.Args {
	case "", "null", "[]":
	default:
		if err := json.Unmarshal([]byte(r.Args), &d.Args); err != nil {
			return d, fmt.Errorf("sqlstore: deployment %q: column args is not a JSON array of strings: %w", r.ID, err)
		}
	}
	switch r.Env {
	case "", "null", "{}":
	default:
		if err := json.Unmarshal([]byte(r.Env), &d.Env); err != nil {
			return d, fmt.Errorf("sqlstore: deployment %q: column env is not a JSON object of strings: %w", r.ID, err)
		}
	}
	if len(d.Args) == 0 {
		d.Args = nil // empty reads as nil, as Add writes nil as []
	}
	if len(d.Env) == 0 {
		d.Env = nil
	}
	return d, nil
}

func (s *Deployments) query(ctx context.Context, q string, args ...any) ([]claim.Deployment, error) {
	return scanDeployments(ctx, s.db.x, s.db.d.sql(q), args...)
}

// scanDeployments runs q (in the dialect already) on x and scans the rows
// of deploymentColumns.
func scanDeployments(ctx context.Context, x sqlx.QueryerContext, q string, args ...any) ([]claim.Deployment, error) {
	rows, err := x.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		out []claim.Deployment
		r   deploymentRow
	)
	for rows.Next() {
		// Scanned by position: the loop reads every enabled row each
		// cycle, and reflection per row would cost more than the read.
		if err := rows.Scan(&r.ID, &r.Type, &r.Enabled, &r.Address, &r.PackageName, &r.PackageVersion,
			&r.Command, &r.Args, &r.Env, &r.CreatedAt, &r.UpdatedAt); err != nil {
			return nil, err
		}
		d, err := r.deployment()
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if out == nil {
		out = []claim.Deployment{}
	}
	return out, nil
}

// Deployments returns every enabled deployment, daemons and rows with an
// invalid type included, in candidate order (updated_at, created_at, id).
// A row whose args or env column is not valid JSON fails the call with an
// error naming the row and column.
func (s *Deployments) Deployments(ctx context.Context) ([]claim.Deployment, error) {
	ds, err := s.query(ctx, "SELECT "+deploymentColumns+" FROM deployment WHERE enabled ORDER BY updated_at, created_at, id")
	if err != nil {
		return nil, fmt.Errorf("sqlstore: list enabled deployments: %w", err)
	}
	return ds, nil
}

// claimWhere is the condition under which a node may bind a deployment:
// a plain deployment, enabled, unassigned or bound to a lost node.
const (
	claimWhereNoLost = `type = 'deployment' AND enabled AND address = ''`
	claimWhereLost   = `type = 'deployment' AND enabled AND (address = '' OR address IN (?))`
)

// Claim binds deployment id to address in one conditional update:
//
//	UPDATE deployment SET address = ?, updated_at = <database clock>
//	WHERE id = ? AND type = 'deployment' AND enabled
//	  AND (address = '' OR address IN (<lost>...))
//
// It reports whether the row changed; false means another node took it
// first, or it is a daemon, disabled, gone, or bound to a node not in lost.
func (s *Deployments) Claim(ctx context.Context, id, address string, lost []string) (bool, error) {
	if address == "" {
		return false, fmt.Errorf("sqlstore: claim %q: empty address", id)
	}
	q, args, err := s.db.d.in("UPDATE deployment SET address = ?, updated_at = {now} WHERE id = ? AND "+claimWhere(lost), claimArgs([]any{address, id}, lost)...)
	if err != nil {
		return false, fmt.Errorf("sqlstore: claim %q: %w", id, err)
	}
	res, err := s.db.x.ExecContext(ctx, q, args...)
	if err != nil {
		return false, fmt.Errorf("sqlstore: claim %q: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("sqlstore: claim %q: %w", id, err)
	}
	return n == 1, nil
}

func claimWhere(lost []string) string {
	if len(lost) == 0 {
		return claimWhereNoLost
	}
	return claimWhereLost
}

func claimArgs(args []any, lost []string) []any {
	if len(lost) == 0 {
		return args
	}
	return append(args, lost)
}

// ClaimMany is [Deployments.Claim] for several ids in one statement
// (UPDATE ... WHERE id IN (...) AND <the same condition> RETURNING id). It
// returns the ids it bound; with no ids it returns nil and runs nothing.
func (s *Deployments) ClaimMany(ctx context.Context, ids []string, address string, lost []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if address == "" {
		return nil, errors.New("sqlstore: claim many: empty address")
	}
	q, args, err := s.db.d.in("UPDATE deployment SET address = ?, updated_at = {now} WHERE id IN (?) AND "+claimWhere(lost)+" RETURNING id", claimArgs([]any{address, ids}, lost)...)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: claim many: %w", err)
	}
	var claimed []string
	if err := s.db.x.SelectContext(ctx, &claimed, q, args...); err != nil {
		return nil, fmt.Errorf("sqlstore: claim many: %w", err)
	}
	return claimed, nil
}

// Release unbinds deployment id from address in one conditional update
// (WHERE id = ? AND type = 'deployment' AND address = ?) and reports
// whether the row changed. An empty address matches nothing, without a
// statement.
func (s *Deployments) Release(ctx context.Context, id, address string) (bool, error) {
	if address == "" {
		return false, nil
	}
	res, err := s.db.x.ExecContext(ctx, s.db.d.sql("UPDATE deployment SET address = '', updated_at = {now} WHERE id = ? AND type = 'deployment' AND address = ?"), id, address)
	if err != nil {
		return false, fmt.Errorf("sqlstore: release %q: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("sqlstore: release %q: %w", id, err)
	}
	return n == 1, nil
}

// Add inserts d. d must pass [claim.Deployment.Validate] (an empty Type
// means "deployment"); CreatedAt and UpdatedAt are ignored and set by the
// database's clock. An existing id is [ErrExists], and the row stays as it
// was.
func (s *Deployments) Add(ctx context.Context, d claim.Deployment) error {
	if d.Type == "" {
		d.Type = claim.TypeDeployment
	}
	if err := d.Validate(); err != nil {
		return fmt.Errorf("sqlstore: add deployment: %w", err)
	}
	args, env := "[]", "{}"
	if d.Args != nil {
		b, err := json.Marshal(d.Args)
		if err != nil {
			return fmt.Errorf("sqlstore: add deployment %q: args: %w", d.ID, err)
		}
		args = string(b)
	}
	if d.Env != nil {
		b, err := json.Marshal(d.Env)
		if err != nil {
			return fmt.Errorf("sqlstore: add deployment %q: env: %w", d.ID, err)
		}
		env = string(b)
	}
	res, err := s.db.x.ExecContext(ctx, s.db.d.sql(`INSERT INTO deployment
		(id, type, enabled, address, package_name, package_version, command, args, env, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, {now}, {now})
		ON CONFLICT (id) DO NOTHING`),
		d.ID, string(d.Type), d.Enabled, d.Address, d.PackageName, d.PackageVersion, d.Command, args, env)
	if err != nil {
		return fmt.Errorf("sqlstore: add deployment %q: %w", d.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("sqlstore: add deployment %q: %w", d.ID, err)
	} else if n == 0 {
		return fmt.Errorf("%w: %q", ErrExists, d.ID)
	}
	return nil
}

// Get returns deployment id, enabled or not; a missing id is [ErrNotFound].
func (s *Deployments) Get(ctx context.Context, id string) (claim.Deployment, error) {
	ds, err := s.query(ctx, "SELECT "+deploymentColumns+" FROM deployment WHERE id = ?", id)
	if err != nil {
		return claim.Deployment{}, fmt.Errorf("sqlstore: get deployment %q: %w", id, err)
	}
	if len(ds) == 0 {
		return claim.Deployment{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return ds[0], nil
}

// List returns every deployment, enabled or not, ordered by created_at
// then id.
func (s *Deployments) List(ctx context.Context) ([]claim.Deployment, error) {
	ds, err := s.query(ctx, "SELECT "+deploymentColumns+" FROM deployment ORDER BY created_at, id")
	if err != nil {
		return nil, fmt.Errorf("sqlstore: list deployments: %w", err)
	}
	return ds, nil
}

// SetEnabled enables or disables deployment id; a missing id is
// [ErrNotFound]. The address is kept: a deployment disabled and enabled
// again returns to its node if that node is still active, and is taken
// over like any other otherwise.
func (s *Deployments) SetEnabled(ctx context.Context, id string, enabled bool) error {
	res, err := s.db.x.ExecContext(ctx, s.db.d.sql("UPDATE deployment SET enabled = ?, updated_at = {now} WHERE id = ?"), enabled, id)
	if err != nil {
		return fmt.Errorf("sqlstore: set enabled of %q: %w", id, err)
	}
	return oneRow(res, id)
}

// Delete removes deployment id; a missing id is [ErrNotFound].
func (s *Deployments) Delete(ctx context.Context, id string) error {
	res, err := s.db.x.ExecContext(ctx, s.db.d.sql("DELETE FROM deployment WHERE id = ?"), id)
	if err != nil {
		return fmt.Errorf("sqlstore: delete %q: %w", id, err)
	}
	return oneRow(res, id)
}

func oneRow(res sql.Result, id string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlstore: %q: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return nil
}
