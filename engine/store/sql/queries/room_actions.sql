-- Membership work for the homeserver, remembered until it is done (engine/store/room_actions.py).

-- name: remember_room_action
-- Remember action $2 in room $1; the caller carries it out at once, and it is due for a retry only after
-- $3 seconds (the time that first attempt is given).
INSERT INTO room_actions (room_id, action, next_attempt_at)
VALUES ($1, $2, clock_timestamp() + make_interval(secs => $3))
RETURNING id;

-- name: claim_room_action
-- Take the next due action for $1 seconds (another process sees it due again only after that).
UPDATE room_actions a SET next_attempt_at = clock_timestamp() + make_interval(secs => $1)
 WHERE a.id = (SELECT id FROM room_actions
                WHERE status = 'pending' AND next_attempt_at <= clock_timestamp()
                ORDER BY next_attempt_at, id LIMIT 1
                  FOR UPDATE SKIP LOCKED)
RETURNING a.id, a.action;

-- name: room_action_done
-- Action $1 was carried out.
UPDATE room_actions SET status = 'done', done_at = now(), attempts = attempts + 1, last_error = NULL
 WHERE id = $1 AND status = 'pending';

-- name: room_action_failed
-- Action $1 failed with $2: tried again after $3 seconds × 4^(attempts so far), or given up for good when
-- $4 (the homeserver said it never will) or after $5 attempts. Returns the row's status after it.
UPDATE room_actions
   SET attempts = attempts + 1, last_error = $2,
       status = CASE WHEN $4 OR attempts + 1 >= $5 THEN 'failed' ELSE status END,
       next_attempt_at = clock_timestamp() + make_interval(secs => $3 * power(4, attempts))
 WHERE id = $1 AND status = 'pending'
RETURNING status;

-- name: prune_room_actions
-- Forget actions finished more than $1 seconds ago.
DELETE FROM room_actions WHERE status <> 'pending' AND coalesce(done_at, created_at) < now() - make_interval(secs => $1);
