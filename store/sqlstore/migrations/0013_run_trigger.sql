-- What started a run (trigger_kind: schedule or run-now; '' for a slot
-- not called and for the rows written before) and who asked for a
-- run-now (triggered_by: the actor's name).
ALTER TABLE ksana_run ADD COLUMN trigger_kind TEXT NOT NULL DEFAULT '';
ALTER TABLE ksana_run ADD COLUMN triggered_by TEXT NOT NULL DEFAULT '';
