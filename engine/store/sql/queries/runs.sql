-- Runs and their steps: summoned, claimed, held by a lease, fenced, finished, swept (engine/store/runs.py).

-- name: insert_run
-- A run for a summons, in its asker's turn $12 (or, asked by nobody, that of $13, whose live runs it counts in);
-- one line summons at most one run (a replayed line gets no row back).
INSERT INTO agent_runs (bot, surface, place, thread, trigger_event, asked_by, subject, prompt,
                        context, limits, max_attempts, turn, live_for)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
ON CONFLICT (trigger_event) DO NOTHING
RETURNING id;

-- name: live_runs_of
-- How many runs person $1 asked for (or that count for them, asked by nobody) are waiting or running: found
-- through their reservations not yet settled (every summoned run reserves under its asker's name, else its
-- subject's, which is whom it counts for), so agent_runs needs no index by asker. A run asked to stop no longer
-- holds its place (a barge-in frees it at once; its reservation still counts against the ceilings until settled).
SELECT count(*) AS live
  FROM spend_ledger l JOIN agent_runs r ON r.id = l.run_id
 WHERE l.who = $1 AND l.reserved AND coalesce(r.asked_by, r.live_for) = $1 AND r.status IN ('queued', 'running')
   AND NOT r.cancel_requested;

-- name: bot_waiting
-- How many runs of bot $1 wait: queued for a worker, or held and waiting for a provider's permit.
SELECT (SELECT count(*) FROM agent_runs WHERE status = 'queued' AND bot = $1)
     + (SELECT count(*) FROM provider_permits p JOIN agent_runs r ON r.id = p.run_id
         WHERE p.granted_at IS NULL AND p.expires_at > clock_timestamp() AND r.bot = $1) AS waiting;

-- name: waiting_runs
-- Runs on surface $2 that have waited at least $1 seconds, oldest first (at most $3): queued for a worker's
-- slot (ahead: the queued runs the claim takes first), or held and waiting in line for provider $1's permit
-- (ahead: the calls before it in that line, whichever worker asked).
WITH queued AS (
    SELECT id, row_number() OVER (ORDER BY turn, created_at, id) - 1 AS ahead,
           extract(epoch FROM clock_timestamp() - created_at)::float8 AS waited, NULL::text AS provider
      FROM agent_runs
     WHERE status = 'queued'
), permits AS (
    SELECT run_id AS id, row_number() OVER (PARTITION BY gate ORDER BY id) - 1 AS ahead,
           extract(epoch FROM clock_timestamp() - asked_at)::float8 AS waited, gate AS provider
      FROM provider_permits
     WHERE granted_at IS NULL AND expires_at > clock_timestamp() AND run_id IS NOT NULL
)
SELECT r.id, r.bot, r.surface, r.place, r.thread, r.trigger_event, r.asked_by,
       w.ahead::integer AS ahead, w.waited, w.provider
  FROM (SELECT * FROM queued UNION ALL SELECT * FROM permits) w
  JOIN agent_runs r ON r.id = w.id
 WHERE w.waited >= $1 AND r.surface = $2 AND NOT r.cancel_requested AND r.status IN ('queued', 'running')
 ORDER BY r.id
 LIMIT $3;

-- name: run_queue
-- What waits, by bot: runs queued for a worker's slot and the oldest's wait; runs held and waiting for a
-- provider's permit and the oldest's wait; runs being worked on (for `summon status` and `/metrics`).
WITH queued AS (
    SELECT bot, count(*) AS n, max(extract(epoch FROM clock_timestamp() - created_at))::float8 AS oldest
      FROM agent_runs WHERE status = 'queued' GROUP BY bot
), permits AS (
    SELECT r.bot, count(*) AS n, max(extract(epoch FROM clock_timestamp() - p.asked_at))::float8 AS oldest
      FROM provider_permits p JOIN agent_runs r ON r.id = p.run_id
     WHERE p.granted_at IS NULL AND p.expires_at > clock_timestamp()
     GROUP BY r.bot
), running AS (
    SELECT bot, count(*) AS n FROM agent_runs WHERE status = 'running' GROUP BY bot
)
SELECT b.bot, coalesce(q.n, 0)::integer AS queued, q.oldest AS oldest_queued,
       coalesce(p.n, 0)::integer AS waiting_for_provider, p.oldest AS oldest_waiting_for_provider,
       coalesce(w.n, 0)::integer AS running
  FROM (SELECT bot FROM queued UNION SELECT bot FROM permits UNION SELECT bot FROM running) b
  LEFT JOIN queued q ON q.bot = b.bot
  LEFT JOIN permits p ON p.bot = b.bot
  LEFT JOIN running w ON w.bot = b.bot
 ORDER BY b.bot;

-- name: get_run
-- One run.
SELECT * FROM agent_runs WHERE id = $1;

-- name: claim_runs
-- Claim up to $3 queued runs for worker $1 with a lease of $2 seconds, with the database's time (the one
-- clock): the lowest turn first (a person's 10th waiting run never before another's 1st), then the oldest.
-- Short and autocommit: the worker then holds each run by id and never asks the claim again.
WITH c AS (
    SELECT id FROM agent_runs
     WHERE status = 'queued'
     ORDER BY turn, created_at, id
     LIMIT $3
       FOR UPDATE SKIP LOCKED
)
UPDATE agent_runs r
   SET status = 'running', lease_owner = $1,
       lease_expires_at = clock_timestamp() + make_interval(secs => $2),
       attempts = r.attempts + 1, started_at = coalesce(r.started_at, clock_timestamp()),
       updated_at = clock_timestamp()
  FROM c
 WHERE r.id = c.id
