-- The audit log records changes made through the runner rather than HTTP
-- requests: what was done (action: create, update, delete, pause, resume,
-- run-now, pause-all, resume-all), the run a run-now queued (run_id),
-- whether it was the replay of an earlier one with the same idempotency
-- key (replay, 0 or 1), and the run-now's options with their values
-- hidden (overrides_json). The columns method, path and status stay for
-- the rows written before; new rows leave them empty.
ALTER TABLE ksana_audit ADD COLUMN action TEXT NOT NULL DEFAULT '';
ALTER TABLE ksana_audit ADD COLUMN run_id TEXT NOT NULL DEFAULT '';
ALTER TABLE ksana_audit ADD COLUMN replay INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ksana_audit ADD COLUMN overrides_json TEXT NOT NULL DEFAULT '';
