-- The door: grants minted, voice sessions and their rooms, and the turns asked through it (engine/store/door.py).

-- name: record_door_grant
-- Remember a grant minted: its id, bot, person, room (or none), signing key id, who minted it and its life.
INSERT INTO door_grants (id, bot, person, room_id, key_id, minted_by, issued_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8);

-- name: door_grant
-- One grant as it was minted.
SELECT id, bot, person, room_id, key_id, minted_by, issued_at, expires_at FROM door_grants WHERE id = $1;

-- name: ensure_door_session
-- The session grant $1 opens, made on its first use; $5: its front end said it is one-to-one.
INSERT INTO door_sessions (grant_id, bot, person, expires_at, one_to_one) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (grant_id) DO NOTHING;

-- name: door_person_alone
-- Whether person $1's voice sessions bound to no room are theirs alone: at least one is live, and every live one's
-- front end said it is one-to-one (a personal tool answers there only then).
SELECT count(*) > 0 AND coalesce(bool_and(one_to_one), false)
  FROM door_sessions WHERE person = $1 AND room_id IS NULL AND expires_at > now();

-- name: lock_door_session
-- Session $1, taken for the rest of the transaction (its claims and turns queue up behind each other).
SELECT grant_id, bot, person, room_id, room_name, pending_room, claim FROM door_sessions WHERE grant_id = $1
   FOR UPDATE;

-- name: claim_door_room
-- A newer claim on session $1: room $2 (named $3) is pending, the claim counted; a room other than the one bound
-- releases the binding before it is checked. Returns the claim's number.
UPDATE door_sessions
   SET claim = claim + 1, pending_room = $2,
       room_name = CASE WHEN room_id IS NOT DISTINCT FROM $2 THEN room_name END,
       room_id = CASE WHEN room_id IS NOT DISTINCT FROM $2 THEN room_id END,
       updated_at = now()
 WHERE grant_id = $1
RETURNING claim;

-- name: bind_door_room
-- Claim $2 of session $1 was verified: room $3 (named $4) is its origin now — unless a newer claim superseded it
-- (no row back).
UPDATE door_sessions SET room_id = $3, room_name = $4, pending_room = NULL, updated_at = now()
 WHERE grant_id = $1 AND claim = $2
RETURNING grant_id;

-- name: refuse_door_room
-- Claim $2 of session $1 was refused (or never answered): nothing pending, nothing bound — the person's DM —
-- unless a newer claim superseded it (no row back).
UPDATE door_sessions SET room_id = NULL, room_name = NULL, pending_room = NULL, updated_at = now()
 WHERE grant_id = $1 AND claim = $2
RETURNING grant_id;

-- name: door_session
-- Session $1 as it stands.
SELECT grant_id, bot, person, room_id, room_name, pending_room, claim FROM door_sessions WHERE grant_id = $1;

-- name: door_binding_of_run
-- The session a door turn (run $1) belongs to, as it stands now: which room it is bound to (or none).
SELECT s.grant_id, s.bot, s.person, s.room_id, s.room_name, s.pending_room, s.claim
  FROM door_turns t JOIN door_sessions s ON s.grant_id = t.grant_id
 WHERE t.run_id = $1;

