-- Events (SPEC §6). A run nobody asked for (a member joined, a site posted purchase.paid) is one per bot
-- per conversation at a time: `conversation` names it (the room for a Matrix event; the site event's
-- conversation, else its subject, else its room), and the unique index makes "one at a time" hold when
-- two events race, not just when they come one after the other. A run someone asked for has none.
ALTER TABLE agent_runs ADD COLUMN conversation text;
CREATE UNIQUE INDEX agent_runs_one_per_conversation ON agent_runs (bot, conversation)
    WHERE status IN ('queued', 'running') AND conversation IS NOT NULL;

-- Site events posted to /hooks/events/<name>: each delivery once. A sender retrying reuses its delivery
-- id; a captured request replayed under a fresh delivery id is still the same signed message, so its
-- signature (an HMAC of the timestamp and body, never the body) is remembered too.
CREATE TABLE hook_deliveries (
    delivery    text PRIMARY KEY,
    signature   text NOT NULL UNIQUE,
    key_id      text NOT NULL,
    event       text NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now()
);
