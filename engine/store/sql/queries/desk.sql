-- The desk: inboxes, contacts, conversations, messages, presses and each conversation's events
-- (engine/store/desk.py).

-- name: desk_upsert_inbox
-- The inbox the configuration names $1 (public identifier $2, shown as $3), made or brought up to date.
INSERT INTO desk_inboxes (name, identifier, title) VALUES ($1, $2, $3)
ON CONFLICT (name) DO UPDATE SET identifier = excluded.identifier, title = excluded.title
RETURNING *;

-- name: desk_inbox_by_identifier
-- The inbox a widget names by its public identifier $1.
SELECT * FROM desk_inboxes WHERE identifier = $1;

-- name: desk_inbox
-- Inbox $1.
SELECT * FROM desk_inboxes WHERE id = $1;

-- name: desk_insert_contact
-- A new contact in inbox $1: an account ($2, NULL for a guest) the site vouched for ($5), a name and email.
INSERT INTO desk_contacts (inbox_id, user_id, name, email, hmac_verified) VALUES ($1, $2, $3, $4, $5)
RETURNING *;

-- name: desk_contact
-- Contact $1.
SELECT * FROM desk_contacts WHERE id = $1;

-- name: desk_lock_contact
-- Take contact $1's row for the rest of the transaction (their sends are counted one at a time).
SELECT id FROM desk_contacts WHERE id = $1 FOR UPDATE;

-- name: desk_contact_sent_lately
-- How many messages contact $1 wrote in the last $2 seconds, in all their conversations.
SELECT count(*) FROM desk_messages m JOIN desk_conversations c ON c.id = m.conversation_id
 WHERE c.contact_id = $1 AND m.message_type = 'incoming' AND m.created_at > now() - make_interval(secs => $2);

-- name: desk_insert_conversation
-- A new conversation for contact $2 in inbox $1, with people ('open') or bot $4 ('pending') handling it.
INSERT INTO desk_conversations (inbox_id, contact_id, status, handler_bot) VALUES ($1, $2, $3, $4)
RETURNING *;

-- name: desk_conversation
-- Conversation $1.
SELECT * FROM desk_conversations WHERE id = $1;

-- name: desk_lock_runs
-- Take the unfinished runs of conversation $1 (its room, `desk:<id>`), in id order, before the conversation
-- itself: a worker's finishing commit holds its run and then takes the conversation, so everything takes
-- them in that order.
SELECT id FROM agent_runs WHERE place = $1 AND status IN ('queued', 'running') ORDER BY id FOR UPDATE;

-- name: desk_lock_conversation
-- Conversation $1, its row taken for the rest of the transaction (its changes are made one at a time).
SELECT * FROM desk_conversations WHERE id = $1 FOR UPDATE;

-- name: desk_conversations_of_contact
-- Contact $1's conversations, newest first.
SELECT * FROM desk_conversations WHERE contact_id = $1 ORDER BY id DESC LIMIT 100;

-- name: desk_conversations_of_inbox
-- Inbox $1's conversations with status $2 (NULL: any), newest activity first, at most $3.
SELECT * FROM desk_conversations
 WHERE inbox_id = $1 AND ($2::text IS NULL OR status = $2)
 ORDER BY updated_at DESC, id DESC
 LIMIT $3;

-- name: desk_save_conversation
-- Conversation $1's state as it now stands (who has it, whether the bot is off, how it was resolved).
UPDATE desk_conversations
   SET status = $2, handler_bot = $3, assignee = $4,
       bot_off_at = CASE WHEN $5 THEN coalesce(bot_off_at, now()) END,
       resolution = $6,
       resolved_at = CASE WHEN $2 = 'resolved' THEN coalesce(resolved_at, now()) END,
       updated_at = now()
 WHERE id = $1
RETURNING *;

-- name: desk_touch_conversation
-- Conversation $1 had something new (the staff's list is by latest activity).
UPDATE desk_conversations SET updated_at = now() WHERE id = $1;

-- name: desk_next_seq
-- The next event number of conversation $1 (its row stays locked until the commit: numbers are in commit order).
UPDATE desk_conversations SET seq = seq + 1 WHERE id = $1 RETURNING seq;

-- name: desk_insert_event
-- Event $2 of conversation $1: what changed ($3), whether only the staff may see it ($4), and its payload.
INSERT INTO desk_events (conversation_id, seq, kind, private, payload) VALUES ($1, $2, $3, $4, $5);

-- name: desk_events_after
-- Conversation $1's events after number $2, oldest first (the staff's private ones only with $3), at most $4.
SELECT seq, kind, private, payload FROM desk_events
 WHERE conversation_id = $1 AND seq > $2 AND ($3 OR NOT private)
 ORDER BY seq
 LIMIT $4;

