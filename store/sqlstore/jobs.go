package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/ksana-dev/ksana/cron"
)

var (
	_ cron.Store       = (*Jobs)(nil)
	_ cron.RunStore    = (*Jobs)(nil)
	_ cron.SharedStore = (*Jobs)(nil)
)

// JobsConfig tunes [DB.Jobs]. The zero value is ready to use.
type JobsConfig struct {
	// RunLimit is how many runs per job the history keeps, for a job
	// whose keep_runs ([cron.Job.KeepRuns]) is 0. Default (0)
	// [cron.DefaultRunLimit].
	RunLimit int
	// Instance names this process in the runs it claims (column instance
	// of ksana_run). Default "" (none).
	Instance string
	// AuditKeep is how many entries of the audit log (ksana_audit, see
	// [Jobs.AppendAudit]) are kept: the newest. Default (0)
	// [DefaultAuditKeep], a million.
	AuditKeep int
	// Leases, when set, makes the store an owner of the jobs of the
	// partitions it holds ([Jobs.Owns]); nil owns every job (one runner
	// on the database).
	Leases *Leases
}

// Jobs is cron's job store on the ksana_job and ksana_run tables: a
// [cron.SharedStore] (so a [cron.Store] and [cron.RunStore]); every
// write is durable when it returns: Flush has nothing to do. See the package documentation, "Cron jobs" and
// "Sharing cron jobs".
type Jobs struct {
	db       *DB
	cfg      JobsConfig
	claims   claimer
	reserves atomic.Uint64 // idempotency keys reserved, for the sweep
}

// Jobs returns cron's job store on db.
func (db *DB) Jobs(cfg JobsConfig) (*Jobs, error) {
	if cfg.RunLimit < 0 {
		return nil, fmt.Errorf("sqlstore: jobs: JobsConfig.RunLimit must not be negative, got %d", cfg.RunLimit)
	}
	if cfg.RunLimit == 0 {
		cfg.RunLimit = cron.DefaultRunLimit
	}
	if cfg.AuditKeep < 0 {
		return nil, fmt.Errorf("sqlstore: jobs: JobsConfig.AuditKeep must not be negative, got %d", cfg.AuditKeep)
	}
	return &Jobs{db: db, cfg: cfg}, nil
}

// nanos is t as Unix nanoseconds, 0 for the zero time.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

type jobRow struct {
	ID         string `db:"id"`
	Version    int64  `db:"version"`
	Config     string `db:"config"`
	LastRunAt  int64  `db:"last_run_at"`
	NextRunAt  int64  `db:"next_run_at"`
	LastStatus string `db:"last_status"`
	LastError  string `db:"last_error"`
	Failures   int    `db:"failures"`
	LastAlert  string `db:"last_alert"`
}

func (r *jobRow) job() (cron.Job, error) {
	var j cron.Job
	if err := json.Unmarshal([]byte(r.Config), &j); err != nil {
		return cron.Job{}, fmt.Errorf("sqlstore: job %q: config column: %w", r.ID, err)
	}
	j.ID = r.ID
	cron.Bookkeeping{LastRunAt: fromNanos(r.LastRunAt), NextRunAt: fromNanos(r.NextRunAt),
		LastStatus: cron.Status(r.LastStatus), LastError: r.LastError, Failures: r.Failures, LastAlert: r.LastAlert}.Apply(&j)
	return j, nil
}

const jobColumns = "id, version, config, last_run_at, next_run_at, last_status, last_error, failures, last_alert"

// partitions is the number of partitions of the job ids: that of
// JobsConfig.Leases, else [DefaultPartitions].
func (s *Jobs) partitions() int {
	if s.cfg.Leases != nil {
		return s.cfg.Leases.cfg.Partitions
	}
	return DefaultPartitions
}

// Load returns the jobs in creation order: every job without
// [JobsConfig.Leases]; with them, only the jobs of the partitions held
// now (none before the leases' first round: a [Watcher] loads the jobs
// of each partition as it is gained). A row whose config column cannot
// be read is an error naming the job.
func (s *Jobs) Load(ctx context.Context) ([]cron.Job, error) {
	jobs, _, err := s.LoadHeld(ctx)
	return jobs, err
}

