-- Per-person ceilings: who spends (the row a summons locks, so racing summons queue up behind each
-- other instead of both squeezing under a ceiling) and what they spent, per bot.

CREATE TABLE spenders (
    who        text PRIMARY KEY,         -- a Matrix user id (later also a desk contact)
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE spend_ledger (
    id       bigserial PRIMARY KEY,
    who      text NOT NULL REFERENCES spenders (who),
    bot      text NOT NULL,
    run_id   bigint UNIQUE REFERENCES agent_runs (id),
    usd      numeric(12, 6) NOT NULL,
    reserved boolean NOT NULL DEFAULT true,  -- a run's own limit, held until it ends and is settled
    at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX spend_ledger_window ON spend_ledger (who, bot, at) INCLUDE (usd);
