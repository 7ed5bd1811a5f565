-- Schedules and their clocks: a bot's own (bot_clock) and those a room's admins set (engine/store/schedules.py).

-- name: database_now
-- The database's time: the one clock every stored time comes from, and what a tick reads schedules against.
SELECT clock_timestamp();

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
