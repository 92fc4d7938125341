package sqlstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/jmoiron/sqlx"
	"github.com/ksana-dev/ksana/cron"
)

// recordSQL is RecordBatch of one job (SQLite): written only at the
// record's version; the last-run fields only when the run is not older
// than the stored one; next_run_at unless the record is LastOnly.
const recordSQL = `UPDATE ksana_job SET
	next_run_at = CASE WHEN ? THEN next_run_at ELSE ? END,
	last_status = CASE WHEN ? >= last_run_at THEN ? ELSE last_status END,
	last_error = CASE WHEN ? >= last_run_at THEN ? ELSE last_error END,
	failures = CASE WHEN ? >= last_run_at THEN ? ELSE failures END,
	last_alert = CASE WHEN ? >= last_run_at THEN ? ELSE last_alert END,
	last_run_at = CASE WHEN ? >= last_run_at THEN ? ELSE last_run_at END
	WHERE id = ? AND version = ?`

// RecordBatch stores the bookkeeping of each job in recs, each only while
// the job's row has the record's version (see [cron.SharedStore]): the
// bookkeeping computed before a write of the job's configuration that
// this process has not seen yet is refused, and the runner writes it
// again once it holds the new version. The last-run fields are written
// only when the record's last run is not older than the stored one (a
// run-now called by another instance), next_run_at unless the record is
// LastOnly. An id that no job has is skipped. On PostgreSQL it is one
// UPDATE of every row (joined to the arrays of the new values, in the
// order of the ids, so that two instances lock shared rows in one order),
// committed with synchronous_commit off; on SQLite one transaction of one
// UPDATE per job.
func (s *Jobs) RecordBatch(ctx context.Context, recs []cron.Recorded) error {
	if len(recs) == 0 {
		return nil
	}
	if s.db.d != postgresDialect {
		return s.inTx(ctx, func(tx *sqlx.Tx) error {
			for _, r := range recs {
				last := nanos(r.LastRunAt)
				if _, err := tx.ExecContext(ctx, s.db.d.sql(recordSQL), r.LastOnly, nanos(r.NextRunAt), last, string(r.LastStatus),
					last, r.LastError, last, r.Failures, last, r.LastAlert, last, last, r.ID, r.Version); err != nil {
					return fmt.Errorf("sqlstore: record job %q: %w", r.ID, err)
				}
			}
			return nil
		})
	}
	sorted := slices.SortedFunc(slices.Values(recs), func(a, b cron.Recorded) int { return cmp.Compare(a.ID, b.ID) })
	sorted = slices.CompactFunc(sorted, func(a, b cron.Recorded) bool { return a.ID == b.ID })
	n := len(sorted)
	ids, status, errs, alerts := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	failures := make([]int32, n)
	last, next, vers := make([]int64, n), make([]int64, n), make([]int64, n)
	only := make([]bool, n)
	for i, r := range sorted {
		ids[i], last[i], next[i], status[i], errs[i] = r.ID, nanos(r.LastRunAt), nanos(r.NextRunAt), string(r.LastStatus), r.LastError
		vers[i], only[i] = r.Version, r.LastOnly
		failures[i], alerts[i] = int32(min(r.Failures, 1<<30)), r.LastAlert
	}
	if _, err := s.db.async().ExecContext(ctx, `UPDATE ksana_job AS j SET
		next_run_at = CASE WHEN v.last_only THEN j.next_run_at ELSE v.next_run_at END,
		last_run_at = CASE WHEN v.last_run_at >= j.last_run_at THEN v.last_run_at ELSE j.last_run_at END,
		last_status = CASE WHEN v.last_run_at >= j.last_run_at THEN v.last_status ELSE j.last_status END,
		last_error = CASE WHEN v.last_run_at >= j.last_run_at THEN v.last_error ELSE j.last_error END,
		failures = CASE WHEN v.last_run_at >= j.last_run_at THEN v.failures ELSE j.failures END,
		last_alert = CASE WHEN v.last_run_at >= j.last_run_at THEN v.last_alert ELSE j.last_alert END
		FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::bigint[], $7::boolean[], $8::integer[], $9::text[])
			AS v(id, last_run_at, next_run_at, last_status, last_error, version, last_only, failures, last_alert)
		WHERE j.id = v.id AND j.version = v.version`, ids, last, next, status, errs, vers, only, failures, alerts); err != nil {
		return fmt.Errorf("sqlstore: record %d jobs: %w", n, err)
	}
	return nil
}

