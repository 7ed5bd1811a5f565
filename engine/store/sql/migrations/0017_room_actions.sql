-- What must be said to the homeserver about membership (a join after an invite, a decline, leaving a room
-- that turned encrypted, `!bots add`/`remove`), remembered in the transaction that decided it: a crash
-- between the commit and the homeserver call no longer loses it (Synapse does not send an invite twice).
CREATE TABLE room_actions (
    id              bigserial PRIMARY KEY,
    room_id         text NOT NULL,
    action          jsonb NOT NULL,          -- {"kind": "Join" | "Decline" | …, and its fields}
    status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done', 'failed')),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    done_at         timestamptz
);
CREATE INDEX room_actions_due ON room_actions (next_attempt_at, id) WHERE status = 'pending';
