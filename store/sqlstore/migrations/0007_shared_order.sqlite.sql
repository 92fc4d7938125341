-- Sharing cron jobs exactly (see the package documentation, "Sharing cron
-- jobs"):
--
-- ksana_job.version: raised by every write of a job's configuration, so
-- that the bookkeeping an instance computed from an older version is
-- refused by its UPDATE (an acknowledged pause is never overwritten by
-- the bookkeeping of a run that ended before it).
--
-- ksana_job.enabled and ksana_job_count: the number of jobs enabled and
-- paused, kept per partition by triggers, so that counting every job
-- reads at most one row per partition instead of the whole table.
--
-- ksana_member.token: the process that goes by an instance name, so that
-- a second process started with the name of a live one is refused.
--
-- ksana_run_open_idx: the runs claimed and not finished, which the next
-- holder of a partition finishes when their claimer died.
ALTER TABLE ksana_job ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE ksana_job ADD COLUMN enabled BOOLEAN NOT NULL DEFAULT 1;
UPDATE ksana_job SET enabled = COALESCE(json_extract(config, '$.enabled') = 1, 0);
ALTER TABLE ksana_member ADD COLUMN token TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS ksana_run_open_idx ON ksana_run (instance) WHERE status = '';

CREATE TABLE IF NOT EXISTS ksana_job_count (
    part    INTEGER PRIMARY KEY,
    enabled INTEGER NOT NULL DEFAULT 0,
    paused  INTEGER NOT NULL DEFAULT 0
);
DELETE FROM ksana_job_count;
INSERT INTO ksana_job_count (part, enabled, paused)
    SELECT part, SUM(CASE WHEN enabled THEN 1 ELSE 0 END), SUM(CASE WHEN enabled THEN 0 ELSE 1 END)
    FROM ksana_job GROUP BY part;

DROP TRIGGER IF EXISTS ksana_job_count_insert;
CREATE TRIGGER ksana_job_count_insert AFTER INSERT ON ksana_job
BEGIN
    INSERT INTO ksana_job_count (part, enabled, paused)
        VALUES (NEW.part, CASE WHEN NEW.enabled THEN 1 ELSE 0 END, CASE WHEN NEW.enabled THEN 0 ELSE 1 END)
    ON CONFLICT (part) DO UPDATE SET enabled = enabled + excluded.enabled, paused = paused + excluded.paused;
END;
DROP TRIGGER IF EXISTS ksana_job_count_delete;
CREATE TRIGGER ksana_job_count_delete AFTER DELETE ON ksana_job
BEGIN
    UPDATE ksana_job_count SET enabled = enabled - CASE WHEN OLD.enabled THEN 1 ELSE 0 END,
        paused = paused - CASE WHEN OLD.enabled THEN 0 ELSE 1 END
    WHERE part = OLD.part;
END;
DROP TRIGGER IF EXISTS ksana_job_count_update;
CREATE TRIGGER ksana_job_count_update AFTER UPDATE OF enabled ON ksana_job
    WHEN OLD.enabled IS NOT NEW.enabled
BEGIN
    UPDATE ksana_job_count SET enabled = enabled + CASE WHEN NEW.enabled THEN 1 ELSE -1 END,
        paused = paused + CASE WHEN NEW.enabled THEN -1 ELSE 1 END
    WHERE part = NEW.part;
END;
