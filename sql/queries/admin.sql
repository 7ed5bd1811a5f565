-- Room administration (`!bots …`, appservice/matrix/admin.py) and what it sets: rooms.settings, room schedules.

-- name: room_settings_now
-- A room's settings and whether it is encrypted, with the database's now (quiet hours are read against it).
SELECT settings, encrypted, now() AS now FROM rooms WHERE room_id = $1;

-- name: set_room_setting
-- Set one of a room's settings (key $2) to $3; returns the settings as they now are.
UPDATE rooms SET settings = settings || jsonb_build_object($2::text, $3::jsonb) WHERE room_id = $1
RETURNING settings;

-- name: clear_room_setting
-- Drop one of a room's settings (key $2) back to its default; returns the settings as they now are.
UPDATE rooms SET settings = settings - $2::text WHERE room_id = $1
RETURNING settings;

-- name: insert_room_schedule
-- A room schedule made by line $6, with its clock started at now (it never fires for the past); no row back
-- = that line made one already (a replay).
WITH made AS (
    INSERT INTO room_schedules (room_id, bot, schedule, ask, made_by, made_in)
    VALUES ($1, $2, $3, $4, $5, $6)
    ON CONFLICT (made_in) DO NOTHING
    RETURNING id, bot
), clock AS (
    INSERT INTO bot_clock (bot, trigger, last_fired_at, started_at)
    SELECT bot, 'room:' || id, now(), now() FROM made
    ON CONFLICT (bot, trigger) DO NOTHING
)
SELECT id, now() AS now FROM made;

-- name: count_room_schedules
-- How many schedules room $1 keeps.
SELECT count(*) FROM room_schedules WHERE room_id = $1;

-- name: room_schedules_here
-- The schedules set in room $1, oldest first.
SELECT id, bot, schedule, ask, made_by, created_at FROM room_schedules WHERE room_id = $1 ORDER BY id;

-- name: delete_room_schedule
-- Unschedule room schedule $1 of room $2, and its clock with it; no row back = no such schedule here.
WITH gone AS (
    DELETE FROM room_schedules WHERE id = $1 AND room_id = $2 RETURNING id, bot
), clock AS (
    DELETE FROM bot_clock c USING gone WHERE c.bot = gone.bot AND c.trigger = 'room:' || gone.id
)
SELECT id, bot FROM gone;

-- name: all_room_schedules
-- Every room schedule for the tick, with the key its clock is kept under in bot_clock.
SELECT id, room_id, bot, schedule, ask, made_by, 'room:' || id AS trigger FROM room_schedules ORDER BY id;

-- name: room_runs
-- The latest $2 runs in room $1, newest first, with what each cost.
SELECT r.id, r.bot, r.status, r.ending, r.asked_by, r.created_at,
       coalesce((SELECT sum(s.cost_usd) FROM agent_steps s WHERE s.run_id = r.id), 0)::float8 AS cost_usd
  FROM agent_runs r
 WHERE r.room_id = $1
 ORDER BY r.id DESC
 LIMIT $2;

-- name: room_spend
-- What the runs in room $1 cost, by bot: today and this month (UTC), from their steps.
SELECT r.bot,
       coalesce(sum(s.cost_usd) FILTER (WHERE s.created_at >= date_trunc('day', now(), 'UTC')), 0)::float8 AS today,
       coalesce(sum(s.cost_usd), 0)::float8 AS month
  FROM agent_steps s JOIN agent_runs r ON r.id = s.run_id
 WHERE r.room_id = $1 AND s.created_at >= date_trunc('month', now(), 'UTC')
 GROUP BY r.bot
 ORDER BY r.bot;

-- name: cancel_room_run
-- Ask run $1 to stop, only when it is in room $2 and unfinished; no row back = no such run here.
UPDATE agent_runs SET cancel_requested = true, updated_at = now()
 WHERE id = $1 AND room_id = $2 AND status IN ('queued', 'running') AND NOT cancel_requested
RETURNING id;

-- name: unfinished_room_runs
-- The runs in room $1 that are still queued or running (what `cancel` accepts), oldest first.
SELECT id FROM agent_runs WHERE room_id = $1 AND status IN ('queued', 'running') ORDER BY id;
