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

DELETE FROM deployment_address_count;
INSERT INTO deployment_address_count (address, n)
    SELECT address, count(*) FROM deployment
    WHERE enabled AND type = 'deployment' AND address <> '' AND id <> ''
    GROUP BY address;

CREATE OR REPLACE FUNCTION deployment_address_count_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    was BOOLEAN := FALSE;
    now_counted BOOLEAN := FALSE;
    left_n INTEGER;
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        was := COALESCE(OLD.enabled AND OLD.type = 'deployment' AND OLD.address <> '' AND OLD.id <> '', FALSE);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        now_counted := COALESCE(NEW.enabled AND NEW.type = 'deployment' AND NEW.address <> '' AND NEW.id <> '', FALSE);
    END IF;
    IF was AND now_counted AND OLD.address = NEW.address THEN
        RETURN NULL;
    END IF;
    IF was THEN
        UPDATE deployment_address_count SET n = n - 1 WHERE address = OLD.address RETURNING n INTO left_n;
        IF left_n IS NOT NULL AND left_n <= 0 THEN
            DELETE FROM deployment_address_count WHERE address = OLD.address AND n <= 0;
        END IF;
    END IF;
    IF now_counted THEN
        INSERT INTO deployment_address_count (address, n) VALUES (NEW.address, 1)
        ON CONFLICT (address) DO UPDATE SET n = deployment_address_count.n + 1;
    END IF;
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

DROP TRIGGER IF EXISTS deployment_address_count_sync ON deployment;
CREATE TRIGGER deployment_address_count_sync
    AFTER INSERT OR DELETE OR UPDATE OF id, type, enabled, address ON deployment
    FOR EACH ROW EXECUTE FUNCTION deployment_address_count_sync();

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
    ON deployment (id) WHERE enabled AND COALESCE(type, '') <> 'deployment';
