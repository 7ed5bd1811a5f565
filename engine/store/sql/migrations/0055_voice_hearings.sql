-- Nothing is paid for before every gate (issue 24, item 3; SPEC §15): a voice note's hearing is held before its
-- audio is fetched and transcribed, and every transcription is recorded, whether the summons it was for stood or
-- not.
--
-- A hearing is one row per voice note (its event), written in the commit that stored the note once every gate
-- a summons makes has passed — with its worst case (the longest note heard × the price) reserved on the asker's
-- ledger under its own spend_ledger row (run_id NULL: it is paid before any run exists, and whether a run comes
-- of it or not). Its state is the durable marker that a note is never transcribed twice:
--   held     the gates passed and the worst case is reserved; nothing was paid yet (a retry may fetch again)
--   calling  the transcription call is being made (the commit before it), the reservation lowered to the
--            note's own bound; a retry that finds this never calls again (lost, at the worst case)
--   heard    the words came back and the call is settled; a retry goes straight to asking the bot
--   asked    the bot was asked with the words (or the words joined a live run)
--   refused  a gate, a claim or the sender's rate refused it (why), before anything was paid, or after
--   failed   it could not be heard (why), its call (if any) recorded
--   lost     a call was cut off (a crash, a timeout) before its answer was recorded: settled at its worst case
CREATE TABLE voice_hearings (
    event_id   text PRIMARY KEY,
    room_id    text NOT NULL,
    sender     text NOT NULL,
    bot        text NOT NULL,
    state      text NOT NULL CHECK (state IN ('held', 'calling', 'heard', 'asked', 'refused', 'failed', 'lost')),
    why        text,                                 -- refused / failed: a ### voice key or a summons refusal
    ledger_id  bigint REFERENCES spend_ledger (id),  -- the reservation, then what the transcription cost
    seconds    numeric(12, 3),                       -- the note's duration bound, measured or by bytes
    heard      text,                                 -- the transcript, once it came back
    run_id     bigint REFERENCES agent_runs (id),    -- the run it asked (or joined)
    created_at timestamptz NOT NULL DEFAULT now(),
    called_at  timestamptz                           -- when the transcription call was begun
);
-- A sender's rate and their hearings in flight (which count as live runs when they ask again).
CREATE INDEX voice_hearings_sender ON voice_hearings (sender, created_at);

-- A transcription is recorded against the note it heard, whether or not a run came of it (its cost is on the
-- hearing's own ledger row, never on a run's, so a run's settle does not count it again); a speech call stays
-- the run's. The outcome says what was paid: answered (the words came back), refused (the endpoint answered with
-- an error: nothing billed), unknown (no answer came back — cut off, timed out: counted at its worst case).
ALTER TABLE speech_calls
    ALTER COLUMN run_id DROP NOT NULL,
    ADD COLUMN event_id text,
    ADD COLUMN outcome text NOT NULL DEFAULT 'answered' CHECK (outcome IN ('answered', 'refused', 'unknown')),
    ADD CONSTRAINT speech_calls_whose CHECK (run_id IS NOT NULL OR event_id IS NOT NULL);
CREATE UNIQUE INDEX speech_calls_one_hearing ON speech_calls (event_id) WHERE kind = 'transcription';
-- `summon runs`: the transcription a run was asked (or joined) with.
CREATE INDEX voice_hearings_run ON voice_hearings (run_id) WHERE run_id IS NOT NULL;
