package sqlstore

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

var _ cron.IdempotencyStore = (*Jobs)(nil)

// Every idempotencySweepEvery-th reservation of a [Jobs] (and its first)
// deletes up to idempotencySweepRows rows past [cron.IdempotencyWindow],
// oldest first: bounded work, and a table that holds about the keys of
// one window.
const (
	idempotencySweepEvery = 100
	idempotencySweepRows  = 1000
)

type idemRow struct {
	Sum   string `db:"body_sum"`
	RunID string `db:"run_id"`
	At    int64  `db:"at"`
}

// ReserveIdempotencyKey reserves key for job in ksana_idempotency (see
// [cron.IdempotencyStore]): one INSERT ... ON CONFLICT that also replaces
// a row past the window, then, when another row holds the key, one read
// of it. Every process on the database reserves in the same table, so of
// concurrent reservations of a key by several instances exactly one gets
// true.
func (s *Jobs) ReserveIdempotencyKey(ctx context.Context, job, key string, e cron.IdempotencyEntry) (cron.IdempotencyEntry, bool, error) {
	e.RunID = ""
	e.At = e.At.UTC()
	at := nanos(e.At)
	e.At = fromNanos(at)
	if s.reserves.Add(1)%idempotencySweepEvery == 1 {
		if err := s.sweepIdempotency(ctx, at); err != nil {
			return cron.IdempotencyEntry{}, false, err
		}
	}
	sum := hex.EncodeToString(e.Sum[:])
	cutoff := at - int64(cron.IdempotencyWindow)
	for range 3 {
		var got int64
		err := s.db.x.GetContext(ctx, &got, s.db.d.sql(`INSERT INTO ksana_idempotency (job_id, key, body_sum, run_id, at) VALUES (?, ?, ?, '', ?)
			ON CONFLICT (job_id, key) DO UPDATE SET body_sum = excluded.body_sum, run_id = '', at = excluded.at
			WHERE ksana_idempotency.at <= ? RETURNING at`), job, key, sum, at, cutoff)
		if err == nil {
			return e, true, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return cron.IdempotencyEntry{}, false, fmt.Errorf("sqlstore: reserve idempotency key of job %q: %w", job, err)
		}
		var r idemRow
		err = s.db.x.GetContext(ctx, &r, s.db.d.sql("SELECT body_sum, run_id, at FROM ksana_idempotency WHERE job_id = ? AND key = ?"), job, key)
		if errors.Is(err, sql.ErrNoRows) {
			continue // forgotten in between: reserve again
		}
		if err != nil {
			return cron.IdempotencyEntry{}, false, fmt.Errorf("sqlstore: read idempotency key of job %q: %w", job, err)
		}
		old := cron.IdempotencyEntry{RunID: r.RunID, At: fromNanos(r.At)}
		b, err := hex.DecodeString(r.Sum)
		if err != nil || len(b) != len(old.Sum) {
			return cron.IdempotencyEntry{}, false, fmt.Errorf("sqlstore: ksana_idempotency of job %q: body_sum %q is not a SHA-256 in hex", job, r.Sum)
		}
		copy(old.Sum[:], b)
		return old, false, nil
	}
	return cron.IdempotencyEntry{}, false, fmt.Errorf("sqlstore: reserve idempotency key of job %q: the key was reserved and forgotten three times over", job)
}

// sweepIdempotency deletes up to idempotencySweepRows rows reserved
// [cron.IdempotencyWindow] or more before now (Unix nanoseconds).
func (s *Jobs) sweepIdempotency(ctx context.Context, now int64) error {
	if _, err := s.db.x.ExecContext(ctx, s.db.d.sql(`DELETE FROM ksana_idempotency WHERE (job_id, key) IN
		(SELECT job_id, key FROM ksana_idempotency WHERE at <= ? ORDER BY at LIMIT ?)`), now-int64(cron.IdempotencyWindow), idempotencySweepRows); err != nil {
		return fmt.Errorf("sqlstore: delete expired idempotency keys: %w", err)
	}
	return nil
}

// CompleteIdempotencyKey records runID in the row of job and key reserved
// at at, if it is still there without a run.
func (s *Jobs) CompleteIdempotencyKey(ctx context.Context, job, key string, at time.Time, runID string) error {
	if _, err := s.db.x.ExecContext(ctx, s.db.d.sql(`UPDATE ksana_idempotency SET run_id = ?
		WHERE job_id = ? AND key = ? AND at = ? AND run_id = ''`), runID, job, key, nanos(at)); err != nil {
		return fmt.Errorf("sqlstore: record the run of idempotency key of job %q: %w", job, err)
	}
	return nil
}

// ForgetIdempotencyKey deletes the row of job and key reserved at at if
// it has no run.
func (s *Jobs) ForgetIdempotencyKey(ctx context.Context, job, key string, at time.Time) error {
	if _, err := s.db.x.ExecContext(ctx, s.db.d.sql(`DELETE FROM ksana_idempotency
		WHERE job_id = ? AND key = ? AND at = ? AND run_id = ''`), job, key, nanos(at)); err != nil {
		return fmt.Errorf("sqlstore: forget idempotency key of job %q: %w", job, err)
	}
	return nil
}
