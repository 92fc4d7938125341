-- The deployment table as it was before deployment.type existed. On a
-- database that already has this table it changes nothing.
CREATE TABLE IF NOT EXISTS deployment (
    id              TEXT PRIMARY KEY,
    package_name    TEXT NOT NULL DEFAULT '',
    package_version TEXT NOT NULL DEFAULT '',
    command         TEXT NOT NULL DEFAULT '',
    args            TEXT NOT NULL DEFAULT '[]', -- JSON array of strings
    env             TEXT NOT NULL DEFAULT '{}', -- JSON object of strings
    address         TEXT NOT NULL DEFAULT '',   -- '' means not assigned
    enabled         BOOLEAN NOT NULL DEFAULT FALSE,
    created_at      {timestamp} NOT NULL DEFAULT ({now}),
    updated_at      {timestamp} NOT NULL DEFAULT ({now})
);
