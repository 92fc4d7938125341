package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

var _ cron.AlertOutbox = (*Jobs)(nil)

// alertRow is a row of ksana_alert_outbox.
type alertRow struct {
	ID         string `db:"id"`
	JobID      string `db:"job_id"`
	Body       string `db:"body"`
	URL        string `db:"url"`
	Secret     string `db:"secret"`
	Attempts   int    `db:"attempts"`
	LastError  string `db:"last_error"`
	CreatedAt  int64  `db:"created_at"`
	NextAt     int64  `db:"next_at"`
	LeaseUntil int64  `db:"lease_until"`
	Dead       int    `db:"dead"`
}

const alertCols = "id, job_id, body, url, secret, attempts, last_error, created_at, next_at, lease_until, dead"

func (r *alertRow) delivery() (cron.AlertDelivery, error) {
	d := cron.AlertDelivery{ID: r.ID, URL: r.URL, Secret: r.Secret, Attempts: r.Attempts, LastError: r.LastError,
		CreatedAt: fromNanos(r.CreatedAt), NextAt: fromNanos(r.NextAt), Dead: r.Dead != 0}
	if err := json.Unmarshal([]byte(r.Body), &d.Alert); err != nil {
		return d, fmt.Errorf("sqlstore: ksana_alert_outbox row %q: body: %w", r.ID, err)
	}
	return d, nil
}

func deliveries(rows []alertRow) ([]cron.AlertDelivery, error) {
	out := make([]cron.AlertDelivery, 0, len(rows))
	for i := range rows {
		d, err := rows[i].delivery()
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// EnqueueAlerts inserts the alerts into ksana_alert_outbox in one
// transaction (see [cron.AlertOutbox]); an id there already is left.
func (s *Jobs) EnqueueAlerts(ctx context.Context, ds []cron.AlertDelivery) error {
	if len(ds) == 0 {
		return nil
	}
	tx, err := s.db.x.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlstore: enqueue alerts: %w", err)
	}
	defer tx.Rollback()
	q := s.db.d.sql(`INSERT INTO ksana_alert_outbox (` + alertCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?)
		ON CONFLICT (id) DO NOTHING`)
	for _, d := range ds {
		body, err := json.Marshal(d.Alert)
		if err != nil {
			return fmt.Errorf("sqlstore: enqueue alert %q: %w", d.ID, err)
		}
		if _, err := tx.ExecContext(ctx, q, d.ID, d.Alert.Job.ID, string(body), d.URL, d.Secret, d.Attempts, d.LastError,
			nanos(d.CreatedAt), nanos(d.NextAt), b2i(d.Dead)); err != nil {
			return fmt.Errorf("sqlstore: enqueue alert %q: %w", d.ID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlstore: enqueue alerts: %w", err)
	}
	return nil
}

// TakeAlerts takes up to max due alerts until until in one UPDATE ...
// RETURNING (see [cron.AlertOutbox]); on PostgreSQL the rows are picked
// FOR UPDATE SKIP LOCKED, so that concurrent takers on several instances
// get different rows, and SQLite has one writer at a time.
func (s *Jobs) TakeAlerts(ctx context.Context, now, until time.Time, max int) ([]cron.AlertDelivery, error) {
	lock := ""
	if s.db.d.name == "postgres" {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	n := nanos(now)
	// A read first: most polls find nothing due, and take no write lock
	// (on SQLite, the database's one writer) for it.
	var due []int
	if err := s.db.x.SelectContext(ctx, &due, s.db.d.sql(`SELECT 1 FROM ksana_alert_outbox
		WHERE dead = 0 AND next_at <= ? AND lease_until <= ? LIMIT 1`), n, n); err != nil {
		return nil, fmt.Errorf("sqlstore: take alerts: %w", err)
	}
	if len(due) == 0 {
		return nil, nil
	}
	var rows []alertRow
	err := s.db.x.SelectContext(ctx, &rows, s.db.d.sql(`UPDATE ksana_alert_outbox SET lease_until = ?
		WHERE id IN (SELECT id FROM ksana_alert_outbox WHERE dead = 0 AND next_at <= ? AND lease_until <= ?
			ORDER BY next_at, created_at LIMIT ?`+lock+`)
		AND dead = 0 AND next_at <= ? AND lease_until <= ?
		RETURNING `+alertCols), nanos(until), n, n, max, n, n)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: take alerts: %w", err)
	}
	slices.SortFunc(rows, func(a, b alertRow) int {
		if a.NextAt != b.NextAt {
			return cmpInt(a.NextAt, b.NextAt)
		}
		return cmpInt(a.CreatedAt, b.CreatedAt)
	})
	return deliveries(rows)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// SettleAlert deletes a delivered alert, or records the attempt and
// releases the row (see [cron.AlertOutbox]); a dead one deletes the dead
// rows beyond the newest [cron.MaxDeadAlerts].
func (s *Jobs) SettleAlert(ctx context.Context, d cron.AlertDelivery, delivered bool) error {
	if delivered {
		if _, err := s.db.x.ExecContext(ctx, s.db.d.sql("DELETE FROM ksana_alert_outbox WHERE id = ?"), d.ID); err != nil {
			return fmt.Errorf("sqlstore: settle alert %q: %w", d.ID, err)
		}
		return nil
	}
	if _, err := s.db.x.ExecContext(ctx, s.db.d.sql(`UPDATE ksana_alert_outbox SET attempts = ?, last_error = ?, next_at = ?,
		dead = ?, lease_until = 0 WHERE id = ?`), d.Attempts, d.LastError, nanos(d.NextAt), b2i(d.Dead), d.ID); err != nil {
		return fmt.Errorf("sqlstore: settle alert %q: %w", d.ID, err)
	}
	if d.Dead {
		if _, err := s.db.x.ExecContext(ctx, s.db.d.sql(`DELETE FROM ksana_alert_outbox WHERE dead = 1 AND id IN
			(SELECT id FROM ksana_alert_outbox WHERE dead = 1 ORDER BY created_at DESC, id DESC LIMIT 1000000000 OFFSET ?)`),
			cron.MaxDeadAlerts); err != nil {
			return fmt.Errorf("sqlstore: delete old dead alerts: %w", err)
		}
	}
	return nil
}

// ListAlerts lists the pending or the dead alerts, oldest first, and
// counts them (see [cron.AlertOutbox]).
func (s *Jobs) ListAlerts(ctx context.Context, dead bool, limit int) ([]cron.AlertDelivery, int, error) {
	var n int
	if err := s.db.x.GetContext(ctx, &n, s.db.d.sql("SELECT COUNT(*) FROM ksana_alert_outbox WHERE dead = ?"), b2i(dead)); err != nil {
		return nil, 0, fmt.Errorf("sqlstore: count alerts: %w", err)
	}
	if limit < 0 {
		limit = 1000000000
	}
	var rows []alertRow
	if err := s.db.x.SelectContext(ctx, &rows, s.db.d.sql(`SELECT `+alertCols+` FROM ksana_alert_outbox WHERE dead = ?
		ORDER BY created_at, id LIMIT ?`), b2i(dead), limit); err != nil {
		return nil, 0, fmt.Errorf("sqlstore: list alerts: %w", err)
	}
	ds, err := deliveries(rows)
	return ds, n, err
}
