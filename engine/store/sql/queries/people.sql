-- The site's people (SPEC §8) and what they spend: ceilings and the ledger, what a personal tool asks, and the
-- audience reader. The personal queries name nobody: whom they answer for is set by agent_become_v1 from the run
-- and read by row security (engine/store/people.py).

-- name: ensure_spender
-- A person who may spend gets a row the first time (the row ceilings lock).
INSERT INTO spenders (who) VALUES ($1) ON CONFLICT (who) DO NOTHING;

-- name: lock_spender
-- Lock the person's row for the rest of the transaction: their summonses are checked one at a time.
SELECT now() AS now FROM spenders WHERE who = $1 FOR UPDATE;

-- name: spender_ledger
-- What person $1 spent on bot $2 in the last 30 days (the longest window), reservations included.
SELECT at, usd::float8 AS usd FROM spend_ledger
 WHERE who = $1 AND bot = $2 AND at > now() - interval '30 days'
 ORDER BY at;

-- name: reserve_spend
-- Hold a run's own spend limit against the person's ceilings (who $1, NULL for nobody) and the deployment's
-- daily cap until the run ends.
INSERT INTO spend_ledger (who, bot, run_id, usd) VALUES ($1, $2, $3, $4);

-- name: deployment_caps
-- The deployment's caps: USD it may spend in any 24 hours (NULL: no cap), how many runs one person may
-- have waiting or running, and how many summonses may wait for one bot.
SELECT daily_spend::float8 AS daily_spend, live_runs_per_person, waiting_per_bot FROM deployment_caps;

-- name: set_deployment_caps
-- The caps as summon.yaml says, written by a process that starts.
UPDATE deployment_caps SET daily_spend = $1, live_runs_per_person = $2, waiting_per_bot = $3, updated_at = now();

-- name: lock_deployment_spend
-- Lock the deployment's caps row for the rest of the transaction: summonses under a daily cap are checked one
-- at a time, never against the same snapshot. The database's now.
SELECT now() AS now FROM deployment_caps FOR UPDATE;

-- name: deployment_spent
-- What the whole deployment spent in the last 24 hours, reservations included.
SELECT coalesce(sum(usd), 0)::float8 AS usd FROM spend_ledger WHERE at > now() - interval '1 day';

-- name: deployment_ledger
-- The deployment's ledger over the last 24 hours, oldest first (read only when a summons is over the cap,
-- to say when it frees up).
SELECT at, usd::float8 AS usd FROM spend_ledger WHERE at > now() - interval '1 day' ORDER BY at;

-- name: draw_spend
-- Run $1 is about to make a model call that may cost at most $2: drawn from its reservation (counted over it,
-- should it ever be more), in the commit that records the call as started.
UPDATE spend_ledger SET drawn = $2, usd = greatest(usd, spent + $2) WHERE run_id = $1 AND reserved;

-- name: spend_call
-- Run $1's call cost $2: the draw is settled to that, in the commit that records the call's step.
UPDATE spend_ledger SET spent = spent + $2, drawn = 0, usd = greatest(usd, spent + $2) WHERE run_id = $1 AND reserved;

-- name: settle_spend
-- A run ended: its reservation becomes what it really cost (its model calls and its speech calls).
UPDATE spend_ledger
   SET usd = s.cost, spent = s.cost, drawn = 0, reserved = false
  FROM (SELECT (SELECT coalesce(sum(cost_usd), 0) FROM agent_steps WHERE run_id = $1)
             + (SELECT coalesce(sum(cost_usd), 0) FROM speech_calls WHERE run_id = $1) AS cost) s
 WHERE run_id = $1;

-- name: personal_as_tools
-- For the rest of this transaction, act as the tools role: it owns nothing and row security applies to it.
SET LOCAL ROLE summon_tools;

-- name: personal_as_engine
-- Back to the engine's own role within the transaction (to queue what the tool's result asks for).
RESET ROLE;

-- name: personal_become
-- Answer for run $1's subject for the rest of this transaction; true when there is somebody to answer for.
SELECT agent_become_v1($1);

-- name: personal_about_me
-- Everything the person the transaction answers for could see about themselves (NULL: nobody to ask about).
SELECT about_me_v1();

-- name: personal_raise_ticket
-- A ticket for run $1's subject (subject $2, body $3), declared as the bot's own; NULL: nobody to raise it for.
SELECT agent_raise_ticket_v1($1, $2, $3);

-- name: run_subject
-- Whom live run $1 is about (agent_subject_v1: its account and desk contact, from the run row alone; a finished
-- run is about nobody, as agent_become_v1 has it), and whether that is who asked it (a personal tool is offered
-- only to a run about the person who reads the answer).
SELECT s.user_id, s.contact_id,
       coalesce(r.asked_by IS NOT NULL AND (r.subject = r.asked_by OR s.user_id = r.asked_by), false) AS is_asker
  FROM agent_runs r CROSS JOIN LATERAL agent_subject_v1(r.id) s
 WHERE r.id = $1 AND r.status IN ('queued', 'running');

-- name: site_classes
-- The audience classes the site's people tables give account $1 (customer, subscribed, tier:, role:, bought:).
SELECT coalesce(array_agg(DISTINCT c.class ORDER BY c.class), '{}'::text[]) AS classes
  FROM (SELECT 'customer' AS class FROM site_orders WHERE user_id = $1 AND status = 'paid'
        UNION ALL
        SELECT 'bought:' || product FROM site_orders WHERE user_id = $1 AND status = 'paid'
        UNION ALL
        SELECT CASE WHEN kind = 'tier' THEN 'tier:' ELSE 'role:' END || name
          FROM site_memberships
         WHERE user_id = $1 AND since <= now() AND (until IS NULL OR until > now())
        UNION ALL
        SELECT 'subscribed'
          FROM site_memberships
         WHERE user_id = $1 AND kind = 'tier' AND since <= now() AND (until IS NULL OR until > now())) c;

-- name: ensure_spend_pool
-- A pool of spend (a surface's own, e.g. one inbox) gets a row the first time (the row its cap locks).
INSERT INTO spend_pools (pool) VALUES ($1) ON CONFLICT (pool) DO NOTHING;

-- name: lock_spend_pool
-- Lock pool $1's row for the rest of the transaction: summonses under its cap are checked one at a time. The
-- database's now.
SELECT now() AS now FROM spend_pools WHERE pool = $1 FOR UPDATE;

-- name: pool_spent
-- What pool $1 spent in the last 24 hours, reservations included.
SELECT coalesce(sum(usd), 0)::float8 AS usd FROM spend_ledger WHERE pool = $1 AND at > now() - interval '1 day';

-- name: pool_ledger
-- Pool $1's ledger over the last 24 hours, oldest first (read only when a summons is over its cap, to say when
-- it frees up).
SELECT at, usd::float8 AS usd FROM spend_ledger WHERE pool = $1 AND at > now() - interval '1 day' ORDER BY at;

-- name: reserve_in_pool
-- Run $1's reservation is counted in pool $2 too (until it is settled, and as what it cost after).
UPDATE spend_ledger SET pool = $2 WHERE run_id = $1;
