-- What a claim cycle needs without reading every row: the number of
-- enabled deployments of type deployment bound to each address, kept by
-- the database in deployment_address_count. An address with none has no
-- row, and unassigned deployments are not counted (one counter row for them
-- would make every claim wait on it): whether one exists is an index
-- lookup.
CREATE TABLE IF NOT EXISTS deployment_address_count (
    address TEXT PRIMARY KEY,
    n       INTEGER NOT NULL
);

-- No write may land between the counting below and the triggers that keep
-- the counts (writers wait for the migration's commit).
LOCK TABLE deployment IN SHARE ROW EXCLUSIVE MODE;

DELETE FROM deployment_address_count;
INSERT INTO deployment_address_count (address, n)
    SELECT address, count(*) FROM deployment
    WHERE enabled AND type = 'deployment' AND address <> '' AND id <> ''
    GROUP BY address;

-- Statement-level triggers apply one change per address and statement
-- (a bulk insert updates each address's row once, not once per row), in
-- address order so that concurrent statements lock rows in one order.
-- deployment_address_count_apply takes the changes as two arrays,
-- addresses and deltas.
CREATE OR REPLACE FUNCTION deployment_address_count_apply(addrs TEXT[], deltas BIGINT[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF addrs IS NULL OR cardinality(addrs) = 0 THEN
        RETURN;
    END IF;
    INSERT INTO deployment_address_count AS c (address, n)
        SELECT a, d FROM unnest(addrs, deltas) AS x(a, d) ORDER BY a
        ON CONFLICT (address) DO UPDATE SET n = c.n + excluded.n;
    DELETE FROM deployment_address_count WHERE address = ANY (addrs) AND n <= 0;
END
$$;

CREATE OR REPLACE FUNCTION deployment_address_count_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    addrs TEXT[];
    deltas BIGINT[];
BEGIN
    SELECT array_agg(address ORDER BY address), array_agg(n ORDER BY address) INTO addrs, deltas
    FROM (SELECT address, count(*) AS n FROM new_rows
          WHERE enabled AND type = 'deployment' AND address <> '' AND id <> '' GROUP BY address) AS x;
    PERFORM deployment_address_count_apply(addrs, deltas);
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION deployment_address_count_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    addrs TEXT[];
    deltas BIGINT[];
BEGIN
    SELECT array_agg(address ORDER BY address), array_agg(n ORDER BY address) INTO addrs, deltas
    FROM (SELECT address, -count(*) AS n FROM old_rows
          WHERE enabled AND type = 'deployment' AND address <> '' AND id <> '' GROUP BY address) AS x;
    PERFORM deployment_address_count_apply(addrs, deltas);
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION deployment_address_count_update() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    addrs TEXT[];
    deltas BIGINT[];
BEGIN
    SELECT array_agg(address ORDER BY address), array_agg(n ORDER BY address) INTO addrs, deltas
    FROM (SELECT address, sum(n) AS n FROM (
              SELECT address, -1 AS n FROM old_rows
              WHERE enabled AND type = 'deployment' AND address <> '' AND id <> ''
              UNION ALL
              SELECT address, 1 FROM new_rows
              WHERE enabled AND type = 'deployment' AND address <> '' AND id <> ''
          ) AS d GROUP BY address HAVING sum(n) <> 0) AS x;
    PERFORM deployment_address_count_apply(addrs, deltas);
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION deployment_address_count_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM deployment_address_count;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS deployment_address_count_insert ON deployment;
CREATE TRIGGER deployment_address_count_insert
    AFTER INSERT ON deployment REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION deployment_address_count_insert();

DROP TRIGGER IF EXISTS deployment_address_count_delete ON deployment;
CREATE TRIGGER deployment_address_count_delete
    AFTER DELETE ON deployment REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION deployment_address_count_delete();

DROP TRIGGER IF EXISTS deployment_address_count_update ON deployment;
CREATE TRIGGER deployment_address_count_update
    AFTER UPDATE ON deployment REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION deployment_address_count_update();

DROP TRIGGER IF EXISTS deployment_address_count_truncate ON deployment;
CREATE TRIGGER deployment_address_count_truncate
    AFTER TRUNCATE ON deployment
    FOR EACH STATEMENT EXECUTE FUNCTION deployment_address_count_truncate();

-- A node's own rows, whether anything is unassigned, and the first
-- candidates in claim order: each an index range.
CREATE INDEX IF NOT EXISTS deployment_claim_order_idx
    ON deployment (address, updated_at, created_at, id) WHERE enabled AND type = 'deployment';

-- The daemons and the rows of invalid type.
CREATE INDEX IF NOT EXISTS deployment_other_type_idx
    ON deployment (id) WHERE enabled AND (type <> 'deployment' OR type IS NULL);