RETURNING r.*, clock_timestamp() AS now;

-- name: fence_run
-- Every write is fenced: extend the lease of run $1 only while worker $2 holds it, and read the
-- cancel flag (and how many lines have joined the run, and the database's time) in the same commit. No row =
-- the lease was lost: stop at once.
UPDATE agent_runs
   SET lease_expires_at = clock_timestamp() + make_interval(secs => $3), updated_at = clock_timestamp()
 WHERE id = $1 AND status = 'running' AND lease_owner = $2
RETURNING cancel_requested, coalesce(jsonb_array_length(context->'later'), 0) AS later, clock_timestamp() AS now;

-- name: insert_step
-- Record step $2 of run $1; the (run_id, seq) key refuses a second writer.
INSERT INTO agent_steps (run_id, seq, kind, payload, provider, model, tokens_in, tokens_out, cost_usd, worker)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10);

-- name: run_steps
-- A run's steps, in order.
SELECT seq, payload FROM agent_steps WHERE run_id = $1 ORDER BY seq;

-- name: finish_run
-- The run is over (done with an answer, or an ending), fenced on the lease.
UPDATE agent_runs
   SET status = $3, ending = $4, reason = $5, answer = $6, lease_owner = NULL, lease_expires_at = NULL,
       finished_at = clock_timestamp(), updated_at = clock_timestamp()
 WHERE id = $1 AND status = 'running' AND lease_owner = $2
RETURNING id;

-- name: hand_back_run
-- The wall-clock budget is spent: release the lease so the next worker picks the run up at once
-- (the status change to queued NOTIFYs).
UPDATE agent_runs
   SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL, updated_at = clock_timestamp()
 WHERE id = $1 AND status = 'running' AND lease_owner = $2
RETURNING id;

-- name: sweep_expired
-- Re-queue runs whose worker died (lease expired), $1 at a time, never blocking workers. Abort wins over
-- retry: a cancelled run is made terminal; a run past max_attempts fails.
WITH s AS (
    SELECT id FROM agent_runs
     WHERE status = 'running' AND lease_expires_at < clock_timestamp()
     ORDER BY lease_expires_at
     LIMIT $1
       FOR UPDATE SKIP LOCKED
)
UPDATE agent_runs r
   SET status = CASE WHEN r.cancel_requested THEN 'cancelled'
                     WHEN r.attempts >= r.max_attempts THEN 'failed'
                     ELSE 'queued' END,
       ending = CASE WHEN r.cancel_requested THEN 'cancelled'
                     WHEN r.attempts >= r.max_attempts THEN 'failed' END,
       finished_at = CASE WHEN r.cancel_requested OR r.attempts >= r.max_attempts
                          THEN clock_timestamp() END,
       lease_owner = NULL, lease_expires_at = NULL, updated_at = clock_timestamp()
  FROM s
 WHERE r.id = s.id
RETURNING r.id, r.status;

