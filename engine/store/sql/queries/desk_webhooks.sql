-- The desk's outgoing webhooks: deliveries queued, claimed, posted, retried and recorded
-- (engine/store/desk_webhooks.py).

-- name: desk_enqueue_delivery
-- Queue event $4 of conversation $5 (message $6) for inbox $1's webhook at $2, with its exact body $3.
INSERT INTO desk_deliveries (inbox_id, url, body, event, conversation_id, message_id)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING id;

-- name: desk_claim_deliveries
-- Take up to $1 due deliveries, oldest first, hiding them for $2 seconds.
-- A sender that dies mid-post leaves them to be tried again, under the same delivery id.
-- from template: claim_due(table=desk_deliveries, held_back=)

-- name: desk_delivered
-- The receiver took delivery $1 (its status $2).
UPDATE desk_deliveries
   SET status = 'delivered', last_status = $2, last_error = NULL, delivered_at = clock_timestamp()
 WHERE id = $1;

-- name: desk_delivery_retry
-- Delivery $1 failed (status $2, why $3): try again in $4 seconds.
UPDATE desk_deliveries
   SET last_status = $2, last_error = $3, next_attempt_at = clock_timestamp() + make_interval(secs => $4)
 WHERE id = $1;

-- name: desk_delivery_failed
-- Delivery $1 failed for good (status $2, why $3): kept, with the reason.
UPDATE desk_deliveries SET status = 'failed', last_status = $2, last_error = $3 WHERE id = $1;

-- name: desk_next_delivery_due
-- Seconds until the next pending delivery is due (NULL when none waits).
-- from template: next_due(table=desk_deliveries)
