-- A refused summons is a matter of record too: the operator sees why a mention got no run
-- (`summon runs`), not only in the logs. Nothing was bought; the row says who asked, where, and why not.
CREATE TABLE summon_refusals (
    id            bigserial PRIMARY KEY,
    bot           text NOT NULL,
    surface       text NOT NULL,
    room_id       text,
    thread_root   text,
    trigger_event text,
    asked_by      text,
    reason        text NOT NULL,
    detail        text,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX summon_refusals_recent ON summon_refusals (created_at DESC);
CREATE INDEX summon_refusals_room ON summon_refusals (room_id, created_at DESC);
