-- The desk's staff room in Matrix (docs/desk.md): each conversation mirrored as a thread. Every post the desk
-- queues there is remembered by its outbox transaction id — the thread's root, a line, a bot's draft — and
-- learns its event id the moment the outbox records it, so a staff member's reply in a thread, or a reaction
-- on a draft, finds its conversation and message.
CREATE TABLE desk_staff_posts (
    txn_id          text PRIMARY KEY,
    event_id        text UNIQUE,
    conversation_id bigint NOT NULL REFERENCES desk_conversations (id),
    message_id      bigint REFERENCES desk_messages (id),
    kind            text NOT NULL CHECK (kind IN ('thread', 'line', 'draft')),
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX desk_staff_posts_thread ON desk_staff_posts (conversation_id) WHERE kind = 'thread';

CREATE FUNCTION summon_desk_staff_post_sent_v1() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE desk_staff_posts SET event_id = NEW.event_id WHERE txn_id = NEW.txn_id;
    RETURN NEW;
END $$;

CREATE TRIGGER outbox_desk_staff_post_sent
    AFTER UPDATE OF event_id ON outbox
    FOR EACH ROW WHEN (NEW.event_id IS NOT NULL AND OLD.event_id IS DISTINCT FROM NEW.event_id
                       AND NEW.txn_id LIKE 'summon.desk.%')
    EXECUTE FUNCTION summon_desk_staff_post_sent_v1();
