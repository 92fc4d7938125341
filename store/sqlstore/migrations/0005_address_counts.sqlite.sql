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

DROP TRIGGER IF EXISTS deployment_address_count_insert;
CREATE TRIGGER deployment_address_count_insert
    AFTER INSERT ON deployment
    FOR EACH ROW WHEN NEW.enabled AND NEW.type = 'deployment' AND NEW.address <> '' AND NEW.id <> ''
BEGIN
    INSERT INTO deployment_address_count (address, n) VALUES (NEW.address, 1)
    ON CONFLICT (address) DO UPDATE SET n = n + 1;
END;

DROP TRIGGER IF EXISTS deployment_address_count_delete;
CREATE TRIGGER deployment_address_count_delete
    AFTER DELETE ON deployment
    FOR EACH ROW WHEN OLD.enabled AND OLD.type = 'deployment' AND OLD.address <> '' AND OLD.id <> ''
BEGIN
    UPDATE deployment_address_count SET n = n - 1 WHERE address = OLD.address;
    DELETE FROM deployment_address_count WHERE address = OLD.address AND n <= 0;
END;

DROP TRIGGER IF EXISTS deployment_address_count_update;
CREATE TRIGGER deployment_address_count_update
    AFTER UPDATE OF id, type, enabled, address ON deployment
    FOR EACH ROW WHEN
        (OLD.enabled AND OLD.type = 'deployment' AND OLD.address <> '' AND OLD.id <> '') IS NOT
        (NEW.enabled AND NEW.type = 'deployment' AND NEW.address <> '' AND NEW.id <> '')
        OR OLD.address IS NOT NEW.address
BEGIN
    UPDATE deployment_address_count SET n = n - 1
        WHERE address = OLD.address AND OLD.enabled AND OLD.type = 'deployment' AND OLD.address <> '' AND OLD.id <> '';
    DELETE FROM deployment_address_count WHERE address = OLD.address AND n <= 0;
    INSERT INTO deployment_address_count (address, n)
        SELECT NEW.address, 1
        WHERE NEW.enabled AND NEW.type = 'deployment' AND NEW.address <> '' AND NEW.id <> ''
    ON CONFLICT (address) DO UPDATE SET n = n + 1;
END;

-- A node's own rows, whether anything is unassigned, and the first
-- candidates in claim order: each an index range.
CREATE INDEX IF NOT EXISTS deployment_claim_order_idx
    ON deployment (address, updated_at, created_at, id) WHERE enabled AND type = 'deployment';

-- The daemons and the rows of invalid type.
CREATE INDEX IF NOT EXISTS deployment_other_type_idx
    ON deployment (id) WHERE enabled AND (type <> 'deployment' OR type IS NULL);
