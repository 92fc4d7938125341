-- cron's jobs, their run history, and the tables that share them among
-- instances (see the package documentation, "Sharing cron jobs").
--
-- ksana_job: one row per job. config is the job's JSON without its
-- bookkeeping; the bookkeeping has columns of its own so that a run
-- writes four small fields, not the whole job. Times are Unix
-- nanoseconds, 0 for none. seq is the creation order. part is the
-- partition of the id (see Partition), written on insert: an instance
-- loads the jobs of the partitions it leases through ksana_job_part_idx.
CREATE TABLE IF NOT EXISTS ksana_job (
    id          TEXT PRIMARY KEY,
    seq         INTEGER NOT NULL,
    part        INTEGER NOT NULL DEFAULT 0,
    config      TEXT NOT NULL,
    last_run_at INTEGER NOT NULL DEFAULT 0,
    next_run_at INTEGER NOT NULL DEFAULT 0,
    last_status TEXT NOT NULL DEFAULT '',
    last_error  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS ksana_job_seq_idx ON ksana_job (seq);
CREATE INDEX IF NOT EXISTS ksana_job_part_idx ON ksana_job (part, seq);

-- ksana_run: the run history. A run of a slot is inserted before its
-- callback is called (slot = 1) and is unique on (job_id, scheduled_at):
-- the instance whose insert loses never calls. A run-now run (slot = 0)
-- is unique by its id alone.
CREATE TABLE IF NOT EXISTS ksana_run (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    id           TEXT NOT NULL UNIQUE,
    job_id       TEXT NOT NULL REFERENCES ksana_job (id) ON DELETE CASCADE,
    slot         BOOLEAN NOT NULL,
    scheduled_at INTEGER NOT NULL,
    triggered_at INTEGER NOT NULL DEFAULT 0,
    finished_at  INTEGER NOT NULL DEFAULT 0,
    status       TEXT NOT NULL DEFAULT '',
    attempts     INTEGER NOT NULL DEFAULT 0,
    http_status  INTEGER NOT NULL DEFAULT 0,
    error        TEXT NOT NULL DEFAULT '',
    latency      INTEGER NOT NULL DEFAULT 0,
    instance     TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX IF NOT EXISTS ksana_run_slot_idx ON ksana_run (job_id, scheduled_at) WHERE slot;
CREATE INDEX IF NOT EXISTS ksana_run_job_idx ON ksana_run (job_id, seq);

-- The change feed that instances poll: one row per change of a job's
-- configuration (not of its bookkeeping), written by the triggers below.
CREATE TABLE IF NOT EXISTS ksana_job_change (
    seq    INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    at     {timestamp} NOT NULL DEFAULT ({now})
);

CREATE TRIGGER IF NOT EXISTS ksana_job_change_insert AFTER INSERT ON ksana_job
BEGIN
    INSERT INTO ksana_job_change (job_id) VALUES (NEW.id);
END;
CREATE TRIGGER IF NOT EXISTS ksana_job_change_update AFTER UPDATE OF config ON ksana_job
BEGIN
    INSERT INTO ksana_job_change (job_id) VALUES (NEW.id);
END;
CREATE TRIGGER IF NOT EXISTS ksana_job_change_delete AFTER DELETE ON ksana_job
BEGIN
    INSERT INTO ksana_job_change (job_id) VALUES (OLD.id);
END;

-- Instances of cmd/ksana (or any runner sharing the jobs): heartbeats
-- stamped with the database's clock.
CREATE TABLE IF NOT EXISTS ksana_member (
    instance   TEXT PRIMARY KEY,
    started_at {timestamp} NOT NULL DEFAULT ({now}),
    last_seen  {timestamp} NOT NULL DEFAULT ({now})
);

-- One lease per partition of the job ids: owner '' is free.
CREATE TABLE IF NOT EXISTS ksana_lease (
    part       INTEGER PRIMARY KEY,
    owner      TEXT NOT NULL DEFAULT '',
    expires_at {timestamp} NOT NULL DEFAULT ({now})
);
