-- The run history of every job (GET /runs):
--
-- ksana_run.reason: why a skipped or missed slot was not called;
-- ksana_run.slots: how many consecutive slots the row stands for, when
-- more than one (0: one).
--
-- Indexes for a page of the history, newest first, by (scheduled_at, id COLLATE "C")
-- with keyset paging: one over every run, one per filter that leads it
-- (job, status, instance). Each is read backwards from the cursor. Run
-- ids compare byte by byte (COLLATE "C"), whatever the database's
-- collation, so that the order is the same on every store.
ALTER TABLE ksana_run ADD COLUMN IF NOT EXISTS reason TEXT NOT NULL DEFAULT '';
ALTER TABLE ksana_run ADD COLUMN IF NOT EXISTS slots INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS ksana_run_time_idx ON ksana_run (scheduled_at, id COLLATE "C");
CREATE INDEX IF NOT EXISTS ksana_run_job_time_idx ON ksana_run (job_id, scheduled_at, id COLLATE "C");
CREATE INDEX IF NOT EXISTS ksana_run_status_time_idx ON ksana_run (status, scheduled_at, id COLLATE "C");
CREATE INDEX IF NOT EXISTS ksana_run_instance_time_idx ON ksana_run (instance, scheduled_at, id COLLATE "C");
