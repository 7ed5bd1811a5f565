-- The door (appservice/door/): grants minted, voice sessions and the room each is bound to, and each turn
-- asked through it (a turn is an ordinary run; this keeps what only the door needs to know about it).

-- Every grant minted, by the start route (from a person's own Matrix session) or by `summon grant` (an
-- operator): who was given which door, until when. A grant is verified by its signature, never looked up here.
CREATE TABLE door_grants (
    id         text PRIMARY KEY,
    bot        text NOT NULL,
    person     text NOT NULL,
    room_id    text,
    key_id     text NOT NULL,
    minted_by  text NOT NULL CHECK (minted_by IN ('start', 'operator')),
    issued_at  timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX door_grants_expires ON door_grants (expires_at);

-- A voice session (one grant's) and the room it is bound to. A room the client names is a claim: `pending_room`
-- while it is checked, the binding (`room_id`, the session's origin) only once both the person and the bot are
-- found joined. `claim` counts the claims, so a newer one supersedes a pending one. No room: the person's DM.
CREATE TABLE door_sessions (
    grant_id     text PRIMARY KEY,
    bot          text NOT NULL,
    person       text NOT NULL,
    room_id      text,
    room_name    text,
    pending_room text,
    claim        integer NOT NULL DEFAULT 0,
    expires_at   timestamptz NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX door_sessions_expires ON door_sessions (expires_at);

-- One turn through the door: its run, the session, the room it was asked from (its origin, kept from when it
-- began), whether a response still waits for it (false: the work outlived its turn and is posted to Matrix
-- when done), whether the run has been handed over, and where an outlived answer was posted.
CREATE TABLE door_turns (
    run_id       bigint PRIMARY KEY REFERENCES agent_runs (id) ON DELETE CASCADE,
    grant_id     text NOT NULL REFERENCES door_sessions (grant_id) ON DELETE CASCADE,
    origin_room  text,
    waiting      boolean NOT NULL DEFAULT true,
    finished     boolean NOT NULL DEFAULT false,
    delivered_to text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz
);
CREATE INDEX door_turns_session ON door_turns (grant_id, run_id);
