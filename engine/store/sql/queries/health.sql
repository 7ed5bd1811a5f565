-- The deployment's health at a glance, for `summon status` and /metrics (engine/store/health.py).

-- name: health_snapshot
-- Runs waiting and running, the oldest waiting run's age, the outbox's pending messages and the oldest
-- one's age, and the workers that beat within the last $1 seconds (and of those, the ones that can answer
-- model calls). Each count is read off a partial index; ages are by the database's clock.
SELECT (SELECT count(*) FROM agent_runs WHERE status = 'queued')::int AS queued,
       (SELECT extract(epoch FROM now() - min(created_at)) FROM agent_runs WHERE status = 'queued')::float8
           AS oldest_queued_seconds,
       (SELECT count(*) FROM agent_runs WHERE status = 'running')::int AS running,
       (SELECT count(*) FROM outbox WHERE status = 'pending')::int AS outbox_pending,
       (SELECT extract(epoch FROM now() - min(created_at)) FROM outbox WHERE status = 'pending')::float8
           AS oldest_unsent_seconds,
       (SELECT count(*) FROM provider_status
         WHERE heartbeat_at > now() - make_interval(secs => $1))::int AS workers_alive,
       (SELECT count(*) FROM provider_status
         WHERE usable AND heartbeat_at > now() - make_interval(secs => $1))::int AS workers_usable,
       (SELECT mode FROM provider_status WHERE heartbeat_at > now() - make_interval(secs => $1)
         ORDER BY heartbeat_at DESC LIMIT 1) AS provider_mode;

-- name: listen_alive
-- Asked now and then on a LISTEN connection, which otherwise only waits: one that gives no answer is dead
-- without having said so (a half-open TCP connection) and is replaced (engine/store/store.py, listen).
SELECT 1;
