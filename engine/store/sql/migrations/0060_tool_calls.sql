-- A side-effecting tool's call, keyed by its run and the model's call id (SPEC §15: a side-effecting tool
-- retried after an interruption returns its first result). The runner records the call as begun before the
-- tool runs — only while the worker holds the run's lease — and its result when it returns, whether or not the
-- lease is still held then (what was done was done). A call seen again (the next holder closing a call its
-- predecessor never reported back) is answered from here: its first result, or, begun and never finished, as
-- interrupted; never run a second time. (engine/tools/runner.py; sql/queries/runs.sql.)
CREATE TABLE tool_calls (
    run_id      bigint NOT NULL REFERENCES agent_runs (id) ON DELETE CASCADE,
    call_id     text NOT NULL,                    -- the model's id for the call, as recorded in its step
    tool        text NOT NULL,
    worker      text NOT NULL,                    -- who began it (only they write its result)
    begun_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at timestamptz,                      -- NULL: begun, never reported back
    result      text,
    is_error    boolean,
    PRIMARY KEY (run_id, call_id),
    CHECK ((finished_at IS NULL) = (result IS NULL) AND (result IS NULL) = (is_error IS NULL))
);
