-- The alert outbox: the alerts waiting for delivery, written with the
-- runs that raised them, shared by every instance on the database (see
-- the package documentation, "Alert outbox").
--
-- ksana_alert_outbox: one row per alert. id is the delivery id (sent in
-- the X-Ksana-Delivery header); body is the alert as JSON; url and secret
-- are its webhook; attempts, last_error are the attempts so far and why
-- the last one failed; created_at is when it was raised, next_at when
-- the next attempt is due, lease_until how long the instance that took
-- it holds it (Unix nanoseconds, 0: none); dead is 1 once it was given
-- up (kept, the newest 1000). A delivered alert is deleted.
CREATE TABLE IF NOT EXISTS ksana_alert_outbox (
    id          TEXT NOT NULL PRIMARY KEY,
    job_id      TEXT NOT NULL,
    body        TEXT NOT NULL,
    url         TEXT NOT NULL,
    secret      TEXT NOT NULL DEFAULT '',
    attempts    INTEGER NOT NULL DEFAULT 0,
    last_error  TEXT NOT NULL DEFAULT '',
    created_at  BIGINT NOT NULL,
    next_at     BIGINT NOT NULL,
    lease_until BIGINT NOT NULL DEFAULT 0,
    dead        INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS ksana_alert_outbox_due_idx ON ksana_alert_outbox (dead, next_at);
CREATE INDEX IF NOT EXISTS ksana_alert_outbox_created_idx ON ksana_alert_outbox (dead, created_at, id);
