-- A running run asked to stop is told at once to the worker holding it (NOTIFY summon_cancel, the run's id):
-- a model call under way is aborted — its connection closed, which stops the generation and the bill where
-- the provider supports it — rather than finished and paid for while the cancel waits for the next step.
-- Every way a run is asked to stop sets cancel_requested, so every one of them is heard.
CREATE FUNCTION agent_notify_cancel_v1() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('summon_cancel', NEW.id::text);
    RETURN NEW;
END $$;

CREATE TRIGGER agent_runs_cancel_notify
    AFTER UPDATE OF cancel_requested ON agent_runs
    FOR EACH ROW WHEN (NEW.cancel_requested AND NOT OLD.cancel_requested AND NEW.status = 'running')
    EXECUTE FUNCTION agent_notify_cancel_v1();
