-- The desk's staff room in Matrix: what the desk posted there, by outbox transaction id and, once sent, by
-- event id (engine/store/desk_staff.py).

-- name: desk_staff_remember
-- Post $1 (an outbox txn id) mirrors conversation $2 (message $3) as a $4; a second time is nothing new.
INSERT INTO desk_staff_posts (txn_id, conversation_id, message_id, kind) VALUES ($1, $2, $3, $4)
ON CONFLICT DO NOTHING
RETURNING txn_id;

-- name: desk_staff_thread
-- The txn id of conversation $1's thread in the staff room, if it has one.
SELECT txn_id FROM desk_staff_posts WHERE conversation_id = $1 AND kind = 'thread';

-- name: desk_staff_post_by_event
-- What the desk's post $1 (an event id in the staff room) mirrors.
SELECT txn_id, event_id, conversation_id, message_id, kind FROM desk_staff_posts WHERE event_id = $1;

-- name: desk_staff_post_of_message
-- The desk's post mirroring message $1 (a draft's, to mark it sent or discarded).
SELECT txn_id, event_id, conversation_id, message_id, kind FROM desk_staff_posts
 WHERE message_id = $1 ORDER BY created_at LIMIT 1;
