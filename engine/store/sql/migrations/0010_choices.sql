-- A bot's choices (SPEC §4). An answer that ends in choices is an offer: cut once, when the answer is
-- stored, and kept here apart from the words. It belongs to the room: whoever presses first takes it,
-- in one statement (`taken_at IS NULL` in the UPDATE's WHERE), so of two presses at the same moment
-- exactly one gets through.
CREATE TABLE bot_offers (
    id           bigserial PRIMARY KEY,
    run_id       bigint NOT NULL UNIQUE REFERENCES agent_runs (id),
    bot          text NOT NULL,
    room_id      text NOT NULL,
    thread_root  text,
    asked_by     text,                  -- the one answered: their bare number is a press too
    words        text NOT NULL,         -- the answer without its choices (the spent set is redrawn under it)
    choices      jsonb NOT NULL,        -- [{label, detail}], pressed by number from 1
    links        jsonb NOT NULL DEFAULT '[]',
    style        text NOT NULL CHECK (style IN ('reactions', 'poll')),
    answer_txn   text NOT NULL UNIQUE,  -- the answer's outbox txn id, and its event id once sent
    answer_event text UNIQUE,
    poll_txn     text UNIQUE,           -- style 'poll': the poll's, likewise
    poll_event   text UNIQUE,
    taken_by     text,
    taken_choice integer,
    taken_at     timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    CHECK ((taken_at IS NULL) = (taken_by IS NULL) AND (taken_at IS NULL) = (taken_choice IS NULL))
);
CREATE INDEX bot_offers_thread ON bot_offers (room_id, thread_root, id);

-- Every press, taken or not: knowing which of the ways forward people take is what choices are for.
-- One row per pressing event, so a transaction the homeserver delivers twice is one press.
CREATE TABLE bot_choices (
    id          bigserial PRIMARY KEY,
    offer_id    bigint NOT NULL REFERENCES bot_offers (id) ON DELETE CASCADE,
    chooser     text NOT NULL,
    choice      integer NOT NULL,
    how         text NOT NULL CHECK (how IN ('reaction', 'vote', 'number')),
    event_id    text NOT NULL UNIQUE,
    room_id     text NOT NULL,
    thread_root text,
    taken       boolean NOT NULL DEFAULT false,
    run_id      bigint REFERENCES agent_runs (id),  -- the run the taking press summoned
    pressed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX bot_choices_offer ON bot_choices (offer_id);
CREATE INDEX bot_choices_run ON bot_choices (run_id) WHERE run_id IS NOT NULL;

-- An offer learns its answer's (and poll's) event id the moment the outbox records it, so a reaction
-- or a vote can be matched to the offer it presses.
CREATE FUNCTION summon_offer_sent_v1() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE bot_offers SET answer_event = NEW.event_id WHERE answer_txn = NEW.txn_id;
    UPDATE bot_offers SET poll_event = NEW.event_id WHERE poll_txn = NEW.txn_id;
    RETURN NEW;
END $$;

CREATE TRIGGER outbox_offer_sent
    AFTER UPDATE OF event_id ON outbox
    FOR EACH ROW WHEN (NEW.event_id IS NOT NULL AND OLD.event_id IS DISTINCT FROM NEW.event_id)
    EXECUTE FUNCTION summon_offer_sent_v1();
