-- Membership work for the homeserver, remembered until it is done (engine/store/room_actions.py): one of the
-- delivery queues (engine/run/delivery.py), claimed and settled as the others are.

-- name: remember_room_action
-- Remember action $2 in room $1; the caller carries it out at once (its first attempt, counted when it is
-- settled: a crash before it costs none), and it is due for a retry only after $3 seconds (the time that first
-- attempt is given).
INSERT INTO room_actions (room_id, action, next_attempt_at)
VALUES ($1, $2, clock_timestamp() + make_interval(secs => $3))
RETURNING id;

-- name: claim_room_actions
-- Take up to $1 due actions, oldest first, hiding them for $2 seconds.
-- Another process sees them due again only after that.
-- from template: claim_due(table=room_actions, held_back=)

-- name: room_action_done
-- Action $1 was carried out, on attempt $2.
UPDATE room_actions SET status = 'done', done_at = now(), attempts = $2, last_error = NULL
 WHERE id = $1 AND status = 'pending';

-- name: room_action_retry
-- Action $1 failed with $3 on attempt $4: try again after $2 seconds.
UPDATE room_actions SET attempts = $4, last_error = $3, next_attempt_at = clock_timestamp() + make_interval(secs => $2)
 WHERE id = $1 AND status = 'pending';

-- name: room_action_failed
-- Action $1 failed for good with $2 on attempt $3 (the homeserver said it never will, or the attempts ran out):
-- kept, with the reason.
UPDATE room_actions SET status = 'failed', attempts = $3, last_error = $2
 WHERE id = $1 AND status = 'pending';

-- name: next_room_action_due
-- Seconds until the next pending action is due (NULL when none waits).
-- from template: next_due(table=room_actions)

-- name: prune_room_actions
-- Forget actions finished more than $1 seconds ago.
DELETE FROM room_actions WHERE status <> 'pending' AND coalesce(done_at, created_at) < now() - make_interval(secs => $1);
