-- The attempts of a run tried more than once (cron.Run.AttemptLog): a
-- JSON array of {started_at, duration, status, http_status, error}, ''
-- for a run tried once and for the rows written before.
ALTER TABLE ksana_run ADD COLUMN attempt_log TEXT NOT NULL DEFAULT '';
