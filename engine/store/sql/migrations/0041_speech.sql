-- Speech (SPEC §12): a voice note heard through the site's transcription endpoint and an answer said through its
-- speech endpoint are paid calls, kept like a run's steps: which run, which kind, how much (seconds heard,
-- characters said) and what it cost. A run's spend, settled when it ends, counts them with its model calls; a
-- speech made after the run ended is added to its settled spend.
CREATE TABLE speech_calls (
    id       bigserial PRIMARY KEY,
    run_id   bigint NOT NULL REFERENCES agent_runs (id),
    kind     text NOT NULL CHECK (kind IN ('transcription', 'speech')),
    units    numeric(12, 3) NOT NULL CHECK (units >= 0),  -- seconds heard, or characters said
    cost_usd numeric(12, 6) NOT NULL CHECK (cost_usd >= 0),
    at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX speech_calls_run ON speech_calls (run_id);
