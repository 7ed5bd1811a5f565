-- The desk (SPEC §9): inboxes, their contacts, conversations and messages, and the stream of what changed
-- in each conversation (what the widget's event stream replays and the webhooks are made from).
--
-- One handler at a time: a conversation is a bot's (`status` pending: `handler_bot`, or with none an agent
-- bot behind a webhook, as Chatwoot has it) or people's (`open`), or `resolved`. "Talk to a person" writes `bot_off_at`: no bot starts in that conversation
-- again until the staff send it back to the bot (`pending`), and the runs already thinking are cancelled.

-- An inbox, as the configuration names it (`desk.inboxes.<name>`); its secrets stay in the configuration.
CREATE TABLE desk_inboxes (
    id         bigserial PRIMARY KEY,
    name       text NOT NULL UNIQUE,   -- the configuration's key
    identifier text NOT NULL UNIQUE,   -- the public id a widget names (Chatwoot's inbox_identifier)
    title      text NOT NULL,          -- what people are shown
    created_at timestamptz NOT NULL DEFAULT now()
);

-- A contact belongs to the inbox it was made in; `source_id` is its public id (Chatwoot's contact
-- identifier), never enough alone: every public call carries the contact's signed token too. A signed-in
-- contact (`hmac_verified`: the site signed who they are) is linked to an account (`user_id`, a Matrix user
-- or the site's own account id), which need not have a `people` row — as a ticket's need not (0014).
ALTER TABLE desk_contacts DROP CONSTRAINT desk_contacts_user_id_fkey;
ALTER TABLE desk_contacts
    ADD COLUMN inbox_id      bigint REFERENCES desk_inboxes (id),
    ADD COLUMN source_id     uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
    ADD COLUMN hmac_verified boolean NOT NULL DEFAULT false;

CREATE TABLE desk_conversations (
    id          bigserial PRIMARY KEY,
    inbox_id    bigint NOT NULL REFERENCES desk_inboxes (id),
    contact_id  bigint NOT NULL REFERENCES desk_contacts (id),
    status      text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'pending', 'resolved')),
    handler_bot text,                 -- the bot of this conversation (it answers while the status is pending)
    assignee    text,                 -- the staff member who has it
    bot_off_at  timestamptz,          -- "talk to a person" (or a bot that failed): no bot starts here
    -- How it was resolved: `confirmed` (the person said it helped, or that was everything) or `assumed`
    -- (they left a bot's answer without asking for more); writing again un-counts it.
    resolution  text CHECK (resolution IN ('confirmed', 'assumed')),
    resolved_at timestamptz,
    seq         bigint NOT NULL DEFAULT 0,   -- the number of its last event (the stream's ids)
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX desk_conversations_contact ON desk_conversations (contact_id, id);
CREATE INDEX desk_conversations_inbox ON desk_conversations (inbox_id, status, id);

-- A message: `incoming` from the contact, `outgoing` from the business (a person, or a bot: `bot` says
-- which), `activity` (the conversation changed hands), `template` (the desk's own offer of a bot).
-- `private` notes are the staff's alone (a bot's draft is one). Choices (`content_type` input_select, their
-- items in `content_attributes`) are taken once: `taken_value` is written by the one press that gets through.
CREATE TABLE desk_messages (
    id                 bigserial PRIMARY KEY,
    conversation_id    bigint NOT NULL REFERENCES desk_conversations (id),
    message_type       text NOT NULL CHECK (message_type IN ('incoming', 'outgoing', 'activity', 'template')),
    private            boolean NOT NULL DEFAULT false,
    content            text NOT NULL,
    content_type       text NOT NULL DEFAULT 'text' CHECK (content_type IN ('text', 'input_select')),
    content_attributes jsonb NOT NULL DEFAULT '{}',
    sender_type        text NOT NULL CHECK (sender_type IN ('contact', 'user', 'agent_bot', 'system')),
    sender_name        text,
    bot                text,          -- the bot that wrote (or drafted) it
    run_id             bigint REFERENCES agent_runs (id),
    echo_id            text,          -- the client's own id for its send: the same send twice is one message
    status             text NOT NULL DEFAULT 'sent' CHECK (status IN ('sent', 'failed')),
    taken_value        text,
    taken_at           timestamptz,
    withdrawn_at       timestamptz,   -- choices no longer on offer (somebody asked for a person)
    draft              text CHECK (draft IN ('pending', 'sent', 'edited', 'discarded')),
    feedback           text CHECK (feedback IN ('helped', 'human')),
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    CHECK ((taken_value IS NULL) = (taken_at IS NULL)),
    CHECK (draft IS NULL OR private)
);
CREATE INDEX desk_messages_conversation ON desk_messages (conversation_id, id);
CREATE UNIQUE INDEX desk_messages_echo ON desk_messages (conversation_id, echo_id) WHERE echo_id IS NOT NULL;
CREATE INDEX desk_messages_run ON desk_messages (run_id) WHERE run_id IS NOT NULL;

-- Every press on a choice, taken or not (which of the ways forward people take is what choices are for).
CREATE TABLE desk_presses (
    id         bigserial PRIMARY KEY,
    message_id bigint NOT NULL REFERENCES desk_messages (id),
    contact_id bigint NOT NULL REFERENCES desk_contacts (id),
    value      text NOT NULL,
    taken      boolean NOT NULL,
    pressed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX desk_presses_message ON desk_presses (message_id);

-- What changed in a conversation, numbered from 1 in commit order: the number is taken from the
-- conversation's row (`seq`), which stays locked until the commit, so a reader that has seen n has seen
-- everything before n. `private` events (a staff note, a draft) are never on the contact's stream.
CREATE TABLE desk_events (
    conversation_id bigint NOT NULL REFERENCES desk_conversations (id),
    seq             bigint NOT NULL,
    kind            text NOT NULL,
    private         boolean NOT NULL DEFAULT false,
    payload         jsonb NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (conversation_id, seq)
);

-- The event streams wake on a commit: the conversation's id is the payload.
CREATE FUNCTION summon_desk_event_notify_v1() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('summon_desk', NEW.conversation_id::text);
    RETURN NEW;
END $$;

CREATE TRIGGER desk_events_notify
    AFTER INSERT ON desk_events
    FOR EACH ROW EXECUTE FUNCTION summon_desk_event_notify_v1();
