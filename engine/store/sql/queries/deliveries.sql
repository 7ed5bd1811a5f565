-- The delivery queues' one shape (engine/run/delivery.py runs them): the Matrix outbox (outbox.sql), the desk's
-- webhooks (desk_webhooks.sql), the room actions (room_actions.sql). Each table has id, status ('pending' until
-- settled), attempts, next_attempt_at; each claims and says when the next is due from these templates, and
-- settles in its own family file (done, retry after a wait, failed for good: each records what it has).

-- template: claim_due
-- Take up to $1 due rows of a queue, oldest first, hiding them for $2 seconds, each attempt counted.
-- A sender that dies mid-send leaves its rows to be taken again once the hide runs out; held_back is what else
-- holds a due row back (nothing, or a fragment below).
WITH due AS (
    SELECT q.id FROM {table} q
     WHERE q.status = 'pending' AND q.next_attempt_at <= clock_timestamp()
{held_back}
     ORDER BY q.id
     LIMIT $1
       FOR UPDATE SKIP LOCKED
)
UPDATE {table} q
   SET attempts = q.attempts + 1, next_attempt_at = clock_timestamp() + make_interval(secs => $2)
  FROM due
 WHERE q.id = due.id
RETURNING q.*;

-- template: outbox_run_order
-- A run's messages keep their order (and so do a room's messages that belong to no run): one whose run has an
-- earlier message backing off waits for it.
       AND NOT EXISTS (SELECT 1 FROM outbox e
                        WHERE e.status = 'pending' AND e.room_id = q.room_id AND e.run_id IS NOT DISTINCT FROM q.run_id
                          AND e.id < q.id AND e.next_attempt_at > clock_timestamp());

-- template: next_due
-- Seconds until a queue's next pending row is due (NULL when none waits).
-- greatest() skips a NULL, so the empty case is spelt out rather than read as "due now".
SELECT CASE WHEN min(next_attempt_at) IS NULL THEN NULL
            ELSE greatest(0, extract(epoch FROM min(next_attempt_at) - clock_timestamp())) END::float8 AS seconds
  FROM {table} WHERE status = 'pending';
