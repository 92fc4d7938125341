-- Alerts on a change of a job's health (see cron.AlertConfig):
--
-- ksana_job.failures and last_alert: the runs in a row that failed and the
-- last transition alerted, bookkeeping written with the last-run fields,
-- so that an alert is sent once per change, across restarts and instances.
--
-- ksana_run.alert: the transition a run caused and alerted, if any.
ALTER TABLE ksana_job ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ksana_job ADD COLUMN last_alert TEXT NOT NULL DEFAULT '';
ALTER TABLE ksana_run ADD COLUMN alert TEXT NOT NULL DEFAULT '';
