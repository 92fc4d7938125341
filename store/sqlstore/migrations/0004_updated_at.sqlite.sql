-- updated_at moves on every update, also for writers that do not set it
-- (an operator's UPDATE by hand). A statement that sets updated_at itself
-- keeps its value. (recursive_triggers is off: the inner UPDATE does not
-- fire the trigger again.)
CREATE TRIGGER IF NOT EXISTS deployment_touch_updated_at
    AFTER UPDATE ON deployment
    FOR EACH ROW WHEN NEW.updated_at IS OLD.updated_at
BEGIN
    UPDATE deployment SET updated_at = {now} WHERE id = NEW.id;
END;
