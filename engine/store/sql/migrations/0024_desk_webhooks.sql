-- The desk's outgoing webhooks (docs/desk.md): every event an inbox's webhook listens for is a delivery,
-- queued in the commit that made the change, posted and retried with backoff until the receiver takes it or
-- the attempts run out — each attempt's outcome recorded. The body is kept as the exact bytes signed and
-- sent, so a retry sends the same body under the same delivery id (a receiver dedupes on it).
CREATE TABLE desk_deliveries (
    id              bigserial PRIMARY KEY,
    delivery        uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
    inbox_id        bigint NOT NULL REFERENCES desk_inboxes (id),
    url             text NOT NULL,            -- which of the inbox's webhooks
    event           text NOT NULL,
    conversation_id bigint NOT NULL REFERENCES desk_conversations (id),
    message_id      bigint REFERENCES desk_messages (id),
    body            text NOT NULL,
    status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_status     integer,                  -- the receiver's HTTP status at the last attempt (NULL: none came)
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz
);
CREATE INDEX desk_deliveries_due ON desk_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX desk_deliveries_conversation ON desk_deliveries (conversation_id);

CREATE FUNCTION summon_desk_delivery_notify_v1() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('summon_desk_webhooks', '');
    RETURN NEW;
END $$;

CREATE TRIGGER desk_deliveries_notify
    AFTER INSERT ON desk_deliveries
    FOR EACH ROW EXECUTE FUNCTION summon_desk_delivery_notify_v1();
