-- Provider limits shared by every worker: permits, leased, counted under the provider's row lock
-- (engine/store/providers.py; the rules are engine/core/permits.py).

-- name: add_provider_gate
-- The provider's row, made the first time anybody asks for a permit to it.
INSERT INTO provider_gates (gate) VALUES ($1) ON CONFLICT (gate) DO NOTHING;

-- name: lock_provider_gate
-- Take provider $1's row for the rest of the transaction (permit takers go one after the other, each
-- counting what the one before wrote), with how long its pause still runs (NULL: not paused).
SELECT CASE WHEN paused_until > clock_timestamp()
            THEN extract(epoch FROM paused_until - clock_timestamp())::float8 END AS paused_for
  FROM provider_gates
 WHERE gate = $1
   FOR UPDATE;

-- name: provider_gate_load
-- Provider $1's permits as they stand: calls in flight (granted, not handed back, lease not run out) and the
-- soonest of their leases to run out; requests and tokens granted in the last $2 seconds, and the age of the
-- oldest of those grants.
SELECT (SELECT count(*) FROM provider_permits
         WHERE gate = $1 AND granted_at IS NOT NULL AND released_at IS NULL
           AND expires_at > clock_timestamp()) AS in_flight,
       (SELECT extract(epoch FROM min(expires_at) - clock_timestamp())::float8 FROM provider_permits
         WHERE gate = $1 AND granted_at IS NOT NULL AND released_at IS NULL
           AND expires_at > clock_timestamp()) AS next_expiry,
       w.requests, w.tokens, w.oldest_age
  FROM (SELECT count(*) AS requests, coalesce(sum(tokens), 0)::bigint AS tokens,
               extract(epoch FROM clock_timestamp() - min(granted_at))::float8 AS oldest_age
          FROM provider_permits
         WHERE gate = $1 AND granted_at > clock_timestamp() - make_interval(secs => $2)) w;

