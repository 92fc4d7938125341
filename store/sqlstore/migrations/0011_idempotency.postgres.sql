-- The idempotency keys of run-now requests (the Idempotency-Key header of
-- the API), shared by every instance on the database, so that a request
-- sent again to another instance answers as the first did (see the
-- package documentation, "Idempotency keys").
--
-- ksana_idempotency: one row per key of a job. body_sum is the SHA-256 of the
-- request's body in hex; run_id is the run it queued, '' while the
-- request that reserved the key is still being answered; at is when the
-- key was reserved, in Unix nanoseconds. Rows past the window are
-- deleted now and then, oldest first (ksana_idempotency_at_idx). A row of
-- a deleted job stays until then.
CREATE TABLE IF NOT EXISTS ksana_idempotency (
    job_id   TEXT NOT NULL,
    key      TEXT NOT NULL,
    body_sum TEXT NOT NULL,
    run_id   TEXT NOT NULL DEFAULT '',
    at       BIGINT NOT NULL,
    PRIMARY KEY (job_id, key)
);
CREATE INDEX IF NOT EXISTS ksana_idempotency_at_idx ON ksana_idempotency (at);
