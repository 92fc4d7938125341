-- The service-wide pause and the audit log of the API's writes, shared by
-- every instance on the database (see the package documentation,
-- "Pause and audit").
--
-- ksana_settings: one row per setting; key 'service_pause' holds the
-- service pause as JSON ({"paused": ..., "paused_until": ..., ...}).
--
-- ksana_audit: one row per write, numbered by id (the cursor of keyset
-- paging); at is Unix nanoseconds; before_json and after_json are the
-- job's JSON, '' for none.
CREATE TABLE IF NOT EXISTS ksana_settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS ksana_audit (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          INTEGER NOT NULL,
    who         TEXT NOT NULL DEFAULT '',
    role        TEXT NOT NULL DEFAULT '',
    method      TEXT NOT NULL DEFAULT '',
    path        TEXT NOT NULL DEFAULT '',
    job_id      TEXT NOT NULL DEFAULT '',
    status      INTEGER NOT NULL DEFAULT 0,
    before_json TEXT NOT NULL DEFAULT '',
    after_json  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS ksana_audit_job_idx ON ksana_audit (job_id, id);
CREATE INDEX IF NOT EXISTS ksana_audit_who_idx ON ksana_audit (who, id);