// AppendRuns stores the finished runs, in order, as [Jobs.AppendRun]
// does; a run of a job no longer stored is skipped. On PostgreSQL the
// claimed runs are completed by one UPDATE, the runs never claimed (a
// skipped or missed slot) inserted by one INSERT, and the histories of
// the jobs of runs trimmed to their keep_runs (or RunLimit) by one DELETE, each committed with
// synchronous_commit off; on SQLite it is one transaction.
func (s *Jobs) AppendRuns(ctx context.Context, runs []cron.Run) error {
	if len(runs) == 0 {
		return nil
	}
	if s.db.d != postgresDialect {
		return s.inTx(ctx, func(tx *sqlx.Tx) error {
			for _, r := range runs {
				if _, err := s.appendRun(ctx, tx, r); err != nil && !isNotFound(err) {
					return err
				}
			}
			for _, id := range jobsOf(runs) {
				if err := s.trim(ctx, tx, id); err != nil {
					return err
				}
			}
			return nil
		})
	}
	x := s.db.async()
	a := newRunArrays(runs)
	type done struct { // a run written, with its seq
		ID  string `db:"id"`
		Seq int64  `db:"seq"`
	}
	var updated []done
	if err := x.SelectContext(ctx, &updated, `UPDATE ksana_run AS r SET triggered_at = v.triggered_at, finished_at = v.finished_at,
		status = v.status, attempts = v.attempts, http_status = v.http_status, error = v.error, latency = v.latency,
		reason = v.reason, slots = v.slots, alert = v.alert, trigger_kind = v.trigger_kind, triggered_by = v.triggered_by, attempt_log = v.attempt_log
		FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::integer[], $7::integer[], $8::text[], $9::bigint[],
			$10::text[], $11::integer[], $12::text[], $13::text[], $14::text[], $15::text[])
			AS v(id, job_id, triggered_at, finished_at, status, attempts, http_status, error, latency, reason, slots, alert, trigger_kind, triggered_by,
				attempt_log)
		WHERE r.id = v.id AND r.job_id = v.job_id RETURNING r.id, r.seq`,
		a.id, a.jobID, a.triggered, a.finished, a.status, a.attempts, a.httpStatus, a.errs, a.latency, a.reason, a.slots, a.alert,
		a.trigger, a.by, a.attemptLog); err != nil {
		return fmt.Errorf("sqlstore: append %d runs: %w", len(runs), err)
	}
	seqs := make(map[string]int64, len(runs))
	for _, d := range updated {
		seqs[d.ID] = d.Seq
	}
	var rest []cron.Run
	for _, r := range runs {
		if _, ok := seqs[r.ID]; !ok {
			rest = append(rest, r)
		}
	}
	if len(rest) > 0 {
		b := newRunArrays(rest)
		var inserted []done
		err := x.SelectContext(ctx, &inserted, `INSERT INTO ksana_run (id, job_id, slot, scheduled_at, triggered_at, finished_at,
			status, attempts, http_status, error, latency, instance, reason, slots, alert, trigger_kind, triggered_by, attempt_log)
			SELECT v.id, v.job_id, TRUE, v.scheduled_at, v.triggered_at, v.finished_at, v.status, v.attempts, v.http_status, v.error, v.latency, $11,
				v.reason, v.slots, v.alert, v.trigger_kind, v.triggered_by, v.attempt_log
			FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::integer[], $7::integer[], $8::text[], $9::bigint[], $10::bigint[],
				$12::text[], $13::integer[], $14::text[], $15::text[], $16::text[], $17::text[])
				WITH ORDINALITY AS v(id, job_id, triggered_at, finished_at, status, attempts, http_status, error, latency, scheduled_at, reason, slots, alert,
					trigger_kind, triggered_by, attempt_log, ord)
			ORDER BY v.ord
			ON CONFLICT DO NOTHING RETURNING id, seq`,
			b.id, b.jobID, b.triggered, b.finished, b.status, b.attempts, b.httpStatus, b.errs, b.latency, b.scheduled, s.cfg.Instance, b.reason, b.slots, b.alert,
			b.trigger, b.by, b.attemptLog)
		if isForeignKeyViolation(err) {
			// A job was deleted meanwhile: insert one by one, skipping its runs.
			inserted, err = nil, nil
			for _, r := range rest {
				seq, err := s.appendRun(ctx, x, r)
				if err != nil && !isNotFound(err) {
					return err
				}
				if seq != 0 {
					inserted = append(inserted, done{ID: r.ID, Seq: seq})
				}
			}
		}
		if err != nil {
			return fmt.Errorf("sqlstore: append %d runs: %w", len(rest), err)
		}
		for _, d := range inserted {
			seqs[d.ID] = d.Seq
		}
	}
	trim := jobsOf(runs)
	if _, err := x.ExecContext(ctx, `DELETE FROM ksana_run AS r USING unnest($1::text[]) AS j(id) JOIN ksana_job AS k ON k.id = j.id,
		LATERAL (SELECT seq FROM ksana_run WHERE job_id = j.id ORDER BY seq DESC LIMIT 1
			OFFSET CASE WHEN k.keep_runs > 0 THEN k.keep_runs ELSE $2 END) AS c
		WHERE r.job_id = j.id AND r.seq <= c.seq`, trim, s.cfg.RunLimit); err != nil {
		return fmt.Errorf("sqlstore: trim runs of %d jobs: %w", len(trim), err)
	}
	return nil
}

