-- A job's keep_runs (cron.Job.KeepRuns), also in its config: how many
-- of its runs the history keeps, 0 for the store's RunLimit. A column
-- of its own so that the trim of a history reads it.
ALTER TABLE ksana_job ADD COLUMN keep_runs INTEGER NOT NULL DEFAULT 0;
