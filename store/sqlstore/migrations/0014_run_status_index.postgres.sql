-- The history of one job with a status filter (GET /runs?job=X&status=failed)
-- read along an index from the cursor: (job_id, status, scheduled_at,
-- id COLLATE "C"). QueryRuns reads a list of jobs or of statuses as one
-- such read per job and status, each at most a page long.
CREATE INDEX IF NOT EXISTS ksana_run_job_status_time_idx ON ksana_run (job_id, status, scheduled_at, id COLLATE "C");