// jobsOf returns the ids of the jobs of runs, sorted, each once.
func jobsOf(runs []cron.Run) []string {
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.JobID
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// runArrays are runs as one array per column, the arguments of unnest.
type runArrays struct {
	id, jobID, status, errs, reason, alert  []string
	trigger, by, attemptLog                 []string
	triggered, finished, scheduled, latency []int64
	attempts, httpStatus, slots             []int32
}

func newRunArrays(runs []cron.Run) runArrays {
	n := len(runs)
	a := runArrays{
		id: make([]string, n), jobID: make([]string, n), status: make([]string, n), errs: make([]string, n), alert: make([]string, n),
		triggered: make([]int64, n), finished: make([]int64, n), scheduled: make([]int64, n), latency: make([]int64, n),
		attempts: make([]int32, n), httpStatus: make([]int32, n), reason: make([]string, n), slots: make([]int32, n),
		trigger: make([]string, n), by: make([]string, n), attemptLog: make([]string, n),
	}
	for i, r := range runs {
		a.id[i], a.jobID[i], a.status[i], a.errs[i] = r.ID, r.JobID, string(r.Status), r.Error
		a.triggered[i], a.finished[i], a.scheduled[i], a.latency[i] = nanos(r.TriggeredAt), nanos(r.FinishedAt), nanos(r.ScheduledAt), int64(r.Latency)
		a.attempts[i], a.httpStatus[i] = int32(r.Attempts), int32(r.HTTPStatus)
		a.reason[i], a.slots[i], a.alert[i] = r.Reason, int32(r.Slots), r.Alert
		a.trigger[i], a.by[i], a.attemptLog[i] = r.Trigger, r.TriggeredBy, attemptLog(r.AttemptLog)
	}
	return a
}

// inTx runs f in one transaction of the store's connection.
func (s *Jobs) inTx(ctx context.Context, f func(tx *sqlx.Tx) error) error {
	tx, err := s.db.async().BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlstore: begin: %w", err)
	}
	defer tx.Rollback()
	if err := f(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlstore: commit: %w", err)
	}
	return nil
}

