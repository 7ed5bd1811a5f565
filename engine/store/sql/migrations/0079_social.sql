-- Rules for bridged social conversations (SPEC §14, docs/social.md). A bridged room is recorded as summon knows it
-- (by its m.bridge state or by a bridge's namespace among its members); a rule is written there by someone with
-- the configured power; each line a rule matches makes at most one draft; the review place (a thread per
-- conversation in the staff room) keeps its posts by outbox transaction id and, once sent, by event id; and every
-- draft, send, discard and pause is a row of the rule's history, appended and never changed.
CREATE TABLE social_rooms (
    room_id      text PRIMARY KEY,
    bridge       text NOT NULL,   -- the bridge bot (m.bridge's bridgebot), or the namespace its puppets matched
    protocol     text NOT NULL,   -- the platform's id (m.bridge protocol.id, else the namespace's network)
    network      text NOT NULL,   -- what the platform is called in a label
    channel      text,            -- the channel's name, when the state says
    conversation text NOT NULL CHECK (conversation IN ('dm', 'comments', 'group')),
    known_by     text NOT NULL CHECK (known_by IN ('state', 'members')),
    bridged      boolean NOT NULL DEFAULT true,
    updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE social_rules (
    id          bigserial PRIMARY KEY,
    room_id     text NOT NULL,
    phrase      text NOT NULL CHECK (char_length(phrase) BETWEEN 3 AND 200),
    line_kind   text NOT NULL CHECK (line_kind IN ('dm', 'comment', 'group')),
    bot         text NOT NULL,
    destination text NOT NULL CHECK (destination IN ('private', 'public')),
    state       text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'paused', 'removed')),
    auto        boolean NOT NULL DEFAULT false,
    author      text NOT NULL,
    governed_in text NOT NULL,   -- the room whose power levels hold the author's authority (the room, or the review room)
    made_in     text NOT NULL,
    paused_why  text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    changed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX social_rules_room ON social_rules (room_id) WHERE state <> 'removed';
CREATE INDEX social_rules_governed ON social_rules (governed_in) WHERE state <> 'removed';

-- One draft per rule and line (``line_key``: the conversation, the sender and the words, hashed): a bridge replaying
-- its history, or the same words said ten times, makes one.
CREATE TABLE social_drafts (
    id          bigserial PRIMARY KEY,
    rule_id     bigint NOT NULL REFERENCES social_rules (id),
    room_id     text NOT NULL,
    thread      text,            -- the conversation's thread root in the bridged room (NULL: its main timeline)
    line_event  text NOT NULL,
    line_key    text NOT NULL,
    run_id      bigint UNIQUE REFERENCES agent_runs (id),
    text        text,
    status      text NOT NULL DEFAULT 'asked'
                CHECK (status IN ('asked', 'pending', 'sent', 'edited', 'discarded', 'held', 'ended')),
    settled_by  text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    settled_at  timestamptz,
    UNIQUE (rule_id, line_key)
);
CREATE INDEX social_drafts_rule_time ON social_drafts (rule_id, created_at);

CREATE TABLE social_posts (
    txn_id       text PRIMARY KEY,
    event_id     text UNIQUE,
    conversation text NOT NULL,
    draft_id     bigint REFERENCES social_drafts (id),
    kind         text NOT NULL CHECK (kind IN ('thread', 'draft', 'note')),
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX social_posts_thread ON social_posts (conversation) WHERE kind = 'thread';
CREATE INDEX social_posts_draft ON social_posts (draft_id) WHERE kind = 'draft';

CREATE FUNCTION summon_social_post_sent_v1() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE social_posts SET event_id = NEW.event_id WHERE txn_id = NEW.txn_id;
    RETURN NEW;
END $$;

CREATE TRIGGER outbox_social_post_sent
    AFTER UPDATE OF event_id ON outbox
    FOR EACH ROW WHEN (NEW.event_id IS NOT NULL AND OLD.event_id IS DISTINCT FROM NEW.event_id
                       AND NEW.txn_id LIKE 'summon.social.%')
    EXECUTE FUNCTION summon_social_post_sent_v1();

CREATE TABLE social_history (
    id       bigserial PRIMARY KEY,
    rule_id  bigint NOT NULL REFERENCES social_rules (id),
    draft_id bigint REFERENCES social_drafts (id),
    run_id   bigint,
    what     text NOT NULL CHECK (what IN ('written', 'drafted', 'sent', 'auto_sent', 'edited', 'discarded',
                                           'paused', 'resumed', 'removed', 'auto_on', 'auto_off', 'capped',
                                           'ended')),
    by_whom  text,
    why      text,
    at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX social_history_rule ON social_history (rule_id, id);