-- name: join_live_run
-- A second mention by the same person to the same bot in the same thread (or main timeline) while its run
-- is still queued or running joins that run: the line is added to its context's `later`, no new run. Only a
-- run asked on the same surface ($7): a line typed in a room never joins a voice turn bound to that room.
UPDATE agent_runs r
   SET context = r.context
                 || jsonb_build_object('later', coalesce(r.context->'later', '[]'::jsonb) || jsonb_build_array($5::jsonb))
                 || CASE WHEN $6::text IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('later_header', $6::text) END,
       updated_at = now()
 WHERE r.id = (SELECT l.id FROM agent_runs l
                WHERE l.bot = $1 AND l.asked_by = $2 AND l.place = $3 AND l.thread IS NOT DISTINCT FROM $4
                  AND l.surface = $7 AND l.status IN ('queued', 'running') AND NOT l.cancel_requested
                ORDER BY l.id DESC LIMIT 1)
   AND r.status IN ('queued', 'running') AND NOT r.cancel_requested
RETURNING r.id;

-- name: run_context
-- A run's context as it stands now (lines said while it works join it): read before each model call.
SELECT context FROM agent_runs WHERE id = $1;

-- name: conversation_busy
-- Whether bot $1 already has a queued or running run in conversation $2 (one at a time, SPEC §6).
SELECT EXISTS (SELECT 1 FROM agent_runs
                WHERE bot = $1 AND conversation = $2 AND status IN ('queued', 'running')) AS busy;

-- name: mark_run_conversation
-- Run $1 belongs to conversation $2; a second unfinished run of the same bot there violates the unique index.
UPDATE agent_runs SET conversation = $2 WHERE id = $1;

-- name: request_cancel
-- Ask the unfinished runs in a room's thread (or main timeline, thread NULL) to stop; only the asker's
-- when $3 is given (a moderator passes NULL). Workers see the flag at their next fenced write.
UPDATE agent_runs SET cancel_requested = true, updated_at = now()
 WHERE place = $1 AND thread IS NOT DISTINCT FROM $2 AND ($3::text IS NULL OR asked_by = $3)
   AND status IN ('queued', 'running') AND NOT cancel_requested
RETURNING id;

-- name: request_cancel_by_event
-- Ask the unfinished run in room $3 summoned by line $1 (or whose progress line is $1) to stop; only when
-- asked by $2, unless $2 is NULL (a moderator of that room).
UPDATE agent_runs r SET cancel_requested = true, updated_at = now()
 WHERE (r.trigger_event = $1
        OR r.id = (SELECT o.run_id FROM outbox o WHERE o.event_id = $1 AND o.run_id IS NOT NULL LIMIT 1))
   AND r.place = $3
   AND ($2::text IS NULL OR r.asked_by = $2)
   AND r.status IN ('queued', 'running') AND NOT r.cancel_requested
RETURNING r.id;

-- name: cancel_room_runs
-- Cancel every unfinished run in a room (it turned encrypted, or we left): queued ones end now,
-- running ones see the flag at their next fenced write.
UPDATE agent_runs
   SET cancel_requested = true,
       status = CASE WHEN status = 'queued' THEN 'cancelled' ELSE status END,
       ending = CASE WHEN status = 'queued' THEN 'cancelled' ELSE ending END,
       finished_at = CASE WHEN status = 'queued' THEN now() ELSE finished_at END,
       updated_at = now()
 WHERE place = $1 AND status IN ('queued', 'running')
RETURNING id;

-- name: cancel_room_run
-- Ask run $1 to stop, only when it is in room $2 and unfinished; no row back = no such run here.
UPDATE agent_runs SET cancel_requested = true, updated_at = now()
 WHERE id = $1 AND place = $2 AND status IN ('queued', 'running') AND NOT cancel_requested
RETURNING id;

-- name: unfinished_room_runs
-- The runs in room $1 that are still queued or running (what `cancel` accepts), oldest first.
SELECT id FROM agent_runs WHERE place = $1 AND status IN ('queued', 'running') ORDER BY id;

-- name: room_runs
-- The latest $2 runs in room $1, newest first, with what each cost: read newest first from the index by (place, id)
-- and stopped after $2, however long the room's history. Asked with `place = $1 ORDER BY id DESC`, the planner
-- (guessing every room's runs spread evenly over the table) may walk the whole table's ids backwards, filtering on
-- place — for a room whose runs are old, a year of everyone's runs read to find its twenty (tests/db/
-- test_room_runs_bounded.py, tests/bench/year.py). Said as a range over place, ordered by (place, id), only that
-- index gives the order, so only it is read.
SELECT r.id, r.bot, r.status, r.ending, r.asked_by, r.created_at,
       coalesce((SELECT sum(s.cost_usd) FROM agent_steps s WHERE s.run_id = r.id), 0)::float8 AS cost_usd
  FROM agent_runs r
 WHERE r.place >= $1 AND r.place <= $1
 ORDER BY r.place DESC, r.id DESC
 LIMIT $2;