// LoadHeld is [Jobs.Load] with the version of each job (see
// [cron.SharedStore]).
func (s *Jobs) LoadHeld(ctx context.Context) ([]cron.Job, []int64, error) {
	if s.cfg.Leases != nil {
		return s.loadPartitions(ctx, s.cfg.Leases.Owned())
	}
	return s.query(ctx, "SELECT "+jobColumns+" FROM ksana_job ORDER BY seq, id")
}

// LoadPartitions returns the jobs of the given partitions (see
// [Partition]) in creation order, through the index on ksana_job's part
// column: one query per 1024 partitions.
func (s *Jobs) LoadPartitions(ctx context.Context, parts []int) ([]cron.Job, error) {
	jobs, _, err := s.loadPartitions(ctx, parts)
	return jobs, err
}

// loadPartitions is LoadPartitions with the version of each job.
func (s *Jobs) loadPartitions(ctx context.Context, parts []int) ([]cron.Job, []int64, error) {
	var out []cron.Job
	var vers []int64
	for start := 0; start < len(parts); start += 1024 {
		q, args, err := s.db.d.in("SELECT "+jobColumns+" FROM ksana_job WHERE part IN (?) ORDER BY seq, id", parts[start:min(start+1024, len(parts))])
		if err != nil {
			return nil, nil, fmt.Errorf("sqlstore: load jobs of partitions: %w", err)
		}
		jobs, v, err := s.query(ctx, q, args...)
		if err != nil {
			return nil, nil, err
		}
		out, vers = append(out, jobs...), append(vers, v...)
	}
	return out, vers, nil
}

// PageJobs returns up to q.Limit stored jobs (0 or less: no limit) whose
// id or name contains q.Text, ignoring case, and that q.Keep (when not
// nil) returns true for, in creation order, after the job with id
// q.After ("": from the first), and whether more jobs follow the last one
// returned; an After that names no job is [cron.ErrNotFound]. It reads
// the table in batches of rows by seq, so a filter that matches few jobs
// reads many rows: cron's Runner.List calls it for a runner that holds
// only its share of the jobs.
func (s *Jobs) PageJobs(ctx context.Context, q cron.JobQuery) ([]cron.Job, bool, error) {
	after, limit, keep := q.After, q.Limit, q.Keep
	if text := q.Text; text != "" {
		keep = func(j *cron.Job) bool {
			return (containsFold(j.ID, text) || containsFold(j.Name, text)) && (q.Keep == nil || q.Keep(j))
		}
	}
	var from int64
	if after != "" {
		err := s.db.x.GetContext(ctx, &from, s.db.d.sql("SELECT seq FROM ksana_job WHERE id = ?"), after)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, false, fmt.Errorf("%w: %q", cron.ErrNotFound, after)
		}
		if err != nil {
			return nil, false, fmt.Errorf("sqlstore: page jobs: %w", err)
		}
	}
	batch := 512
	if limit > 0 && keep == nil {
		batch = limit + 1
	}
	var out []cron.Job
	for {
		type pageRow struct {
			Seq int64 `db:"seq"`
			jobRow
		}
		var rows []pageRow
		if err := s.db.x.SelectContext(ctx, &rows, s.db.d.sql("SELECT seq, "+jobColumns+" FROM ksana_job WHERE seq > ? ORDER BY seq LIMIT ?"), from, batch); err != nil {
			return nil, false, fmt.Errorf("sqlstore: page jobs: %w", err)
		}
		for i := range rows {
			if limit > 0 && len(out) == limit {
				return out, true, nil
			}
			j, err := rows[i].job()
			if err != nil {
				return nil, false, err
			}
			if keep != nil && !keep(&j) {
				continue
			}
			out = append(out, j)
		}
		if len(rows) < batch {
			return out, false, nil
		}
		from = rows[len(rows)-1].Seq
	}
}

