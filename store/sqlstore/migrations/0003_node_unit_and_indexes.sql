-- Membership: one row per node-unit, stamped with the database's clock.
CREATE TABLE IF NOT EXISTS node_unit (
    address        TEXT PRIMARY KEY,
    usage_endpoint TEXT NOT NULL DEFAULT '',
    started_at     {timestamp} NOT NULL DEFAULT ({now}),
    last_seen      {timestamp} NOT NULL DEFAULT ({now})
);

-- Active(ttl): node_unit rows seen since a point in time.
CREATE INDEX IF NOT EXISTS node_unit_last_seen_idx ON node_unit (last_seen);

-- ListEnabled: the enabled rows in candidate order.
CREATE INDEX IF NOT EXISTS deployment_enabled_order_idx
    ON deployment (updated_at, created_at, id) WHERE enabled;

-- The rows bound to one address (a node's own work, counts per address).
CREATE INDEX IF NOT EXISTS deployment_address_idx
    ON deployment (address, type) WHERE enabled;
