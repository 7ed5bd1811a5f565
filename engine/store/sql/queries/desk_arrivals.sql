-- How many contacts and conversations are being started, and from where, so nobody mints them without
-- bound; and the guests nobody has heard from in a long while, pruned (engine/store/desk.py). "From where"
-- is a keyed hash of the client's address, kept only as long as the hourly limits read it.

-- name: desk_lock_inbox
-- Take inbox $1's row for the rest of the transaction: contacts made in it are counted one at a time.
SELECT id FROM desk_inboxes WHERE id = $1 FOR UPDATE;

-- name: desk_lock_origin
-- Take the lock of origin $1 (a hashed address) for the rest of the transaction: what it starts is counted
-- one at a time, in every process.
SELECT pg_advisory_xact_lock(hashtextextended('desk-origin:' || $1, 0));

-- name: desk_contacts_made_lately
-- How many contacts inbox $1 made in the last $2 seconds, and how many of every inbox origin $3 made.
SELECT (SELECT count(*) FROM desk_contacts
         WHERE inbox_id = $1 AND created_at > now() - make_interval(secs => $2)) AS in_inbox,
       (SELECT count(*) FROM desk_contacts
         WHERE made_from = $3 AND created_at > now() - make_interval(secs => $2)) AS from_origin;

-- name: desk_conversations_made_lately
-- How many conversations origin $1 started in the last $2 seconds.
SELECT count(*) FROM desk_conversations WHERE made_from = $1 AND created_at > now() - make_interval(secs => $2);

-- name: desk_conversations_held
-- How many conversations contact $1 has that are unresolved, or were started in the last $2 seconds.
SELECT count(*) FROM desk_conversations
 WHERE contact_id = $1 AND (status <> 'resolved' OR created_at > now() - make_interval(secs => $2));

-- name: desk_contact_made_from
-- Contact $1 was made from origin $2.
UPDATE desk_contacts SET made_from = $2 WHERE id = $1;

-- name: desk_conversation_made_from
-- Conversation $1 was started from origin $2.
UPDATE desk_conversations SET made_from = $2 WHERE id = $1;

-- name: desk_forget_origins
-- Where contacts and conversations older than $1 seconds were made from is forgotten (the limits read only
-- the last hour): how many rows forgot it.
WITH contacts AS (
    UPDATE desk_contacts SET made_from = NULL
     WHERE made_from IS NOT NULL AND created_at < now() - make_interval(secs => $1) RETURNING 1
), conversations AS (
    UPDATE desk_conversations SET made_from = NULL
     WHERE made_from IS NOT NULL AND created_at < now() - make_interval(secs => $1) RETURNING 1
)
SELECT (SELECT count(*) FROM contacts) + (SELECT count(*) FROM conversations) AS forgot;

-- name: desk_prune_guests
-- Delete (at most $2) guests — contacts with no account — made more than $1 days ago, with no message in the
-- last $1 days, no conversation still open or pending and no ticket, with their conversations and everything
-- in them: how many contacts and conversations went. (Foreign keys are checked at the statement's end, so the
-- rows go together.)
WITH gone AS (
    SELECT k.id FROM desk_contacts k
     WHERE k.user_id IS NULL AND k.created_at < now() - make_interval(days => $1)
       AND NOT EXISTS (SELECT 1 FROM desk_conversations c WHERE c.contact_id = k.id AND c.status <> 'resolved')
       AND NOT EXISTS (SELECT 1 FROM desk_conversations c JOIN desk_messages m ON m.conversation_id = c.id
                        WHERE c.contact_id = k.id AND m.created_at > now() - make_interval(days => $1))
       AND NOT EXISTS (SELECT 1 FROM tickets t WHERE t.contact_id = k.id)
     ORDER BY k.id
     LIMIT $2
       FOR UPDATE OF k SKIP LOCKED
), conversations AS (
    SELECT c.id FROM desk_conversations c WHERE c.contact_id IN (SELECT id FROM gone)
), messages AS (
    SELECT m.id FROM desk_messages m WHERE m.conversation_id IN (SELECT id FROM conversations)
), presses AS (
    DELETE FROM desk_presses
     WHERE contact_id IN (SELECT id FROM gone) OR message_id IN (SELECT id FROM messages) RETURNING 1
), posts AS (
    DELETE FROM desk_staff_posts WHERE conversation_id IN (SELECT id FROM conversations) RETURNING 1
), deliveries AS (
    DELETE FROM desk_deliveries WHERE conversation_id IN (SELECT id FROM conversations) RETURNING 1
), events AS (
    DELETE FROM desk_events WHERE conversation_id IN (SELECT id FROM conversations) RETURNING 1
), said AS (
    DELETE FROM desk_messages WHERE id IN (SELECT id FROM messages) RETURNING 1
), ended AS (
    DELETE FROM desk_conversations WHERE id IN (SELECT id FROM conversations) RETURNING 1
), contacts AS (
    DELETE FROM desk_contacts WHERE id IN (SELECT id FROM gone) RETURNING 1
)
SELECT (SELECT count(*) FROM contacts) AS contacts, (SELECT count(*) FROM ended) AS conversations,
       (SELECT count(*) FROM presses) + (SELECT count(*) FROM posts) + (SELECT count(*) FROM deliveries)
       + (SELECT count(*) FROM events) + (SELECT count(*) FROM said) AS rows;
