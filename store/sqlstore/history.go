package sqlstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/ksana-dev/ksana/cron"
)

var (
	_ cron.RunStore = (*Jobs)(nil)
)

// RunByID returns the finished run with id runID, of any job, by the
// unique index on the run id. An unknown id, a run trimmed from its job's
// history or one claimed and not finished is [cron.ErrNotFound].
func (s *Jobs) RunByID(ctx context.Context, runID string) (cron.Run, error) {
	var rows []runRow
	if err := s.db.x.SelectContext(ctx, &rows, s.db.d.sql(`SELECT `+runColumns+` FROM ksana_run WHERE id = ? AND status <> ''`), runID); err != nil {
		return cron.Run{}, fmt.Errorf("sqlstore: run %q: %w", runID, err)
	}
	if len(rows) == 0 {
		return cron.Run{}, fmt.Errorf("%w: run %q", cron.ErrNotFound, runID)
	}
	return rows[0].run(), nil
}

// QueryRuns returns a page of the finished runs of every job, newest
// first (by scheduled_at, then run id), as [cron.RunStore.QueryRuns] describes.
// It reads one index from the cursor on (keyset paging, no OFFSET): the
// one of the job, status or instance filter when there is one, else the
// one of scheduled_at; a run claimed and not finished is left out.
func (s *Jobs) QueryRuns(ctx context.Context, q cron.RunQuery) ([]cron.Run, cron.RunCursor, error) {
	n := q.PageSize()
	text, args, err := s.runsQuery(q, n+1)
	if err != nil {
		return nil, cron.RunCursor{}, fmt.Errorf("sqlstore: query runs: %w", err)
	}
	var rows []runRow
	if err := s.db.x.SelectContext(ctx, &rows, text, args...); err != nil {
		return nil, cron.RunCursor{}, fmt.Errorf("sqlstore: query runs: %w", err)
	}
	out := make([]cron.Run, 0, min(len(rows), n))
	for i := range rows[:min(len(rows), n)] {
		out = append(out, rows[i].run())
	}
	var next cron.RunCursor
	if len(rows) > n {
		next = out[n-1].Cursor()
	}
	return out, next, nil
}

// runsQuery returns the SELECT of QueryRuns for q, in the dialect with
// its arguments, reading at most limit runs.
func (s *Jobs) runsQuery(q cron.RunQuery, limit int) (string, []any, error) {
	var where []string
	var args []any
	where = append(where, "status <> ''")
	if len(q.JobIDs) == 1 {
		where, args = append(where, "job_id = ?"), append(args, q.JobIDs[0])
	} else if len(q.JobIDs) > 1 {
		where, args = append(where, "job_id IN (?)"), append(args, q.JobIDs)
	}
	if len(q.Statuses) == 1 {
		where, args = append(where, "status = ?"), append(args, string(q.Statuses[0]))
	} else if len(q.Statuses) > 1 {
		st := make([]string, len(q.Statuses))
		for i, v := range q.Statuses {
			st[i] = string(v)
		}
		where, args = append(where, "status IN (?)"), append(args, st)
	}
	if !q.Since.IsZero() {
		where, args = append(where, "scheduled_at >= ?"), append(args, nanos(q.Since))
	}
	if !q.Until.IsZero() {
		where, args = append(where, "scheduled_at < ?"), append(args, nanos(q.Until))
	}
	if q.Instance != "" {
		where, args = append(where, "instance = ?"), append(args, q.Instance)
	}
	// Run ids compare byte by byte, as the indexes of 0008 have them.
	id := "id"
	if s.db.d == postgresDialect {
		id = `id COLLATE "C"`
	}
	if !q.After.IsZero() {
		where, args = append(where, "(scheduled_at, "+id+") < (?, ?)"), append(args, nanos(q.After.ScheduledAt), q.After.RunID)
	}
	return s.db.d.in(`SELECT `+runColumns+` FROM ksana_run WHERE `+strings.Join(where, " AND ")+
		` ORDER BY scheduled_at DESC, `+id+` DESC LIMIT ?`, append(args, limit)...)
}