-- name: desk_insert_message
-- A message in conversation $1 (its id, and the database's time it was written).
INSERT INTO desk_messages (conversation_id, message_type, private, content, content_type, content_attributes,
                           sender_type, sender_name, bot, run_id, echo_id, draft)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
ON CONFLICT (conversation_id, echo_id) WHERE echo_id IS NOT NULL DO NOTHING
RETURNING *;

-- name: desk_message
-- Message $1.
SELECT * FROM desk_messages WHERE id = $1;

-- name: desk_message_by_echo
-- The message the client sent as $2 in conversation $1 (a send repeated is the same message).
SELECT * FROM desk_messages WHERE conversation_id = $1 AND echo_id = $2;

-- name: desk_messages_of
-- Conversation $1's messages after id $2, oldest first (private notes only with $3), at most $4.
SELECT * FROM desk_messages
 WHERE conversation_id = $1 AND id > $2 AND ($3 OR NOT private)
 ORDER BY id
 LIMIT $4;

-- name: desk_last_messages
-- Conversation $1's latest $3 messages (private notes only with $2), oldest first: a run's transcript.
SELECT * FROM (SELECT * FROM desk_messages
                WHERE conversation_id = $1 AND ($2 OR NOT private) AND message_type IN ('incoming', 'outgoing')
                ORDER BY id DESC LIMIT $3) m
 ORDER BY id;

-- name: desk_unanswered
-- What the contact wrote in conversation $1 since the business last answered (a person or a bot), oldest first.
SELECT * FROM desk_messages
 WHERE conversation_id = $1 AND message_type = 'incoming'
   AND id > coalesce((SELECT max(id) FROM desk_messages
                       WHERE conversation_id = $1 AND message_type = 'outgoing' AND NOT private), 0)
 ORDER BY id;

-- name: desk_offered_since_answer
-- Whether conversation $1 already offered a bot since the business last answered (once per question).
SELECT EXISTS (
    SELECT 1 FROM desk_messages
     WHERE conversation_id = $1 AND message_type = 'template'
       AND id > coalesce((SELECT max(id) FROM desk_messages
                           WHERE conversation_id = $1 AND message_type = 'outgoing' AND NOT private), 0));

-- name: desk_take_choice
-- Take message $1's choice $2, once: the message as taken, or no row (taken before, withdrawn, or no such
-- choice on it).
UPDATE desk_messages SET taken_value = $2, taken_at = now(), updated_at = now()
 WHERE id = $1 AND taken_at IS NULL AND withdrawn_at IS NULL AND content_type = 'input_select'
   AND content_attributes->'items' @> jsonb_build_array(jsonb_build_object('value', $2::text))
RETURNING *;

-- name: desk_record_press
-- Remember a press by contact $2 on message $1's choice $3, and whether it was the one that took it.
INSERT INTO desk_presses (message_id, contact_id, value, taken) VALUES ($1, $2, $3, $4);

-- name: desk_withdraw_choices
-- Every choice still on offer in conversation $1 goes (somebody asked for a person): the messages withdrawn.
UPDATE desk_messages SET withdrawn_at = now(), updated_at = now()
 WHERE conversation_id = $1 AND content_type = 'input_select' AND taken_at IS NULL AND withdrawn_at IS NULL
RETURNING *;

-- name: desk_set_feedback
-- Whether bot answer $1 helped ('helped') or its reader asked for a person ('human'); only a bot's answer.
UPDATE desk_messages SET feedback = $2, updated_at = now()
 WHERE id = $1 AND message_type = 'outgoing' AND NOT private AND bot IS NOT NULL
RETURNING *;

-- name: desk_settle_draft
-- Draft $1 was sent, sent edited or discarded ($2) by $3; no row back = it was not a pending draft any more.
UPDATE desk_messages
   SET draft = $2, content_attributes = content_attributes || jsonb_build_object('settled_by', $3::text),
       updated_at = now()
 WHERE id = $1 AND draft = 'pending'
RETURNING *;

-- name: desk_message_failed
-- Message $1 could not reach whoever was to answer it.
UPDATE desk_messages SET status = 'failed', updated_at = now() WHERE id = $1 RETURNING *;

-- name: desk_join_run
-- A message joins bot $1's live run in conversation $2 (one run per bot per conversation): added to its
-- context's `later`; the run's id, or no row when it has none.
UPDATE agent_runs r
   SET context = r.context
                 || jsonb_build_object('later', coalesce(r.context->'later', '[]'::jsonb) || jsonb_build_array($3::jsonb))
                 || CASE WHEN $4::text IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('later_header', $4::text) END,
       updated_at = now()
 WHERE r.bot = $1 AND r.conversation = $2 AND r.status IN ('queued', 'running') AND NOT r.cancel_requested
RETURNING r.id;

-- name: desk_idle_conversations
-- Conversations a bot has whose last word is the bot's answer, untouched for $1 seconds: left without
-- asking for more (at most $2).
SELECT c.id FROM desk_conversations c
 WHERE c.status = 'pending' AND c.updated_at < now() - make_interval(secs => $1)
   AND EXISTS (SELECT 1 FROM desk_messages m
                WHERE m.id = (SELECT max(id) FROM desk_messages
                               WHERE conversation_id = c.id AND message_type IN ('incoming', 'outgoing') AND NOT private)
                  AND m.message_type = 'outgoing' AND m.bot IS NOT NULL)
 ORDER BY c.updated_at
 LIMIT $2;
