-- What happened to each desk conversation, as its outcome figures count it (docs/desk.md, "Outcome figures"):
-- one row per thing that happened, appended in the transaction that made it happen and never changed — the
-- figures are read from these alone, never from a conversation's current row (which a later change rewrites).
--
--   started           a conversation began (bot: the bot that had it from the start, if any)
--   bot_answered      a bot's answer reached the contact (bot, run_id)
--   person_answered   a person on the staff answered the contact (by: who)
--   handed            a bot's conversation went to people; cause: contact (they asked), bot (its hand_to_people
--                     tool), said (it said it would hand over without the tool: handed anyway), failure (the bot
--                     could not answer, or no provider could), staff (a person took it)
--   resolved          cause: confirmed (the contact said it helped), assumed (they left a bot's answer without
--                     asking for more), staff (a person resolved it)
--   reopened          the contact wrote again after a resolution
--   rated             the contact's one rating of the conversation, 1-5 (value)
--
-- `conversation_id` is no foreign key on purpose: a guest's conversation pruned after its days are up leaves its
-- outcomes behind (they hold no words and no person), so a report over an old window does not improve.
CREATE TABLE desk_outcomes (
    id              bigserial PRIMARY KEY,
    conversation_id bigint NOT NULL,
    inbox_id        bigint NOT NULL REFERENCES desk_inboxes (id),
    kind            text NOT NULL CHECK (kind IN ('started', 'bot_answered', 'person_answered', 'handed', 'resolved',
                                                  'reopened', 'rated')),
    cause           text CHECK (cause IN ('contact', 'bot', 'said', 'failure', 'staff', 'confirmed', 'assumed')),
    bot             text,
    by_whom         text,
    run_id          bigint,
    value           smallint CHECK (value BETWEEN 1 AND 5),
    at              timestamptz NOT NULL DEFAULT now(),
    CHECK ((kind = 'rated') = (value IS NOT NULL)),
    CHECK ((kind IN ('handed', 'resolved')) = (cause IS NOT NULL))
);
CREATE INDEX desk_outcomes_conversation ON desk_outcomes (conversation_id, id);
CREATE INDEX desk_outcomes_started ON desk_outcomes (inbox_id, at) WHERE kind = 'started';
-- One rating per conversation: a second is refused by the index, whatever raced it.
CREATE UNIQUE INDEX desk_outcomes_one_rating ON desk_outcomes (conversation_id) WHERE kind = 'rated';

-- Who takes a conversation handed to people (appservice/desk/hours.py): its last handoff, when the desk last
-- decided (assigned a present staff member, or told the contact when a person will answer), whom it assigned
-- (round-robin reads it), the moment promised (NULL: as soon as one is free), and when to decide again (a promise
-- falling due).
ALTER TABLE desk_conversations
    ADD COLUMN handed_at   timestamptz,
    ADD COLUMN routed_at   timestamptz,
    ADD COLUMN routed_to   text,
    ADD COLUMN promised_at timestamptz,
    ADD COLUMN reroute_at  timestamptz;
CREATE INDEX desk_conversations_to_route ON desk_conversations (handed_at)
    WHERE status = 'open' AND assignee IS NULL AND handed_at IS NOT NULL;
