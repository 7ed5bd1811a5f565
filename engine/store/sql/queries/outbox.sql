-- Every message to a surface, queued under a stable transaction id until it is sent (engine/store/outbox.py).

-- name: enqueue_outbox
-- Queue one message to Matrix under a stable transaction id (a second enqueue of the same id is a no-op).
INSERT INTO outbox (txn_id, run_id, room_id, sender, event_type, content)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (txn_id) DO NOTHING
RETURNING id;

-- name: enqueue_outbox_of
-- Queue a message that edits or redacts the earlier message $7 (by its txn id).
INSERT INTO outbox (txn_id, run_id, room_id, sender, event_type, content, of_txn)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (txn_id) DO NOTHING
RETURNING id;

-- name: enqueue_progress
-- Queue a run's progress line (or an edit of it, $7 = the line's txn id) only while the run is still
-- waiting or running; the run's row is locked so a finish that races it either sees this row or makes it a
-- no-op.
INSERT INTO outbox (txn_id, run_id, room_id, sender, event_type, content, of_txn)
SELECT $1, r.id, $3, $4, 'm.room.message', $5, $6
  FROM agent_runs r WHERE r.id = $2 AND r.status IN ('queued', 'running')
   FOR UPDATE
ON CONFLICT (txn_id) DO NOTHING
RETURNING id;

-- name: claim_outbox
-- Take up to $1 due messages, oldest first, each run's in order, hiding them for $2 seconds.
-- A sender that dies mid-send leaves them to be retried under the same transaction id. A run's messages keep
-- their order (and so do a room's messages that belong to no run): one whose run has an earlier message in
-- flight or backing off waits for it.
-- from template: claim_due(table=outbox, held_back=outbox_run_order)

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
-- from template: next_due(table=outbox)

-- name: outbox_event_for_txn
-- The event id a queued message got, once sent.
SELECT event_id, status FROM outbox WHERE txn_id = $1;

-- name: claim_outbox_these
-- A freshly committed answer handed to the sender at once: take the messages queued under the transaction ids
-- $1 that are due and come first among their run's pending messages (the order the loop keeps: one with an
-- earlier message of its run unsent is left to the loop, with it), hiding them for $2 seconds like any claim.
-- Other runs' messages in the room do not hold it back: twenty people answered at once in one busy room are
-- each sent at once.
WITH due AS (
    SELECT o.id FROM outbox o
     WHERE o.txn_id = ANY($1::text[]) AND o.status = 'pending' AND o.next_attempt_at <= clock_timestamp()
       AND o.of_txn IS NULL
       AND NOT EXISTS (SELECT 1 FROM outbox e
                        WHERE e.status = 'pending' AND e.room_id = o.room_id AND e.run_id IS NOT DISTINCT FROM o.run_id
                          AND e.id < o.id)
     ORDER BY o.id
       FOR UPDATE SKIP LOCKED
)
UPDATE outbox o
   SET attempts = o.attempts + 1, next_attempt_at = clock_timestamp() + make_interval(secs => $2)
  FROM due
 WHERE o.id = due.id
RETURNING o.id, o.txn_id, o.run_id, o.room_id, o.sender, o.event_type, o.content, o.attempts, o.of_txn;

-- name: outbox_undelivered_step
-- Run $1's answer (or ending) could not be delivered, for reason $2: recorded as the run's next step, once (the
-- delivery writes it, after the run ended: outside any lease). Returns the step's number, or nothing when the run
-- already says so.
INSERT INTO agent_steps (run_id, seq, kind, payload, worker)
SELECT $1, coalesce(max(seq), 0) + 1, 'undelivered',
       jsonb_build_object('kind', 'undelivered', 'reason', $2::text), 'delivery'
  FROM agent_steps WHERE run_id = $1
HAVING NOT coalesce(bool_or(kind = 'undelivered'), false)
RETURNING seq;
