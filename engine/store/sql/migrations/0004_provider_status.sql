-- "No provider, no bots": every worker process says, on start and on each heartbeat, whether it can
-- answer model calls and how. A summons is refused unless some worker said yes recently; absent means no.
CREATE TABLE provider_status (
    worker       text PRIMARY KEY,
    usable       boolean NOT NULL,
    mode         text NOT NULL,        -- 'live' | 'stand-in: no key' | 'stand-in: not switched on' | ...
    providers    text[] NOT NULL DEFAULT '{}',
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);