// claimer gathers the claims that the workers of one process make at the
// same time into one INSERT (PostgreSQL). The first claim to find it idle
// writes every claim pending then, as one statement; claims made
// meanwhile wait, and when the statement is done the first of them writes
// the next batch, so each worker writes at most the one batch that holds
// its own claim.
type claimer struct {
	mu      sync.Mutex
	busy    bool
	pending []*claimReq
}

type claimReq struct {
	run  cron.Run
	slot bool
	ok   bool
	err  error
	lead bool          // woken to write the next batch, not with its result
	done chan struct{} // closed with the result, or to lead
}

// claimBatched is ClaimRun through the claimer.
func (s *Jobs) claimBatched(ctx context.Context, r cron.Run, slot bool) (bool, error) {
	req := &claimReq{run: r, slot: slot, done: make(chan struct{})}
	c := &s.claims
	c.mu.Lock()
	c.pending = append(c.pending, req)
	if c.busy {
		c.mu.Unlock()
		<-req.done
		if !req.lead {
			return req.ok, req.err
		}
		c.mu.Lock()
	}
	c.busy = true
	batch := c.pending
	c.pending = nil
	c.mu.Unlock()

	s.claimAll(ctx, batch)

	c.mu.Lock()
	if len(c.pending) > 0 {
		next := c.pending[0]
		next.lead = true
		close(next.done)
	} else {
		c.busy = false
	}
	c.mu.Unlock()
	for _, q := range batch {
		if q != req {
			close(q.done)
		}
	}
	return req.ok, req.err
}

// claimAll writes the claims of batch and sets each one's result.
func (s *Jobs) claimAll(ctx context.Context, batch []*claimReq) {
	if len(batch) == 1 {
		q := batch[0]
		q.ok, q.err = s.claimOne(ctx, q.run, q.slot)
		return
	}
	runs, slots := make([]cron.Run, len(batch)), make([]bool, len(batch))
	for i, q := range batch {
		runs[i], slots[i] = q.run, q.slot
	}
	won, err := s.insertClaims(ctx, runs, slots)
	for i, q := range batch {
		if err != nil {
			q.err = err
		} else {
			q.ok = won[i]
		}
	}
}

// claimChunk bounds the rows of one claiming INSERT.
const claimChunk = 1000

