-- Every statement summon runs, looked up by name (engine/store/queries.py). No SQL lives in Python.

-- name: record_transaction
-- Remember an appservice transaction id; no row back = seen before (a replay: store and summon nothing).
INSERT INTO as_transactions (txn_id, events) VALUES ($1, $2)
ON CONFLICT (txn_id) DO NOTHING
RETURNING txn_id;

-- name: ensure_room
-- A room we hear from gets a row the first time.
INSERT INTO rooms (room_id) VALUES ($1) ON CONFLICT (room_id) DO NOTHING;

-- name: lock_room
-- Everything stored about a room takes the room's row first, so two transactions touching the same
-- room (a transaction's events, the state read after a join) queue up instead of deadlocking.
SELECT room_id FROM rooms WHERE room_id = $1 FOR UPDATE;

-- name: get_room
-- The room's row.
SELECT * FROM rooms WHERE room_id = $1;

-- name: mark_room_encrypted
-- The room turned encrypted; returns the row only the first time.
UPDATE rooms SET encrypted = true, encrypted_at = now() WHERE room_id = $1 AND NOT encrypted
RETURNING room_id;

-- name: mark_room_left
-- We left (or were removed from) the room.
UPDATE rooms SET left_at = now() WHERE room_id = $1;

-- name: mark_room_joined
-- We are (back) in the room.
UPDATE rooms SET left_at = NULL WHERE room_id = $1;

-- name: set_room_create
-- The room's m.room.create content, its sender (the creator) and the room version.
UPDATE rooms SET create_content = $2, create_sender = $3, room_version = $4 WHERE room_id = $1;

-- name: set_room_power_levels
-- The room's current m.room.power_levels content.
UPDATE rooms SET power_levels = $2 WHERE room_id = $1;

-- name: set_room_history_visibility
-- The room's current history visibility.
UPDATE rooms SET history_visibility = $2 WHERE room_id = $1;

-- name: upsert_member
-- A member event: who is in the room, under which display name.
INSERT INTO room_members (room_id, user_id, membership, display_name) VALUES ($1, $2, $3, $4)
ON CONFLICT (room_id, user_id) DO UPDATE
   SET membership = EXCLUDED.membership,
       display_name = coalesce(EXCLUDED.display_name, room_members.display_name),
       updated_at = now();

-- name: our_members
-- Which of our users (puppets and the service user, by prefix) are joined or invited in a room.
SELECT user_id, membership FROM room_members
 WHERE room_id = $1 AND user_id = ANY($2::text[]) AND membership IN ('join', 'invite');

-- name: get_member
-- One person's membership and display name in a room.
SELECT membership, display_name FROM room_members WHERE room_id = $1 AND user_id = $2;

-- name: store_event
-- Store a room event once, by event_id; a row back = newly stored (only a new line may summon).
INSERT INTO room_events (event_id, room_id, sender, event_type, state_key, ts, content, said,
                         thread_root, reply_to, replaces)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (event_id) DO NOTHING
RETURNING event_id;

-- name: apply_edit
-- An edit replaces its original's text: same sender, newer than any edit applied before.
UPDATE room_events SET said = $3, edited_ts = $4
 WHERE event_id = $1 AND sender = $2 AND replaces IS NULL AND coalesce(edited_ts, ts) <= $4;

-- name: redact_event
-- A redaction drops the line: no text, never in a context again. Its content goes, except what the Matrix
-- redaction algorithm keeps of state (a membership, a history visibility), which still governs the room.
UPDATE room_events
   SET redacted = true, said = '',
       content = CASE
           WHEN state_key IS NULL THEN '{}'::jsonb
           WHEN event_type = 'm.room.member' THEN jsonb_strip_nulls(jsonb_build_object(
               'membership', content->'membership', 'join_authorised_via_users_server',
               content->'join_authorised_via_users_server'))
           WHEN event_type = 'm.room.history_visibility' THEN jsonb_strip_nulls(jsonb_build_object(
               'history_visibility', content->'history_visibility'))
           ELSE '{}'::jsonb
       END
 WHERE event_id = $1 AND room_id = $2;

-- name: event_sender
-- Who sent event $1 in room $2 (a redaction is applied only by its sender or a room's redactor).
SELECT sender FROM room_events WHERE event_id = $1 AND room_id = $2;

-- name: upsert_bot
-- Publish one compiled bot (the projection of its file).
INSERT INTO bots (slug, name, puppet, surfaces, compiled, published_at, withdrawn_at)
VALUES ($1, $2, $3, $4, $5, now(), NULL)
ON CONFLICT (slug) DO UPDATE
   SET name = EXCLUDED.name, puppet = EXCLUDED.puppet, surfaces = EXCLUDED.surfaces,
       compiled = EXCLUDED.compiled, published_at = now(), withdrawn_at = NULL;

-- name: withdraw_bots_except
-- Bots whose files are gone are withdrawn (kept for their runs' history).
UPDATE bots SET withdrawn_at = now() WHERE withdrawn_at IS NULL AND NOT (slug = ANY($1::text[]));

-- name: published_bots
-- Every bot that is published now.
SELECT slug, name, puppet, surfaces, compiled FROM bots WHERE withdrawn_at IS NULL ORDER BY slug;

-- name: insert_run
-- A run for a summons; one line summons at most one run (a replayed line gets no row back).
INSERT INTO agent_runs (bot, surface, room_id, thread_root, trigger_event, asked_by, subject, prompt,
                        context, script, limits, max_attempts)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
ON CONFLICT (trigger_event) DO NOTHING
RETURNING id;

-- name: get_run
-- One run.
SELECT * FROM agent_runs WHERE id = $1;

-- name: claim_run
-- Claim the oldest queued run for worker $1 with a lease of $2 seconds. Short and autocommit: the
-- worker then holds the run by id and never asks the claim again between steps.
WITH c AS (
    SELECT id FROM agent_runs
     WHERE status = 'queued'
     ORDER BY created_at, id
     LIMIT 1
       FOR UPDATE SKIP LOCKED
)
UPDATE agent_runs r
   SET status = 'running', lease_owner = $1,
       lease_expires_at = clock_timestamp() + make_interval(secs => $2),
       attempts = r.attempts + 1, started_at = coalesce(r.started_at, clock_timestamp()),
       updated_at = clock_timestamp()
  FROM c
 WHERE r.id = c.id
RETURNING r.*;

-- name: fence_run
-- Every write is fenced: extend the lease of run $1 only while worker $2 holds it, and read the
-- cancel flag (and how many lines have joined the run) in the same commit. No row = the lease was lost:
-- stop at once.
UPDATE agent_runs
   SET lease_expires_at = clock_timestamp() + make_interval(secs => $3), updated_at = clock_timestamp()
 WHERE id = $1 AND status = 'running' AND lease_owner = $2
RETURNING cancel_requested, coalesce(jsonb_array_length(context->'later'), 0) AS later;

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

-- name: cancel_room_runs
-- Cancel every unfinished run in a room (it turned encrypted, or we left): queued ones end now,
-- running ones see the flag at their next fenced write.
UPDATE agent_runs
   SET cancel_requested = true,
       status = CASE WHEN status = 'queued' THEN 'cancelled' ELSE status END,
       ending = CASE WHEN status = 'queued' THEN 'cancelled' ELSE ending END,
       finished_at = CASE WHEN status = 'queued' THEN now() ELSE finished_at END,
       updated_at = now()
 WHERE room_id = $1 AND status IN ('queued', 'running')
RETURNING id;

-- name: enqueue_outbox
-- Queue one message to Matrix under a stable transaction id (a second enqueue of the same id is a no-op).
INSERT INTO outbox (txn_id, run_id, room_id, sender, event_type, content)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (txn_id) DO NOTHING
RETURNING id;

-- name: claim_outbox
-- Take up to $1 due messages, oldest first, hiding them for $2 seconds (a sender that dies mid-send
-- leaves them to be retried under the same transaction id).
WITH due AS (
    SELECT id FROM outbox
     WHERE status = 'pending' AND next_attempt_at <= clock_timestamp()
     ORDER BY id
     LIMIT $1
       FOR UPDATE SKIP LOCKED
)
UPDATE outbox o
   SET attempts = o.attempts + 1, next_attempt_at = clock_timestamp() + make_interval(secs => $2)
  FROM due
 WHERE o.id = due.id
RETURNING o.id, o.txn_id, o.run_id, o.room_id, o.sender, o.event_type, o.content, o.attempts, o.of_txn;

-- name: outbox_sent
-- The homeserver took it: remember the event id.
UPDATE outbox SET status = 'sent', event_id = $2, sent_at = now(), last_error = NULL WHERE id = $1;

-- name: outbox_retry
-- Try again after $2 seconds.
UPDATE outbox SET next_attempt_at = clock_timestamp() + make_interval(secs => $2), last_error = $3
 WHERE id = $1;

-- name: outbox_failed
-- The homeserver refused for good (not a 429 or a 5xx): keep the row and the reason.
UPDATE outbox SET status = 'failed', last_error = $2 WHERE id = $1;

-- name: next_outbox_due
-- Seconds until the next pending message is due (NULL when none waits).
SELECT greatest(0, extract(epoch FROM min(next_attempt_at) - clock_timestamp()))::float8 AS seconds
  FROM outbox WHERE status = 'pending';

-- name: outbox_event_for_txn
-- The event id a queued message got, once sent.
SELECT event_id, status FROM outbox WHERE txn_id = $1;

-- name: migration_lock
-- One migrator at a time (released when the connection closes).
SELECT pg_advisory_lock(53301);

-- name: migrations_table
-- The ledger of applied migrations.
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    text PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: applied_migrations
-- Which migrations have been applied.
SELECT version FROM schema_migrations;

-- name: record_migration
-- Note one migration as applied.
INSERT INTO schema_migrations (version) VALUES ($1);

-- name: describe_columns
-- The schema's columns, for comparing a migrated database with sql/schema.txt.
SELECT format('column %s.%s %s%s%s', c.table_name, c.column_name, c.data_type,
              CASE WHEN c.is_nullable = 'NO' THEN ' not null' ELSE '' END,
              coalesce(' default ' || c.column_default, '')) AS line
  FROM information_schema.columns c
 WHERE c.table_schema = 'public'
 ORDER BY c.table_name, c.ordinal_position;

-- name: describe_indexes
-- The schema's indexes.
SELECT format('index %s', indexdef) AS line FROM pg_indexes WHERE schemaname = 'public'
 ORDER BY tablename, indexname;

-- name: describe_constraints
-- The schema's constraints.
SELECT format('constraint %s.%s %s', conrelid::regclass, conname, pg_get_constraintdef(oid)) AS line
  FROM pg_constraint WHERE connamespace = 'public'::regnamespace
 ORDER BY conrelid::regclass::text, conname;

-- name: describe_triggers
-- The schema's triggers.
SELECT format('trigger %s', pg_get_triggerdef(oid)) AS line FROM pg_trigger
 WHERE NOT tgisinternal ORDER BY tgrelid::regclass::text, tgname;

-- name: describe_functions
-- The schema's functions.
SELECT format('function %s(%s) returns %s', p.proname, pg_get_function_arguments(p.oid),
              pg_get_function_result(p.oid)) AS line
  FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace ORDER BY p.proname;

-- name: request_cancel
-- Ask the unfinished runs in a room's thread (or main timeline, thread NULL) to stop; only the asker's
-- when $3 is given (a moderator passes NULL). Workers see the flag at their next fenced write.
UPDATE agent_runs SET cancel_requested = true, updated_at = now()
 WHERE room_id = $1 AND thread_root IS NOT DISTINCT FROM $2 AND ($3::text IS NULL OR asked_by = $3)
   AND status IN ('queued', 'running') AND NOT cancel_requested
RETURNING id;

-- name: request_cancel_by_event
-- Ask the unfinished run in room $3 summoned by line $1 (or whose progress line is $1) to stop; only when
-- asked by $2, unless $2 is NULL (a moderator of that room).
UPDATE agent_runs r SET cancel_requested = true, updated_at = now()
 WHERE (r.trigger_event = $1
        OR r.id = (SELECT o.run_id FROM outbox o WHERE o.event_id = $1 AND o.run_id IS NOT NULL LIMIT 1))
   AND r.room_id = $3
   AND ($2::text IS NULL OR r.asked_by = $2)
   AND r.status IN ('queued', 'running') AND NOT r.cancel_requested
RETURNING r.id;

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
-- Hold a run's own spend limit against the person's ceilings until the run ends.
INSERT INTO spend_ledger (who, bot, run_id, usd) VALUES ($1, $2, $3, $4);

-- name: settle_spend
-- A run ended: its reservation becomes what it really cost.
UPDATE spend_ledger
   SET usd = (SELECT coalesce(sum(cost_usd), 0) FROM agent_steps WHERE run_id = $1), reserved = false
 WHERE run_id = $1;

-- name: publish_lock
-- One publish at a time (two services watching the same content must not interleave their rows).
SELECT pg_advisory_xact_lock(hashtext('summon.publish'));

-- name: upsert_skill
-- Publish one compiled skill.
INSERT INTO skills (name, description, compiled, published_at, withdrawn_at)
VALUES ($1, $2, $3, now(), NULL)
ON CONFLICT (name) DO UPDATE
   SET description = EXCLUDED.description, compiled = EXCLUDED.compiled, published_at = now(), withdrawn_at = NULL;

-- name: withdraw_skills_except
-- Skills whose files are gone are withdrawn.
UPDATE skills SET withdrawn_at = now() WHERE withdrawn_at IS NULL AND NOT (name = ANY($1::text[]));

-- name: upsert_tool
-- Publish one compiled tool.
INSERT INTO tools (name, kind, compiled, published_at, withdrawn_at)
VALUES ($1, $2, $3, now(), NULL)
ON CONFLICT (name) DO UPDATE
   SET kind = EXCLUDED.kind, compiled = EXCLUDED.compiled, published_at = now(), withdrawn_at = NULL;

-- name: withdraw_tools_except
-- Tools whose files are gone are withdrawn.
UPDATE tools SET withdrawn_at = now() WHERE withdrawn_at IS NULL AND NOT (name = ANY($1::text[]));

-- name: upsert_command
-- Publish one compiled command: its client-visible shape apart from its prompt.
INSERT INTO commands (name, bot, tool, surfaces, shape, prompt, compiled, published_at, withdrawn_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, now(), NULL)
ON CONFLICT (name) DO UPDATE
   SET bot = EXCLUDED.bot, tool = EXCLUDED.tool, surfaces = EXCLUDED.surfaces, shape = EXCLUDED.shape,
       prompt = EXCLUDED.prompt, compiled = EXCLUDED.compiled, published_at = now(), withdrawn_at = NULL;

-- name: withdraw_commands_except
-- Commands whose files are gone are withdrawn.
UPDATE commands SET withdrawn_at = now() WHERE withdrawn_at IS NULL AND NOT (name = ANY($1::text[]));

-- name: clear_bot_links
-- Forget which skills and tools the bots had; the publish writes them again.
WITH s AS (DELETE FROM bot_skills) DELETE FROM bot_tools;

-- name: insert_bot_skills
-- Which skills each bot has: parallel arrays of bot slugs and skill names.
INSERT INTO bot_skills (bot, skill) SELECT * FROM unnest($1::text[], $2::text[]);

-- name: insert_bot_tools
-- Which tools each bot has of its own: parallel arrays of bot slugs and tool names.
INSERT INTO bot_tools (bot, tool) SELECT * FROM unnest($1::text[], $2::text[]);

-- name: published_skills
-- Every skill that is published now.
SELECT name, description, compiled FROM skills WHERE withdrawn_at IS NULL ORDER BY name;

-- name: published_tools
-- Every tool that is published now.
SELECT name, kind, compiled FROM tools WHERE withdrawn_at IS NULL ORDER BY name;

-- name: published_commands
-- Every command that is published now, with what a client may see of it.
SELECT name, bot, tool, surfaces, shape, prompt FROM commands WHERE withdrawn_at IS NULL ORDER BY name;

-- name: bot_skill_names
-- The skills bot $1 has, by name.
SELECT skill FROM bot_skills WHERE bot = $1 ORDER BY skill;

-- name: bot_tool_names
-- The tools bot $1 has of its own, by name.
SELECT tool FROM bot_tools WHERE bot = $1 ORDER BY tool;

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

-- name: enqueue_progress
-- Queue a run's progress line (or an edit of it, $7 = the line's txn id) only while the run is still
-- running; the run's row is locked so a finish that races it either sees this row or makes it a no-op.
INSERT INTO outbox (txn_id, run_id, room_id, sender, event_type, content, of_txn)
SELECT $1, r.id, $3, $4, 'm.room.message', $5, $6
  FROM agent_runs r WHERE r.id = $2 AND r.status = 'running'
   FOR UPDATE
ON CONFLICT (txn_id) DO NOTHING
RETURNING id;

-- name: enqueue_outbox_of
-- Queue a message that edits or redacts the earlier message $7 (by its txn id).
INSERT INTO outbox (txn_id, run_id, room_id, sender, event_type, content, of_txn)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (txn_id) DO NOTHING
RETURNING id;


-- name: clock_for_update
-- Lock one schedule's clock (bot $1, trigger $2) for this tick; no row = absent, or another tick holds it.
SELECT last_fired_at, started_at FROM bot_clock WHERE bot = $1 AND trigger = $2 FOR UPDATE SKIP LOCKED;

-- name: start_clock
-- A schedule seen for the first time starts its clock at $3 (it never fires for the past); a row back = started.
INSERT INTO bot_clock (bot, trigger, last_fired_at, started_at) VALUES ($1, $2, $3, $3)
ON CONFLICT (bot, trigger) DO NOTHING
RETURNING started_at;

-- name: advance_clock
-- The schedule fired occurrence $3, whatever becomes of its run (refused, cancelled and failed count).
UPDATE bot_clock SET last_fired_at = $3 WHERE bot = $1 AND trigger = $2;

-- name: encrypted_rooms
-- Every room known to be encrypted: a schedule may not speak in one (refused at publish).
SELECT room_id FROM rooms WHERE encrypted ORDER BY room_id;

-- name: conversation_busy
-- Whether bot $1 already has a queued or running run in conversation $2 (one at a time, SPEC §6).
SELECT EXISTS (SELECT 1 FROM agent_runs
                WHERE bot = $1 AND conversation = $2 AND status IN ('queued', 'running')) AS busy;

-- name: mark_run_conversation
-- Run $1 belongs to conversation $2; a second unfinished run of the same bot there violates the unique index.
UPDATE agent_runs SET conversation = $2 WHERE id = $1;

-- name: record_hook_delivery
-- Remember a site event's delivery ($1) and signature ($2); no row back = seen before (a replay: wake nothing).
INSERT INTO hook_deliveries (delivery, signature, key_id, event) VALUES ($1, $2, $3, $4)
ON CONFLICT DO NOTHING
RETURNING delivery;

-- name: inspect_runs
-- The latest runs, newest first, optionally only run $1, room $2 or bot $3, at most $4.
SELECT id, bot, room_id, thread_root, asked_by, status, ending, reason, attempts, created_at, started_at,
       finished_at, left(coalesce(answer, ''), 120) AS answer
  FROM agent_runs
 WHERE ($1::bigint IS NULL OR id = $1) AND ($2::text IS NULL OR room_id = $2) AND ($3::text IS NULL OR bot = $3)
 ORDER BY id DESC
 LIMIT $4;

-- name: inspect_steps
-- A run's steps with what each cost and how long after the previous one it was recorded.
SELECT seq, kind, provider, model, tokens_in, tokens_out, cost_usd::float8 AS cost_usd, worker, payload,
       extract(epoch FROM created_at - coalesce(lag(created_at) OVER (ORDER BY seq),
                                                (SELECT started_at FROM agent_runs WHERE id = $1)))::float8 AS seconds
  FROM agent_steps WHERE run_id = $1 ORDER BY seq;
