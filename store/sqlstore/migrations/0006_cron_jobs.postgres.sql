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
    seq         BIGSERIAL NOT NULL,
    part        INTEGER NOT NULL DEFAULT 0,
    config      TEXT NOT NULL,
    last_run_at BIGINT NOT NULL DEFAULT 0,
    next_run_at BIGINT NOT NULL DEFAULT 0,
    last_status TEXT NOT NULL DEFAULT '',
    last_error  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS ksana_job_seq_idx ON ksana_job (seq);
CREATE INDEX IF NOT EXISTS ksana_job_part_idx ON ksana_job (part, seq);

-- ksana_run: the run history. A run of a slot is inserted before its
-- callback is called (slot = TRUE) and is unique on (job_id,
-- scheduled_at): the instance whose insert loses never calls. A run-now
-- run (slot = FALSE) is unique by its id alone.
CREATE TABLE IF NOT EXISTS ksana_run (
    seq          BIGSERIAL PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    job_id       TEXT NOT NULL REFERENCES ksana_job (id) ON DELETE CASCADE,
    slot         BOOLEAN NOT NULL,
    scheduled_at BIGINT NOT NULL,
    triggered_at BIGINT NOT NULL DEFAULT 0,
    finished_at  BIGINT NOT NULL DEFAULT 0,
    status       TEXT NOT NULL DEFAULT '',
    attempts     INTEGER NOT NULL DEFAULT 0,
    http_status  INTEGER NOT NULL DEFAULT 0,
    error        TEXT NOT NULL DEFAULT '',
    latency      BIGINT NOT NULL DEFAULT 0,
    instance     TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX IF NOT EXISTS ksana_run_slot_idx ON ksana_run (job_id, scheduled_at) WHERE slot;
CREATE INDEX IF NOT EXISTS ksana_run_job_idx ON ksana_run (job_id, seq);

-- Every change of a job's configuration (not of its bookkeeping) is
-- announced on the channel ksana_jobs:<schema> with the job id as payload.
CREATE OR REPLACE FUNCTION ksana_job_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('ksana_jobs:' || TG_TABLE_SCHEMA, OLD.id);
    ELSE
        PERFORM pg_notify('ksana_jobs:' || TG_TABLE_SCHEMA, NEW.id);
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS ksana_job_notify ON ksana_job;
CREATE TRIGGER ksana_job_notify
    AFTER INSERT OR DELETE OR UPDATE OF config ON ksana_job
    FOR EACH ROW EXECUTE FUNCTION ksana_job_notify();

-- The change feed SQLite instances poll; on PostgreSQL it stays empty.
CREATE TABLE IF NOT EXISTS ksana_job_change (
    seq    BIGSERIAL PRIMARY KEY,
    job_id TEXT NOT NULL,
    at     {timestamp} NOT NULL DEFAULT ({now})
);

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
