-- updated_at moves on every update, also for writers that do not set it
-- (an operator's UPDATE by hand). A statement that sets updated_at itself
-- keeps its value.
CREATE OR REPLACE FUNCTION deployment_touch_updated_at() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at THEN
        NEW.updated_at := now();
    END IF;
    RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS deployment_touch_updated_at ON deployment;
CREATE TRIGGER deployment_touch_updated_at
    BEFORE UPDATE ON deployment
    FOR EACH ROW EXECUTE FUNCTION deployment_touch_updated_at();