-- name: insert_door_turn
-- Run $1 is a turn of session $2, asked from room $3 (its origin; NULL: the person's DM).
INSERT INTO door_turns (run_id, grant_id, origin_room) VALUES ($1, $2, $3);

-- name: door_session_turns
-- The last $2 turns of session $1 that ended where it is now ($3: the room, NULL none), oldest first: what was
-- asked and what came of it (the context a new turn is given — never what a client says was said; a turn asked in
-- another room stays there).
SELECT * FROM (
    SELECT r.id, r.prompt, r.answer, r.ending
      FROM door_turns t JOIN agent_runs r ON r.id = t.run_id
     WHERE t.grant_id = $1 AND r.status IN ('done', 'failed', 'cancelled')
       AND t.origin_room IS NOT DISTINCT FROM $3
     ORDER BY t.run_id DESC
     LIMIT $2
) last ORDER BY id;

-- name: finish_door_turn
-- Run $1 is handed to the door (in the run's finishing commit): marked finished; whether a response still waits
-- for it, where it was asked from and its session. Taken under the row's lock, so a response giving up on it
-- at the same moment either sees it finished or is seen giving up. No row: not a door turn.
UPDATE door_turns SET finished = true, finished_at = now()
 WHERE run_id = $1
RETURNING waiting, origin_room, grant_id;

-- name: outlive_door_turn
-- The response for run $1 stops waiting: its work outlives the turn and is posted to Matrix when done. No row
-- back: it had already finished (the response gives the answer after all).
UPDATE door_turns SET waiting = false WHERE run_id = $1 AND NOT finished
RETURNING run_id;

-- name: door_turn_posted
-- Where run $1's outlived answer was posted.
UPDATE door_turns SET delivered_to = $2 WHERE run_id = $1;

-- name: door_turn
-- One turn as it stands.
SELECT run_id, grant_id, origin_room, waiting, finished, delivered_to FROM door_turns WHERE run_id = $1;

-- name: door_runs_ended
-- Of runs $1, those that have ended, with their answer or ending.
SELECT id, status, answer, ending, reason FROM agent_runs
 WHERE id = ANY($1::bigint[]) AND status IN ('done', 'failed', 'cancelled');

-- name: notify_door
-- Wake the door's listeners (at commit): a turn it may be waiting for has ended.
SELECT pg_notify('summon_door', $1::text);

-- name: cancel_door_run
-- Ask door turn $1 of session $2 to stop (its client went away, or spoke over it); no row back = not running.
UPDATE agent_runs r SET cancel_requested = true, updated_at = now()
  FROM door_turns t
 WHERE r.id = $1 AND t.run_id = r.id AND t.grant_id = $2
   AND r.status IN ('queued', 'running') AND NOT r.cancel_requested
RETURNING r.id;

-- name: door_shared_rooms
-- The rooms person $1 and bot puppet $2 are both joined to, that we are still in and can read, fewest readers
-- first (where a DM with the bot is found).
SELECT p.room_id
  FROM room_members p
  JOIN room_members b ON b.room_id = p.room_id AND b.user_id = $2 AND b.membership = 'join'
  JOIN rooms r ON r.room_id = p.room_id
 WHERE p.user_id = $1 AND p.membership = 'join' AND NOT r.encrypted AND r.left_at IS NULL
 ORDER BY (SELECT count(*) FROM room_members x WHERE x.room_id = p.room_id AND x.membership IN ('join', 'invite')),
          p.room_id
 LIMIT 20;

-- name: prune_door_sessions
-- Forget sessions (and their turns' door rows; the runs stay) and grants that expired more than $1 seconds ago.
WITH sessions AS (
    DELETE FROM door_sessions WHERE expires_at < now() - make_interval(secs => $1) RETURNING 1
), grants AS (
    DELETE FROM door_grants WHERE expires_at < now() - make_interval(secs => $1) RETURNING 1
)
SELECT (SELECT count(*) FROM sessions) + (SELECT count(*) FROM grants);

-- name: door_run_usage
-- What run $1's model calls used, in tokens (the usage a completion reports).
SELECT coalesce(sum(tokens_in), 0)::bigint AS tokens_in, coalesce(sum(tokens_out), 0)::bigint AS tokens_out
  FROM agent_steps WHERE run_id = $1;

-- name: hand_door_call
-- Run $1's model called client tool $3 (the model's call id $2, arguments $4): kept until its client
-- answers (once: a retried run hands the same call over again), and told to the response following the run.
WITH kept AS (
    INSERT INTO door_client_calls (run_id, call_id, name, arguments) VALUES ($1, $2, $3, $4)
    ON CONFLICT (run_id, call_id) DO NOTHING
    RETURNING run_id
)
SELECT pg_notify('summon_door_calls', json_build_object('run', $1::bigint, 'id', $2::text, 'name', $3::text,
                                                        'arguments', $4::jsonb::text)::text);

-- name: door_call_answer
-- What the client said came of call $2 of run $1; no row while it has not answered.
SELECT result, is_error FROM door_client_calls WHERE run_id = $1 AND call_id = $2 AND answered_at IS NOT NULL;

-- name: answer_door_call
-- The client's result $3 for call $2, brought by a request of session $1: kept, once, for the run of that session
-- that waits for it; the run, or no row (no call of this session waits for that id).
UPDATE door_client_calls c SET result = $3, answered_at = now()
  FROM door_turns t
 WHERE c.call_id = $2 AND c.answered_at IS NULL AND t.run_id = c.run_id AND t.grant_id = $1
RETURNING c.run_id;
