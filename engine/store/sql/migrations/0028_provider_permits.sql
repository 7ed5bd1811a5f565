-- Provider limits shared by every worker on every machine (issue 18): calls in flight, requests and tokens per
-- minute, and a provider's own "wait" (a 429 with retry-after) kept for everyone.

-- One row per provider: what every permit is taken under (its row lock puts the takers one after the other,
-- so each counts what the one before it wrote), and the pause a 429 with retry-after asked for.
CREATE TABLE provider_gates (
    gate          text PRIMARY KEY,              -- the provider's name
    paused_until  timestamptz,                   -- no call to it before then (NULL: not paused)
    paused_reason text,                          -- the provider's own sentence
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- A permit: one model call to a provider, asked for by a worker (waiting: granted_at NULL, in id order), then
-- granted and leased (expires_at: a worker that dies holding one holds it only this long), then handed back
-- (released_at). Kept for a little over a minute after, so requests and tokens per minute are counted from
-- the same rows; pruned after (engine/providers/limits.py).
CREATE TABLE provider_permits (
    id            bigserial PRIMARY KEY,
    gate          text NOT NULL,
    worker        text NOT NULL,
    run_id        bigint,                        -- the run the call is for (what the progress line shows)
    tokens        integer NOT NULL CHECK (tokens >= 0),  -- estimated when asked, what it used when handed back
    lease_seconds double precision NOT NULL CHECK (lease_seconds > 0),
    asked_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    granted_at    timestamptz,
    expires_at    timestamptz NOT NULL,          -- waiting: until the asker looks again; granted: the lease
    released_at   timestamptz
);
-- Requests and tokens in the window; calls in flight; who waits, in order.
CREATE INDEX provider_permits_granted ON provider_permits (gate, granted_at) INCLUDE (tokens) WHERE granted_at IS NOT NULL;
CREATE INDEX provider_permits_held ON provider_permits (gate, expires_at) WHERE granted_at IS NOT NULL AND released_at IS NULL;
CREATE INDEX provider_permits_waiting ON provider_permits (gate, id) WHERE granted_at IS NULL;
CREATE INDEX provider_permits_worker ON provider_permits (worker);
