-- Workers' heartbeats: whether anything can answer model calls (engine/store/workers.py).

-- name: record_provider_status
-- A worker's heartbeat: whether it can answer model calls, how, and with which providers.
INSERT INTO provider_status (worker, usable, mode, providers, heartbeat_at) VALUES ($1, $2, $3, $4, now())
ON CONFLICT (worker) DO UPDATE
   SET usable = EXCLUDED.usable, mode = EXCLUDED.mode, providers = EXCLUDED.providers, heartbeat_at = now();

-- name: forget_provider_status
-- A worker that stops says so (a worker that dies simply stops beating).
DELETE FROM provider_status WHERE worker = $1;

-- name: provider_usable
-- Whether any worker said, within the last $1 seconds, that it can answer model calls.
SELECT EXISTS (SELECT 1 FROM provider_status
                WHERE usable AND heartbeat_at > now() - make_interval(secs => $1)) AS usable;

-- name: provider_state
-- Whether any worker said, within the last $1 seconds, that it can answer model calls, and what the freshest
-- of those heartbeats said it answers with (NULL: no worker beats at all).
SELECT coalesce(bool_or(usable), false) AS usable, (array_agg(mode ORDER BY heartbeat_at DESC))[1] AS mode
  FROM provider_status
 WHERE heartbeat_at > now() - make_interval(secs => $1);
