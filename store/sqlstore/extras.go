package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/ksana-dev/ksana/cron"
)

var (
	_ cron.PauseStore = (*Jobs)(nil)
	_ cron.AuditLog   = (*Jobs)(nil)
)

// pauseKey is the ksana_settings key of the service pause.
const pauseKey = "service_pause"

// DefaultAuditKeep is the default of [JobsConfig.AuditKeep].
const DefaultAuditKeep = 1_000_000

// LoadPause returns the service pause stored in ksana_settings, the zero
// state when none was ever saved. Every process on the database reads the
// same row.
func (s *Jobs) LoadPause(ctx context.Context) (cron.PauseState, error) {
	var v string
	err := s.db.x.GetContext(ctx, &v, s.db.d.sql("SELECT value FROM ksana_settings WHERE key = ?"), pauseKey)
	if errors.Is(err, sql.ErrNoRows) {
		return cron.PauseState{}, nil
	}
	if err != nil {
		return cron.PauseState{}, fmt.Errorf("sqlstore: read the service pause: %w", err)
	}
	var p cron.PauseState
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		return cron.PauseState{}, fmt.Errorf("sqlstore: ksana_settings %s: %w", pauseKey, err)
	}
	return p, nil
}

// SavePause stores p in ksana_settings durably, in one statement.
func (s *Jobs) SavePause(ctx context.Context, p cron.PauseState) error {
	v, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if _, err := s.db.x.ExecContext(ctx, s.db.d.sql(`INSERT INTO ksana_settings (key, value) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`), pauseKey, string(v)); err != nil {
		return fmt.Errorf("sqlstore: save the service pause: %w", err)
	}
	return nil
}

type auditRow struct {
	ID        int64  `db:"id"`
	At        int64  `db:"at"`
	Who       string `db:"who"`
	Role      string `db:"role"`
	Action    string `db:"action"`
	Method    string `db:"method"`
	Path      string `db:"path"`
	JobID     string `db:"job_id"`
	RunID     string `db:"run_id"`
	Replay    int    `db:"replay"`
	Overrides string `db:"overrides_json"`
	Before    string `db:"before_json"`
	After     string `db:"after_json"`
}

func (r *auditRow) entry() cron.AuditEntry {
	e := cron.AuditEntry{ID: r.ID, Time: fromNanos(r.At), Who: r.Who, Role: r.Role, Action: cron.Action(r.Action),
		JobID: r.JobID, RunID: r.RunID, Replay: r.Replay != 0}
	if e.Action == "" && r.Method != "" {
		// A row written before actions were recorded: its request.
		e.Action = cron.Action(r.Method + " " + r.Path)
	}
	if r.Overrides != "" {
		e.Overrides = json.RawMessage(r.Overrides)
	}
	if r.Before != "" {
		e.Before = json.RawMessage(r.Before)
	}
	if r.After != "" {
		e.After = json.RawMessage(r.After)
	}
	return e
}

// AppendAudit inserts e into ksana_audit durably and returns it with the
// id the database gave. The table keeps the newest [JobsConfig.AuditKeep]
// entries: every 1000th insert deletes the older ones. On PostgreSQL, ids
// come from a sequence: an insert that commits after a later one shows up
// behind it, so a reader paging at that moment may pass over it.
func (s *Jobs) AppendAudit(ctx context.Context, e cron.AuditEntry) (cron.AuditEntry, error) {
	e.Time = e.Time.UTC()
	var id int64
	replay := 0
	if e.Replay {
		replay = 1
	}
	if err := s.db.x.GetContext(ctx, &id, s.db.d.sql(`INSERT INTO ksana_audit (at, who, role, action, job_id, run_id, replay, overrides_json, before_json, after_json)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`), nanos(e.Time), e.Who, e.Role, string(e.Action), e.JobID, e.RunID, replay,
		string(e.Overrides), string(e.Before), string(e.After)); err != nil {
		return cron.AuditEntry{}, fmt.Errorf("sqlstore: append to the audit log: %w", err)
	}
	e.ID = id
	if keep := int64(s.auditKeep()); id%1000 == 0 && id > keep {
		if _, err := s.db.x.ExecContext(ctx, s.db.d.sql("DELETE FROM ksana_audit WHERE id <= ?"), id-keep); err != nil {
			return e, fmt.Errorf("sqlstore: trim the audit log: %w", err)
		}
	}
	return e, nil
}

func (s *Jobs) auditKeep() int {
	if s.cfg.AuditKeep > 0 {
		return s.cfg.AuditKeep
	}
	return DefaultAuditKeep
}

// Audit returns a page of ksana_audit, oldest first (keyset paging on
// id: one index range per page, however deep).
func (s *Jobs) Audit(ctx context.Context, q cron.AuditQuery) ([]cron.AuditEntry, bool, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	var where []string
	args := []any{q.After}
	where = append(where, "id > ?")
	if q.JobID != "" {
		where, args = append(where, "job_id = ?"), append(args, q.JobID)
	}
	if q.Who != "" {
		where, args = append(where, "who = ?"), append(args, q.Who)
	}
	if !q.Since.IsZero() {
		where, args = append(where, "at >= ?"), append(args, nanos(q.Since))
	}
	args = append(args, limit+1)
	var rows []auditRow
	if err := s.db.x.SelectContext(ctx, &rows, s.db.d.sql(`SELECT id, at, who, role, action, method, path, job_id, run_id, replay, overrides_json, before_json, after_json
		FROM ksana_audit WHERE `+strings.Join(where, " AND ")+" ORDER BY id LIMIT ?"), args...); err != nil {
		return nil, false, fmt.Errorf("sqlstore: read the audit log: %w", err)
	}
	more := len(rows) > limit
	if more {
		rows = rows[:limit]
	}
	out := make([]cron.AuditEntry, len(rows))
	for i := range rows {
		out[i] = rows[i].entry()
	}
	return out, more, nil
}