-- name: provider_waiting
-- The calls waiting for provider $1, in the order they asked (at most $2): the waiting permits whose askers
-- still look (a dead worker's stop counting once their time to look again has passed).
SELECT id, worker, tokens
  FROM provider_permits
 WHERE gate = $1 AND granted_at IS NULL AND expires_at > clock_timestamp()
 ORDER BY id
 LIMIT $2;

-- name: insert_provider_permit
-- A permit to provider $1 for worker $2's call for run $3 of about $4 tokens, leased $5 seconds once granted:
-- granted now when $6, else waiting (its asker looks again within $7 seconds).
INSERT INTO provider_permits (gate, worker, run_id, tokens, lease_seconds, granted_at, expires_at)
VALUES ($1, $2, $3, $4, $5::float8, CASE WHEN $6::boolean THEN clock_timestamp() END,
        clock_timestamp() + make_interval(secs => CASE WHEN $6::boolean THEN $5::float8 ELSE $7::float8 END))
RETURNING id;

-- name: grant_provider_permits
-- Grant the waiting permits $1 (each leased its own lease_seconds from now).
UPDATE provider_permits
   SET granted_at = clock_timestamp(), expires_at = clock_timestamp() + make_interval(secs => lease_seconds)
 WHERE id = ANY($1::bigint[]) AND granted_at IS NULL
RETURNING id;

-- name: keep_provider_permits_waiting
-- The waiting permits $1 are still wanted: they stay in line for $2 more seconds.
UPDATE provider_permits
   SET expires_at = clock_timestamp() + make_interval(secs => $2)
 WHERE id = ANY($1::bigint[]) AND granted_at IS NULL;

-- name: release_provider_permit
-- Hand permit $1 back (the call returned), with the tokens it really used ($2; NULL: keep the estimate), and
-- wake whoever waits for that provider.
WITH released AS (
    UPDATE provider_permits
       SET released_at = clock_timestamp(), tokens = coalesce($2, tokens)
     WHERE id = $1 AND released_at IS NULL AND granted_at IS NOT NULL
    RETURNING gate
)
SELECT pg_notify('summon_permits', gate) FROM released;

-- name: withdraw_provider_permit
-- Permit $1 is no longer wanted while it waits (its asker gave up waiting); no row back: it was granted
-- meanwhile.
DELETE FROM provider_permits WHERE id = $1 AND granted_at IS NULL RETURNING id;

-- name: wake_provider_waiters
-- Wake every worker waiting for provider $1 (there is room for a call another worker waits with).
SELECT pg_notify('summon_permits', $1);

-- name: prune_provider_permits
-- Forget permits no window counts any more: handed back (or their lease run out) and granted more than $1
-- seconds ago, and waiting ones nobody looks after.
DELETE FROM provider_permits
 WHERE (granted_at IS NULL AND expires_at < clock_timestamp() - interval '1 minute')
    OR (granted_at < clock_timestamp() - make_interval(secs => $1)
        AND (released_at IS NOT NULL OR expires_at < clock_timestamp()));

-- name: forget_provider_permits
-- Worker $1 stops: its calls are handed back and it waits for nothing.
WITH waiting AS (
    DELETE FROM provider_permits WHERE worker = $1 AND granted_at IS NULL
), released AS (
    UPDATE provider_permits SET released_at = clock_timestamp()
     WHERE worker = $1 AND granted_at IS NOT NULL AND released_at IS NULL
    RETURNING gate
)
SELECT pg_notify('summon_permits', g) FROM (SELECT DISTINCT gate AS g FROM released) d;

-- name: pause_provider
-- Provider $1 asked everyone to wait $2 seconds (a 429 with retry-after): no call to it before then, from any
-- worker ($3: its own sentence). A longer pause already recorded stands.
INSERT INTO provider_gates (gate, paused_until, paused_reason, updated_at)
VALUES ($1, clock_timestamp() + make_interval(secs => $2::float8), $3, clock_timestamp())
ON CONFLICT (gate) DO UPDATE
   SET paused_until = greatest(provider_gates.paused_until, EXCLUDED.paused_until),
       paused_reason = CASE WHEN provider_gates.paused_until > EXCLUDED.paused_until
                            THEN provider_gates.paused_reason ELSE EXCLUDED.paused_reason END,
       updated_at = clock_timestamp();

-- name: provider_paused_for
-- How long provider $1's pause still runs, in seconds (no row: not paused).
SELECT extract(epoch FROM paused_until - clock_timestamp())::float8 AS paused_for
  FROM provider_gates
 WHERE gate = $1 AND paused_until > clock_timestamp();

-- name: provider_gates_status
-- Every provider anybody asked a permit of: calls in flight, calls waiting and the oldest's wait, requests and
-- tokens granted in the last minute, and how long its pause still runs (for `summon status` and `/metrics`).
SELECT g.gate AS provider,
       (SELECT count(*) FROM provider_permits p WHERE p.gate = g.gate AND p.granted_at IS NOT NULL
           AND p.released_at IS NULL AND p.expires_at > clock_timestamp())::integer AS in_flight,
       (SELECT count(*) FROM provider_permits p WHERE p.gate = g.gate AND p.granted_at IS NULL
           AND p.expires_at > clock_timestamp())::integer AS waiting,
       (SELECT extract(epoch FROM clock_timestamp() - min(p.asked_at))::float8 FROM provider_permits p
         WHERE p.gate = g.gate AND p.granted_at IS NULL AND p.expires_at > clock_timestamp()) AS oldest_waiting,
       (SELECT count(*) FROM provider_permits p WHERE p.gate = g.gate
           AND p.granted_at > clock_timestamp() - interval '1 minute')::integer AS requests_last_minute,
       (SELECT coalesce(sum(p.tokens), 0) FROM provider_permits p WHERE p.gate = g.gate
           AND p.granted_at > clock_timestamp() - interval '1 minute')::bigint AS tokens_last_minute,
       CASE WHEN pg.paused_until > clock_timestamp()
            THEN extract(epoch FROM pg.paused_until - clock_timestamp())::float8 END AS paused_for,
       CASE WHEN pg.paused_until > clock_timestamp() THEN pg.paused_reason END AS paused_reason
  FROM (SELECT gate FROM provider_gates UNION SELECT gate FROM provider_permits) g
  LEFT JOIN provider_gates pg ON pg.gate = g.gate
 ORDER BY g.gate;
