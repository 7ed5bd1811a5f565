-- memory: person (SPEC §11): what a run's subject asked a bot before, across conversations. A run's person is
-- its subject, or — a rooms run written without one — its asker (agent_subject_v1's rule, read from the row
-- alone); on the desk the asker is the staff member and never the person. The index is on that same
-- expression so the history read (memories.sql: asked_before) is one index range, newest first.
CREATE INDEX agent_runs_person ON agent_runs
    (bot, (coalesce(subject, CASE WHEN surface = 'rooms' THEN asked_by END)), id)
    WHERE status = 'done';