// CountJobs returns the number of stored jobs enabled and paused
// (disabled), from the counts that triggers keep per partition in
// ksana_job_count: it reads at most one row per partition, whatever the
// number of jobs.
func (s *Jobs) CountJobs(ctx context.Context) (enabled, paused int, err error) {
	var c struct {
		On  int `db:"enabled_n"`
		Off int `db:"paused_n"`
	}
	if err := s.db.x.GetContext(ctx, &c, "SELECT COALESCE(SUM(enabled), 0) AS enabled_n, COALESCE(SUM(paused), 0) AS paused_n FROM ksana_job_count"); err != nil {
		return 0, 0, fmt.Errorf("sqlstore: count jobs: %w", err)
	}
	return c.On, c.Off, nil
}

// query runs a SELECT of jobColumns and decodes its rows, with the
// version of each.
func (s *Jobs) query(ctx context.Context, q string, args ...any) ([]cron.Job, []int64, error) {
	rows, err := s.db.x.QueryxContext(ctx, q, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("sqlstore: load jobs: %w", err)
	}
	defer rows.Close()
	var out []cron.Job
	var vers []int64
	for rows.Next() {
		var r jobRow
		if err := rows.StructScan(&r); err != nil {
			return nil, nil, fmt.Errorf("sqlstore: load jobs: %w", err)
		}
		j, err := r.job()
		if err != nil {
			return nil, nil, err
		}
		out, vers = append(out, j), append(vers, r.Version)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("sqlstore: load jobs: %w", err)
	}
	return out, vers, nil
}

// Read returns job id as stored and its version, or an error wrapping
// [cron.ErrNotFound].
func (s *Jobs) Read(ctx context.Context, id string) (cron.Job, int64, error) {
	var r jobRow
	err := s.db.x.GetContext(ctx, &r, s.db.d.sql("SELECT "+jobColumns+" FROM ksana_job WHERE id = ?"), id)
	if errors.Is(err, sql.ErrNoRows) {
		return cron.Job{}, 0, fmt.Errorf("%w: %q", cron.ErrNotFound, id)
	}
	if err != nil {
		return cron.Job{}, 0, fmt.Errorf("sqlstore: get job %q: %w", id, err)
	}
	j, err := r.job()
	return j, r.Version, err
}

// Save creates or replaces job j, durably, in one statement. A replaced
// job keeps its place in the creation order. An empty id is an error.
func (s *Jobs) Save(ctx context.Context, j cron.Job) error {
	_, err := s.Write(ctx, j, -1)
	return err
}