-- name: room_spend
-- What the runs in room $1 cost, by bot: today and this month (UTC), from their steps.
SELECT r.bot,
       coalesce(sum(s.cost_usd) FILTER (WHERE s.created_at >= date_trunc('day', now(), 'UTC')), 0)::float8 AS today,
       coalesce(sum(s.cost_usd), 0)::float8 AS month
  FROM agent_steps s JOIN agent_runs r ON r.id = s.run_id
 WHERE r.place = $1 AND s.created_at >= date_trunc('month', now(), 'UTC')
 GROUP BY r.bot
 ORDER BY r.bot;

-- name: inspect_runs
-- The latest runs, newest first, optionally only run $1, room $2 or bot $3, at most $4.
SELECT id, bot, place, thread, asked_by, status, ending, reason, attempts, created_at, started_at,
       finished_at, left(coalesce(answer, ''), 120) AS answer
  FROM agent_runs
 WHERE ($1::bigint IS NULL OR id = $1) AND ($2::text IS NULL OR place = $2) AND ($3::text IS NULL OR bot = $3)
 ORDER BY id DESC
 LIMIT $4;

-- name: inspect_steps
-- A run's steps with what each cost and how long after the previous one it was recorded.
SELECT seq, kind, provider, model, tokens_in, tokens_out, cost_usd::float8 AS cost_usd, worker, payload,
       extract(epoch FROM created_at - coalesce(lag(created_at) OVER (ORDER BY seq),
                                                (SELECT started_at FROM agent_runs WHERE id = $1)))::float8 AS seconds
  FROM agent_steps WHERE run_id = $1 ORDER BY seq;

-- name: keep_lease
-- While a tool runs (no step is written then): extend the lease of run $1 only while worker $2 holds it, by $3
-- seconds. No row = the lease was lost: the tool is stopped.
UPDATE agent_runs
   SET lease_expires_at = clock_timestamp() + make_interval(secs => $3)
 WHERE id = $1 AND status = 'running' AND lease_owner = $2
RETURNING id;

-- name: begin_tool_call
-- A side-effecting tool's call $2 (tool $3) of run $1 begins, recorded only while worker $4 holds the run's
-- lease. Whether the lease is held; whether it began now; and, when it was begun before (the same run and call
-- id), how that went: its result and whether it is an error (NULL: begun, never reported back).
WITH held AS (
    SELECT 1 FROM agent_runs WHERE id = $1 AND status = 'running' AND lease_owner = $4
), began AS (
    INSERT INTO tool_calls (run_id, call_id, tool, worker)
    SELECT $1, $2, $3, $4 FROM held
    ON CONFLICT (run_id, call_id) DO NOTHING
    RETURNING run_id
)
SELECT EXISTS (SELECT 1 FROM held) AS held, EXISTS (SELECT 1 FROM began) AS began, t.result, t.is_error
  FROM (SELECT 1) one
  LEFT JOIN tool_calls t ON t.run_id = $1 AND t.call_id = $2;

-- name: end_tool_call
-- Call $2 of run $1, begun by worker $3, returned $4 (an error: $5). Written whether or not the lease is still
-- held: what the tool did, it did, and the run's next holder returns this rather than doing it again.
UPDATE tool_calls
   SET result = $4, is_error = $5, finished_at = clock_timestamp()
 WHERE run_id = $1 AND call_id = $2 AND worker = $3 AND finished_at IS NULL;

-- name: tool_call_result
-- What side-effecting call $2 of run $1 returned, when it finished (no row: never begun, or never finished).
SELECT result, is_error FROM tool_calls WHERE run_id = $1 AND call_id = $2 AND finished_at IS NOT NULL;

-- name: cancel_requested_of
-- Which of runs $1 have been asked to stop (read when the cancel notifications may have been missed).
SELECT id FROM agent_runs WHERE id = ANY($1::bigint[]) AND cancel_requested;

-- name: tell_piece
-- A run's words as they come, told to whoever listens on channel $1 (payload $2: engine/run/pieces.py).
SELECT pg_notify($1, $2);