// ClaimSlots claims the slots of runs as [Jobs.ClaimRun] does each with
// slot true, and reports which were won. On PostgreSQL it is one INSERT
// of many rows per 1,000 runs, committed with synchronous_commit off; on
// SQLite one transaction. A run of a job deleted meanwhile is not won.
func (s *Jobs) ClaimSlots(ctx context.Context, runs []cron.Run) ([]bool, error) {
	won := make([]bool, 0, len(runs))
	if s.db.d != postgresDialect {
		err := s.inTx(ctx, func(tx *sqlx.Tx) error {
			for _, r := range runs {
				ok, err := s.claimWith(ctx, tx, r, true)
				if err != nil && !isNotFound(err) {
					return err
				}
				won = append(won, ok)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		return won, nil
	}
	slots := make([]bool, min(len(runs), claimChunk))
	for i := range slots {
		slots[i] = true
	}
	for start := 0; start < len(runs); start += claimChunk {
		chunk := runs[start:min(start+claimChunk, len(runs))]
		w, err := s.insertClaims(ctx, chunk, slots[:len(chunk)])
		if err != nil {
			return nil, err
		}
		won = append(won, w...)
	}
	return won, nil
}

// insertClaims inserts the claims of runs (PostgreSQL), one INSERT of
// every row, and reports which were won. When a job was deleted meanwhile
// (a foreign key fails) it claims them one by one, so that only that job's
// claims are lost.
func (s *Jobs) insertClaims(ctx context.Context, runs []cron.Run, slots []bool) ([]bool, error) {
	n := len(runs)
	ids, jobs := make([]string, n), make([]string, n)
	sched, trig := make([]int64, n), make([]int64, n)
	for i, r := range runs {
		ids[i], jobs[i], sched[i], trig[i] = r.ID, r.JobID, nanos(r.ScheduledAt), nanos(r.TriggeredAt)
	}
	var got []string
	err := s.db.async().SelectContext(ctx, &got, `INSERT INTO ksana_run (id, job_id, slot, scheduled_at, triggered_at, instance)
		SELECT v.id, v.job_id, v.slot, v.scheduled_at, v.triggered_at, $6
		FROM unnest($1::text[], $2::text[], $3::boolean[], $4::bigint[], $5::bigint[]) WITH ORDINALITY AS v(id, job_id, slot, scheduled_at, triggered_at, ord)
		ORDER BY v.ord
		ON CONFLICT DO NOTHING RETURNING id`, ids, jobs, slots, sched, trig, s.cfg.Instance)
	won := make([]bool, n)
	if isForeignKeyViolation(err) {
		for i, r := range runs {
			ok, err := s.claimOne(ctx, r, slots[i])
			if err != nil && !isNotFound(err) {
				return nil, err
			}
			won[i] = ok
		}
		return won, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sqlstore: claim %d runs: %w", n, err)
	}
	set := make(map[string]struct{}, len(got))
	for _, id := range got {
		set[id] = struct{}{}
	}
	for i, r := range runs {
		_, won[i] = set[r.ID]
	}
	return won, nil
}

// lastSlotsChunk bounds the job ids of one query of LastSlots on SQLite
// (one placeholder each).
const lastSlotsChunk = 500

// LastSlots implements [cron.SharedStore]: the latest row of a slot
// (slot = TRUE) of each job of ids. On PostgreSQL it is one query that
// reads the last entry of each job in the unique index of the slots; on
// SQLite one query per 500 jobs.
func (s *Jobs) LastSlots(ctx context.Context, ids []string) (map[string]cron.Run, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	type row struct {
		ID          string `db:"id"`
		JobID       string `db:"job_id"`
		ScheduledAt int64  `db:"scheduled_at"`
		Slots       int    `db:"slots"`
	}
	var rows []row
	if s.db.d == postgresDialect {
		if err := s.db.x.SelectContext(ctx, &rows, `SELECT r.id, r.job_id, r.scheduled_at, r.slots FROM unnest($1::text[]) AS v(job_id)
			CROSS JOIN LATERAL (SELECT id, job_id, scheduled_at, slots FROM ksana_run
				WHERE slot AND job_id = v.job_id ORDER BY scheduled_at DESC LIMIT 1) AS r`, ids); err != nil {
			return nil, fmt.Errorf("sqlstore: last slots of %d jobs: %w", len(ids), err)
		}
	} else {
		for start := 0; start < len(ids); start += lastSlotsChunk {
			chunk := ids[start:min(start+lastSlotsChunk, len(ids))]
			// SQLite takes the other columns from the row of the MAX.
			q, args, err := s.db.d.in(`SELECT id, job_id, MAX(scheduled_at) AS scheduled_at, slots FROM ksana_run
				WHERE slot AND job_id IN (?) GROUP BY job_id`, chunk)
			if err != nil {
				return nil, fmt.Errorf("sqlstore: last slots of %d jobs: %w", len(ids), err)
			}
			var part []row
			if err := s.db.x.SelectContext(ctx, &part, q, args...); err != nil {
				return nil, fmt.Errorf("sqlstore: last slots of %d jobs: %w", len(ids), err)
			}
			rows = append(rows, part...)
		}
	}
	out := make(map[string]cron.Run, len(rows))
	for _, r := range rows {
		out[r.JobID] = cron.Run{ID: r.ID, JobID: r.JobID, ScheduledAt: fromNanos(r.ScheduledAt), Slots: r.Slots}
	}
	return out, nil
}