// Write stores job j durably, in one statement, and returns its version:
// for a new job the time of its creation in nanoseconds (so that a job
// deleted and created again never takes up a version of the one before),
// one more than it had for a replaced one, which keeps its place in the
// creation order. With version 0 it creates j, and an id
// already stored (by any process) is [cron.ErrExists]; with a version
// above 0 it replaces the job only while the row has that version
// (UPDATE ... WHERE version = ?), else [cron.ErrConflict], or
// [cron.ErrNotFound] when the job is gone; with a negative version it
// replaces the job whatever its version, or adds it. An empty id is an
// error.
func (s *Jobs) Write(ctx context.Context, j cron.Job, version int64) (int64, error) {
	if j.ID == "" {
		return 0, errors.New("sqlstore: save job: empty id")
	}
	b := j.Bookkeeping()
	cron.Bookkeeping{}.Apply(&j)
	cfg, err := json.Marshal(j)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: save job %q: %w", j.ID, err)
	}
	var vers []int64
	if version > 0 {
		err := s.db.x.SelectContext(ctx, &vers, s.db.d.sql(`UPDATE ksana_job SET config = ?, enabled = ?, last_run_at = ?, next_run_at = ?,
			last_status = ?, last_error = ?, failures = ?, last_alert = ?, keep_runs = ?, version = version + 1
			WHERE id = ? AND version = ? RETURNING version`), string(cfg), !j.Paused,
			nanos(b.LastRunAt), nanos(b.NextRunAt), string(b.LastStatus), b.LastError, b.Failures, b.LastAlert, j.KeepRuns, j.ID, version)
		if err != nil {
			return 0, fmt.Errorf("sqlstore: save job %q: %w", j.ID, err)
		}
		if len(vers) == 0 {
			var n int
			if err := s.db.x.GetContext(ctx, &n, s.db.d.sql("SELECT COUNT(*) FROM ksana_job WHERE id = ?"), j.ID); err != nil {
				return 0, fmt.Errorf("sqlstore: save job %q: %w", j.ID, err)
			}
			if n == 0 {
				return 0, fmt.Errorf("sqlstore: save job %q: %w", j.ID, cron.ErrNotFound)
			}
			return 0, fmt.Errorf("sqlstore: save job %q at version %d: %w", j.ID, version, cron.ErrConflict)
		}
		return vers[0], nil
	}
	// A new job's first version is the time of its creation in
	// nanoseconds: a job deleted and created again never takes up a
	// version the one before had, so a write made from a read of that
	// one is a conflict.
	q := `INSERT INTO ksana_job (id, part, enabled, version, config, last_run_at, next_run_at, last_status, last_error, failures, last_alert, keep_runs)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	if s.db.d != postgresDialect {
		q = `INSERT INTO ksana_job (id, part, enabled, version, seq, config, last_run_at, next_run_at, last_status, last_error, failures, last_alert, keep_runs)
			VALUES (?, ?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM ksana_job), ?, ?, ?, ?, ?, ?, ?, ?)`
	}
	if version == 0 {
		q += " ON CONFLICT (id) DO NOTHING"
	} else {
		q += ` ON CONFLICT (id) DO UPDATE SET config = excluded.config, enabled = excluded.enabled, last_run_at = excluded.last_run_at,
			next_run_at = excluded.next_run_at, last_status = excluded.last_status, last_error = excluded.last_error,
			failures = excluded.failures, last_alert = excluded.last_alert, keep_runs = excluded.keep_runs, version = ksana_job.version + 1`
	}
	if err := s.db.x.SelectContext(ctx, &vers, s.db.d.sql(q+" RETURNING version"), j.ID, Partition(j.ID, s.partitions()), !j.Paused, time.Now().UnixNano(), string(cfg),
		nanos(b.LastRunAt), nanos(b.NextRunAt), string(b.LastStatus), b.LastError, b.Failures, b.LastAlert, j.KeepRuns); err != nil {
		return 0, fmt.Errorf("sqlstore: save job %q: %w", j.ID, err)
	}
	if len(vers) == 0 {
		return 0, fmt.Errorf("sqlstore: insert job %q: %w", j.ID, cron.ErrExists)
	}
	return vers[0], nil
}

// Delete removes job id and its runs durably; an unknown id is
// [cron.ErrNotFound].
func (s *Jobs) Delete(ctx context.Context, id string) error {
	res, err := s.db.x.ExecContext(ctx, s.db.d.sql("DELETE FROM ksana_job WHERE id = ?"), id)
	if err != nil {
		return fmt.Errorf("sqlstore: delete job %q: %w", id, err)
	}
	return affected(res, id)
}

func affected(res sql.Result, id string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlstore: job %q: rows affected: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %q", cron.ErrNotFound, id)
	}
	return nil
}

// Record stores the bookkeeping of job id (one UPDATE); an unknown id is
// [cron.ErrNotFound]. As cron.Store allows, it need not be durable when it
// returns: on PostgreSQL it commits with synchronous_commit off.
func (s *Jobs) Record(ctx context.Context, id string, b cron.Bookkeeping) error {
	res, err := s.db.async().ExecContext(ctx, s.db.d.sql(`UPDATE ksana_job SET last_run_at = ?, next_run_at = ?, last_status = ?, last_error = ?,
		failures = ?, last_alert = ? WHERE id = ?`), nanos(b.LastRunAt), nanos(b.NextRunAt), string(b.LastStatus), b.LastError, b.Failures, b.LastAlert, id)
	// Record is cron.Store's write of bookkeeping, whatever the version: a
	// runner over Jobs writes through RecordBatch.
	if err != nil {
		return fmt.Errorf("sqlstore: record job %q: %w", id, err)
	}
	return affected(res, id)
}

// Flush does nothing: every write is durable when it returns.
func (s *Jobs) Flush(ctx context.Context) error { return nil }

// Owns reports whether this process fires job id: whether its
// [JobsConfig.Leases] hold the lease of the job's partition, unexpired by
// the local clock. Without Leases it owns every job.
func (s *Jobs) Owns(id string) bool {
	return s.cfg.Leases == nil || s.cfg.Leases.Owns(id)
}

func isNotFound(err error) bool { return errors.Is(err, cron.ErrNotFound) }

// isForeignKeyViolation reports a run of a job that does not exist.
func isForeignKeyViolation(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "SQLSTATE 23503") || strings.Contains(msg, "FOREIGN KEY constraint failed")
}

// RunsInFlight implements [cron.RunCounter]: the runs of job id that
// another process has claimed and not finished, whose time is not after
// now, while that process is alive (its heartbeat in ksana_member is
// within the lease TTL; without [JobsConfig.Leases], any process). The
// runs of this process are left out: its runner counts its own. One
// query through the index of the unfinished runs. A finished run counts
// until its process has written its record, which it does in batches a
// few milliseconds apart.
func (s *Jobs) RunsInFlight(ctx context.Context, id string, now time.Time) (int, error) {
	q, args := `SELECT COUNT(*) FROM ksana_run WHERE status = '' AND scheduled_at <= ? AND job_id = ? AND instance <> ''
		AND instance <> ?`, []any{now.UnixNano(), id, s.cfg.Instance}
	if s.cfg.Leases != nil {
		q += ` AND instance IN (SELECT instance FROM ksana_member WHERE last_seen >= {since})`
		args = append(args, s.db.d.sinceArg(s.cfg.Leases.TTL()))
	}
	var n int
	if err := s.db.x.GetContext(ctx, &n, s.db.d.sql(q), args...); err != nil {
		return 0, fmt.Errorf("sqlstore: runs in flight of job %q: %w", id, err)
	}
	return n, nil
}

var _ cron.RunCounter = (*Jobs)(nil)

// ClaimRun inserts the run row of r before its callback is called. With
// slot true the row is unique on (job id, scheduled_at): when another
// process inserted it first, ClaimRun returns false and the run must not
// be called. A run of an unknown job is [cron.ErrNotFound].
//
// On PostgreSQL the insert commits with synchronous_commit off: the row
// excludes every later claim at once, without waiting for the disk. Only
// a crash of the database server within about 600ms of a claim can lose
// it; a slot is never claimed again afterwards by the runners (each tries
// a slot once), so this costs nothing but the run's history row.
//
// On PostgreSQL the claims that the workers make at the same time are
// written together, as one INSERT of many rows: under load a process
// makes far fewer round trips and transactions than it calls runs, and a
// claim waits at most for the one batch written before its own.
func (s *Jobs) ClaimRun(ctx context.Context, r cron.Run, slot bool) (bool, error) {
	if s.db.d == postgresDialect {
		return s.claimBatched(ctx, r, slot)
	}
	return s.claimOne(ctx, r, slot)
}

// claimOne is ClaimRun of one run, in one statement.
func (s *Jobs) claimOne(ctx context.Context, r cron.Run, slot bool) (bool, error) {
	return s.claimWith(ctx, s.db.async(), r, slot)
}

// claimWith is claimOne through x.
func (s *Jobs) claimWith(ctx context.Context, x sqlx.ExecerContext, r cron.Run, slot bool) (bool, error) {
	res, err := x.ExecContext(ctx, s.db.d.sql(`INSERT INTO ksana_run (id, job_id, slot, scheduled_at, triggered_at, instance)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`),
		r.ID, r.JobID, slot, nanos(r.ScheduledAt), nanos(r.TriggeredAt), s.cfg.Instance)
	if isForeignKeyViolation(err) {
		return false, fmt.Errorf("sqlstore: claim run of job %q: %w", r.JobID, cron.ErrNotFound)
	}
	if err != nil {
		return false, fmt.Errorf("sqlstore: claim run of job %q at %s: %w", r.JobID, r.ScheduledAt.Format(time.RFC3339Nano), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("sqlstore: claim run of job %q: %w", r.JobID, err)
	}
	return n == 1, nil
}

// AppendRun stores the finished run r: it completes the row that
// [Jobs.ClaimRun] inserted, or inserts one (a skipped or missed slot, which
// is not called), unless a run of the same slot exists already. Then it
// drops the job's oldest runs beyond its keep_runs, or RunLimit when it
// has none. An unknown job is
// [cron.ErrNotFound]. Like Record, it need not be durable when it
// returns: on PostgreSQL it commits with synchronous_commit off. A runner
// writes its runs through [Jobs.AppendRuns] instead, in batches.
func (s *Jobs) AppendRun(ctx context.Context, r cron.Run) error {
	x := s.db.async()
	if _, err := s.appendRun(ctx, x, r); err != nil {
		return err
	}
	return s.trim(ctx, x, r.JobID)
}

// appendRun completes or inserts the row of the finished run r through x
// and returns its seq, 0 when a run of the same slot exists already.
func (s *Jobs) appendRun(ctx context.Context, x sqlx.ExtContext, r cron.Run) (int64, error) {
	var seqs []int64
	if err := sqlx.SelectContext(ctx, x, &seqs, s.db.d.sql(`UPDATE ksana_run SET triggered_at = ?, finished_at = ?, status = ?, attempts = ?,
		http_status = ?, error = ?, latency = ?, reason = ?, slots = ?, alert = ?, trigger_kind = ?, triggered_by = ?, attempt_log = ? WHERE id = ? AND job_id = ? RETURNING seq`),
		nanos(r.TriggeredAt), nanos(r.FinishedAt), string(r.Status), r.Attempts, r.HTTPStatus, r.Error, int64(r.Latency), r.Reason, r.Slots, r.Alert,
		r.Trigger, r.TriggeredBy, attemptLog(r.AttemptLog), r.ID, r.JobID); err != nil {
		return 0, fmt.Errorf("sqlstore: append run %q of job %q: %w", r.ID, r.JobID, err)
	}
	if len(seqs) == 0 {
		err := sqlx.SelectContext(ctx, x, &seqs, s.db.d.sql(`INSERT INTO ksana_run (id, job_id, slot, scheduled_at, triggered_at, finished_at,
			status, attempts, http_status, error, latency, instance, reason, slots, alert, trigger_kind, triggered_by, attempt_log)
			VALUES (?, ?, TRUE, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING seq`),
			r.ID, r.JobID, nanos(r.ScheduledAt), nanos(r.TriggeredAt), nanos(r.FinishedAt), string(r.Status), r.Attempts, r.HTTPStatus,
			r.Error, int64(r.Latency), s.cfg.Instance, r.Reason, r.Slots, r.Alert, r.Trigger, r.TriggeredBy, attemptLog(r.AttemptLog))
		if isForeignKeyViolation(err) {
			return 0, fmt.Errorf("sqlstore: append run of job %q: %w", r.JobID, cron.ErrNotFound)
		}
		if err != nil {
			return 0, fmt.Errorf("sqlstore: append run %q of job %q: %w", r.ID, r.JobID, err)
		}
	}
	if len(seqs) == 0 {
		return 0, nil
	}
	return seqs[0], nil
}

// trim drops the oldest runs of job id beyond its keep_runs, or
// RunLimit when it has none.
func (s *Jobs) trim(ctx context.Context, x sqlx.ExecerContext, id string) error {
	if _, err := x.ExecContext(ctx, s.db.d.sql(`DELETE FROM ksana_run WHERE job_id = ? AND seq <= (
			SELECT seq FROM ksana_run WHERE job_id = ? ORDER BY seq DESC LIMIT 1
			OFFSET COALESCE((SELECT CASE WHEN keep_runs > 0 THEN keep_runs END FROM ksana_job WHERE id = ?), ?))`), id, id, id, s.cfg.RunLimit); err != nil {
		return fmt.Errorf("sqlstore: trim runs of job %q: %w", id, err)
	}
	return nil
}

type runRow struct {
	ID          string `db:"id"`
	JobID       string `db:"job_id"`
	Instance    string `db:"instance"`
	ScheduledAt int64  `db:"scheduled_at"`
	TriggeredAt int64  `db:"triggered_at"`
	FinishedAt  int64  `db:"finished_at"`
	Status      string `db:"status"`
	Attempts    int    `db:"attempts"`
	HTTPStatus  int    `db:"http_status"`
	Error       string `db:"error"`
	Latency     int64  `db:"latency"`
	Reason      string `db:"reason"`
	Slots       int    `db:"slots"`
	Alert       string `db:"alert"`
	Trigger     string `db:"trigger_kind"`
	TriggeredBy string `db:"triggered_by"`
	AttemptLog  string `db:"attempt_log"`
}

// run returns the run of row r. An attempt log that does not parse (a
// row written by hand) is left out.
func (r *runRow) run() cron.Run {
	run := cron.Run{ID: r.ID, JobID: r.JobID, ScheduledAt: fromNanos(r.ScheduledAt), TriggeredAt: fromNanos(r.TriggeredAt),
		FinishedAt: fromNanos(r.FinishedAt), Status: cron.Status(r.Status), Attempts: r.Attempts, HTTPStatus: r.HTTPStatus,
		Error: r.Error, Latency: cron.Duration(r.Latency), Instance: r.Instance, Reason: r.Reason, Slots: r.Slots, Alert: r.Alert,
		Trigger: r.Trigger, TriggeredBy: r.TriggeredBy}
	if r.AttemptLog != "" {
		if err := json.Unmarshal([]byte(r.AttemptLog), &run.AttemptLog); err != nil {
			run.AttemptLog = nil
		}
	}
	return run
}

// attemptLog is the attempt_log column of a run: its attempts as JSON, ”
// for none.
func attemptLog(log []cron.Attempt) string {
	if len(log) == 0 {
		return ""
	}
	b, err := json.Marshal(log)
	if err != nil {
		return ""
	}
	return string(b)
}

// runColumns are the columns of a runRow.
const runColumns = `id, job_id, instance, scheduled_at, triggered_at, finished_at, status, attempts, http_status, error, latency, reason, slots, alert,
	trigger_kind, triggered_by, attempt_log`

// Runs returns up to limit of the newest finished runs of job id, newest
// first (limit <= 0: all kept), each with the instance that claimed it. A
// run claimed but not finished (in flight, or of a process that died
// while calling it, until the next holder of its partition finishes it as
// missed) is left out. An unknown id is [cron.ErrNotFound].
func (s *Jobs) Runs(ctx context.Context, id string, limit int) ([]cron.Run, error) {
	if limit <= 0 || limit > s.cfg.RunLimit {
		// At most what the job keeps: its keep_runs, or RunLimit.
		var keep int
		err := s.db.x.GetContext(ctx, &keep, s.db.d.sql("SELECT keep_runs FROM ksana_job WHERE id = ?"), id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("%w: %q", cron.ErrNotFound, id)
		}
		if err != nil {
			return nil, fmt.Errorf("sqlstore: runs of job %q: %w", id, err)
		}
		if keep <= 0 {
			keep = s.cfg.RunLimit
		}
		if limit <= 0 || limit > keep {
			limit = keep
		}
	}
	var rows []runRow
	if err := s.db.x.SelectContext(ctx, &rows, s.db.d.sql(`SELECT `+runColumns+` FROM ksana_run WHERE job_id = ? AND status <> '' ORDER BY seq DESC LIMIT ?`), id, limit); err != nil {
		return nil, fmt.Errorf("sqlstore: runs of job %q: %w", id, err)
	}
	if len(rows) == 0 {
		var n int
		if err := s.db.x.GetContext(ctx, &n, s.db.d.sql("SELECT count(*) FROM ksana_job WHERE id = ?"), id); err != nil {
			return nil, fmt.Errorf("sqlstore: runs of job %q: %w", id, err)
		}
		if n == 0 {
			return nil, fmt.Errorf("%w: %q", cron.ErrNotFound, id)
		}
	}
	out := make([]cron.Run, len(rows))
	for i := range rows {
		out[i] = rows[i].run()
	}
	return out, nil
}

// containsFold reports whether sub is within s, ignoring case.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}
