-- The spine: transactions, rooms and their lines, published bots, runs and steps, the outbox.

CREATE TABLE as_transactions (
    txn_id      text PRIMARY KEY,
    events      integer NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE rooms (
    room_id            text PRIMARY KEY,
    encrypted          boolean NOT NULL DEFAULT false,
    encrypted_at       timestamptz,
    left_at            timestamptz,
    room_version       text,
    create_content     jsonb,
    create_sender      text,
    power_levels       jsonb,
    history_visibility text,
    settings           jsonb NOT NULL DEFAULT '{}',
    created_at         timestamptz NOT NULL DEFAULT now()
);

-- Who is in a room, as the room's own member events say (display names are used in context).
CREATE TABLE room_members (
    room_id      text NOT NULL REFERENCES rooms (room_id) ON DELETE CASCADE,
    user_id      text NOT NULL,
    membership   text NOT NULL,
    display_name text,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (room_id, user_id)
);

-- Every room event stored once, by event_id, with the line a person reads (`said`).
CREATE TABLE room_events (
    event_id    text PRIMARY KEY,
    room_id     text NOT NULL,
    sender      text NOT NULL,
    event_type  text NOT NULL,
    state_key   text,
    ts          bigint NOT NULL,
    content     jsonb NOT NULL,
    said        text NOT NULL DEFAULT '',
    thread_root text,
    reply_to    text,
    replaces    text,
    edited_ts   bigint,
    redacted    boolean NOT NULL DEFAULT false,
    stored_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX room_events_timeline ON room_events (room_id, ts) WHERE thread_root IS NULL AND replaces IS NULL;
CREATE INDEX room_events_thread ON room_events (thread_root, ts) WHERE thread_root IS NOT NULL;

-- The projection of compiled content. `withdrawn_at` set = the file is gone; the row stays for history.
CREATE TABLE bots (
    slug         text PRIMARY KEY,
    name         text NOT NULL,
    puppet       text NOT NULL UNIQUE,
    surfaces     text[] NOT NULL,
    compiled     jsonb NOT NULL,
    published_at timestamptz NOT NULL DEFAULT now(),
    withdrawn_at timestamptz
);

CREATE TABLE agent_runs (
    id               bigserial PRIMARY KEY,
    bot              text NOT NULL REFERENCES bots (slug),
    surface          text NOT NULL,
    room_id          text,
    thread_root      text,
    trigger_event    text UNIQUE,          -- the line that summoned it: one line, at most one run
    asked_by         text,
    subject          text,
    prompt           text NOT NULL,        -- what was asked, in the asker's words
    context          jsonb NOT NULL DEFAULT '{}',
    script           jsonb,                -- a scripted model's turns: such a run is never bought
    limits           jsonb NOT NULL,
    status           text NOT NULL DEFAULT 'queued'
                     CHECK (status IN ('queued', 'running', 'done', 'cancelled', 'failed')),
    ending           text,
    reason           text,
    answer           text,
    cancel_requested boolean NOT NULL DEFAULT false,
    lease_owner      text,
    lease_expires_at timestamptz,
    attempts         integer NOT NULL DEFAULT 0,
    max_attempts     integer NOT NULL DEFAULT 3,
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz
);
CREATE INDEX agent_runs_queued ON agent_runs (created_at, id) WHERE status = 'queued';
CREATE INDEX agent_runs_leased ON agent_runs (lease_expires_at) WHERE status = 'running';
CREATE INDEX agent_runs_room ON agent_runs (room_id) WHERE status IN ('queued', 'running');

CREATE TABLE agent_steps (
    run_id     bigint NOT NULL REFERENCES agent_runs (id) ON DELETE CASCADE,
    seq        integer NOT NULL,
    kind       text NOT NULL,
    payload    jsonb NOT NULL,
    provider   text,
    model      text,
    tokens_in  integer NOT NULL DEFAULT 0,
    tokens_out integer NOT NULL DEFAULT 0,
    cost_usd   numeric(12, 6) NOT NULL DEFAULT 0,
    worker     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, seq)          -- a second writer cannot record the same step twice
);

-- Every message to Matrix, with a stable transaction id so a retry after a crash is the same send.
CREATE TABLE outbox (
    id              bigserial PRIMARY KEY,
    txn_id          text NOT NULL UNIQUE,
    run_id          bigint REFERENCES agent_runs (id),
    room_id         text NOT NULL,
    sender          text NOT NULL,
    event_type      text NOT NULL,
    content         jsonb NOT NULL,
    status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed')),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    event_id        text,
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    sent_at         timestamptz
);
CREATE INDEX outbox_pending ON outbox (next_attempt_at, id) WHERE status = 'pending';

-- Wake-ups: a worker is told the moment a run becomes claimable, the sender the moment a message waits.
CREATE FUNCTION summon_notify_run_v1() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('summon_runs', NEW.id::text);
    RETURN NEW;
END $$;

CREATE TRIGGER agent_runs_queued_notify
    AFTER INSERT OR UPDATE OF status ON agent_runs
    FOR EACH ROW WHEN (NEW.status = 'queued')
    EXECUTE FUNCTION summon_notify_run_v1();

CREATE FUNCTION summon_notify_outbox_v1() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('summon_outbox', NEW.id::text);
    RETURN NEW;
END $$;

CREATE TRIGGER outbox_pending_notify
    AFTER INSERT ON outbox
    FOR EACH ROW EXECUTE FUNCTION summon_notify_outbox_v1();
