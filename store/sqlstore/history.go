package sqlstore

import (
	"context"
	"fmt"
	"slices"
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
// It reads the runs along an index from the cursor on (keyset paging, no
// OFFSET): the one of (job, status), of the job, of the status or of the
// instance, after the filters given, else the one of scheduled_at; a list
// of jobs or statuses is read one job and status at a time (see
// runsQuery). A run claimed and not finished is left out.
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

// maxRunArms is the most (job, status) pairs runsQuery reads one by one;
// beyond, it reads them in one scan with IN lists.
const maxRunArms = 64

// runsQuery returns the SELECT of QueryRuns for q, in the dialect with
// its arguments, reading at most limit runs.
//
// A filter on one job, one status or both is an equality on the leading
// columns of an index of (filter..., scheduled_at, id), read backwards
// from the cursor. A list of jobs or statuses (IN) would lose the index's
// order (every run of the jobs is read and sorted), so each (job, status)
// pair of the lists is read alone, at most limit runs along its index,
// and the UNION ALL of these reads is sorted: a page reads at most
// pairs × limit rows whatever the history's length.
func (s *Jobs) runsQuery(q cron.RunQuery, limit int) (string, []any, error) {
	var where []string
	var args []any
	where = append(where, "status <> ''")
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
	jobs := uniq(q.JobIDs)
	statuses := make([]string, 0, len(q.Statuses))
	for _, v := range q.Statuses {
		statuses = append(statuses, string(v))
	}
	statuses = uniq(statuses)
	order := ` ORDER BY scheduled_at DESC, ` + id + ` DESC LIMIT ?`
	arms := max(len(jobs), 1) * max(len(statuses), 1)
	if arms == 1 || arms > maxRunArms {
		if len(jobs) == 1 {
			where, args = append(where, "job_id = ?"), append(args, jobs[0])
		} else if len(jobs) > 1 {
			where, args = append(where, "job_id IN (?)"), append(args, jobs)
		}
		if len(statuses) == 1 {
			where, args = append(where, "status = ?"), append(args, statuses[0])
		} else if len(statuses) > 1 {
			where, args = append(where, "status IN (?)"), append(args, statuses)
		}
		return s.db.d.in(`SELECT `+runColumns+` FROM ksana_run WHERE `+strings.Join(where, " AND ")+order, append(args, limit)...)
	}
	var sel []string
	var all []any
	arm := func(extra []string, vals ...any) {
		sel = append(sel, fmt.Sprintf(`SELECT %s FROM (SELECT %s FROM ksana_run WHERE %s%s) AS r%d`,
			runColumns, runColumns, strings.Join(append(extra, where...), " AND "), order, len(sel)))
		all = append(append(append(all, vals...), args...), limit)
	}
	switch {
	case len(statuses) == 0:
		for _, j := range jobs {
			arm([]string{"job_id = ?"}, j)
		}
	case len(jobs) == 0:
		for _, st := range statuses {
			arm([]string{"status = ?"}, st)
		}
	default:
		for _, j := range jobs {
			for _, st := range statuses {
				arm([]string{"job_id = ?", "status = ?"}, j, st)
			}
		}
	}
	return s.db.d.in(`SELECT `+runColumns+` FROM (`+strings.Join(sel, " UNION ALL ")+`) AS r`+order, append(all, limit)...)
}

// uniq returns the distinct values of vs, in their first order.
func uniq(vs []string) []string {
	var out []string
	for _, v := range vs {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
