-- The tools a bot on the door calls that its asker's own front end runs (a bot file's client_tools:): each call
-- kept by its run and the model's call id, from the moment it is handed over until the client's next request
-- brings its result (appservice/door/handed.py). A run waits for the result as for any tool; a call is answered
-- once.
CREATE TABLE door_client_calls (
    run_id      bigint NOT NULL REFERENCES agent_runs (id) ON DELETE CASCADE,
    call_id     text NOT NULL,
    name        text NOT NULL,
    arguments   jsonb NOT NULL,
    result      text,
    is_error    boolean NOT NULL DEFAULT false,
    asked_at    timestamptz NOT NULL DEFAULT now(),
    answered_at timestamptz,
    PRIMARY KEY (run_id, call_id)
);
CREATE INDEX door_client_calls_waiting ON door_client_calls (call_id) WHERE answered_at IS NULL;
