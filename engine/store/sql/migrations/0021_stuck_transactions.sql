-- A homeserver transaction that can never be stored (something in it the database refuses every time, outside
-- any one event's savepoint) must not be answered 500 forever: the homeserver would send it again and again, and
-- everything after it waits. Each attempt that failed that way is counted here, in its own commit (the failed
-- transaction's own writes are rolled back), so the count survives restarts and holds across processes. It is
-- keyed by a digest of the transaction id: the id itself may be what the database refuses. A database that is
-- away, or asked for a retry, counts nothing. The row goes when the transaction is finally stored.
CREATE TABLE as_transaction_failures (
    txn_digest text PRIMARY KEY,             -- sha256 of the homeserver's transaction id, hex
    attempts   integer NOT NULL,
    last_error text NOT NULL,
    first_at   timestamptz NOT NULL DEFAULT now(),
    last_at    timestamptz NOT NULL DEFAULT now()
);

-- An event that could not be stored, kept as received (as escaped JSON text, capped) with the reason, so an
-- operator can see what was refused instead of it vanishing: one that failed in its own savepoint, or one
-- left out when a transaction that kept failing was finally stored without it.
CREATE TABLE rejected_events (
    id          bigserial PRIMARY KEY,
    txn_digest  text,                         -- the transaction it came in (NULL: a room's state read after a join)
    event_id    text,
    room_id     text,
    reason      text NOT NULL,
    event       text NOT NULL,
    rejected_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX rejected_events_at ON rejected_events (rejected_at);
