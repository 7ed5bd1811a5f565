-- name: desk_record_outcome
-- Something that happened to conversation $1 (of inbox $2), as its figures count it (migration 0078).
INSERT INTO desk_outcomes (conversation_id, inbox_id, kind, cause, bot, by_whom, run_id)
VALUES ($1, $2, $3, $4, $5, $6, $7);

-- name: desk_record_rating
-- The contact's rating $3 of conversation $1 (of inbox $2); NULL when it was rated before (once only).
INSERT INTO desk_outcomes (conversation_id, inbox_id, kind, value)
VALUES ($1, $2, 'rated', $3)
ON CONFLICT (conversation_id) WHERE kind = 'rated' DO NOTHING
RETURNING id;

-- name: desk_outcomes_of_window
-- Everything recorded of the conversations of inboxes $1 that started in [$2, $3), oldest first: at most $4
-- conversations (the earliest), so a report reads a bounded number of rows.
WITH started AS (
    SELECT conversation_id FROM desk_outcomes
     WHERE kind = 'started' AND inbox_id = ANY($1::bigint[]) AND at >= $2 AND at < $3
     ORDER BY at, conversation_id
     LIMIT $4
)
SELECT o.conversation_id, o.inbox_id, o.kind, o.cause, o.bot, o.by_whom, o.run_id, o.value, o.at
  FROM desk_outcomes o JOIN started s USING (conversation_id)
 ORDER BY o.conversation_id, o.at, o.id;

-- name: desk_handed_by_run
-- Whether run $2 handed conversation $1 to people (its hand_to_people tool).
SELECT EXISTS (SELECT 1 FROM desk_outcomes
                WHERE conversation_id = $1 AND run_id = $2 AND kind = 'handed' AND cause = 'bot');

-- name: desk_rating_asked
-- Whether conversation $1 was ever asked for its rating (a message of the desk's carrying the question).
SELECT EXISTS (SELECT 1 FROM desk_messages
                WHERE conversation_id = $1 AND message_type = 'template' AND content_attributes ? 'rating');

-- name: desk_cancel_other_runs
-- Ask the unfinished runs of conversation $1 (its place) other than run $2 to stop (a bot handing the
-- conversation over goes on to say its last words; the others stop).
UPDATE agent_runs SET cancel_requested = true, updated_at = now()
 WHERE place = $1 AND id <> $2 AND status IN ('queued', 'running') AND NOT cancel_requested
RETURNING id;

-- name: desk_mark_handed
-- Conversation $1 was handed to people now: the desk decides who takes it (desk_to_route).
UPDATE desk_conversations SET handed_at = now(), reroute_at = NULL WHERE id = $1;

-- name: desk_to_route
-- Conversations handed to people that nobody has, not yet decided since their handoff (fresh) or whose promise
-- fell due (at most $1, the oldest handoff first).
SELECT id, inbox_id, routed_at IS NULL OR routed_at < handed_at AS fresh FROM desk_conversations
 WHERE status = 'open' AND assignee IS NULL AND handed_at IS NOT NULL
   AND (routed_at IS NULL OR routed_at < handed_at OR reroute_at <= now())
 ORDER BY handed_at
 LIMIT $1;

-- name: desk_routed
-- The desk decided conversation $1: assigned to $2 (NULL: a promise), promised $3 when first told, decided again at
-- $4 (NULL: never).
UPDATE desk_conversations
   SET routed_at = now(), routed_to = coalesce($2, routed_to), promised_at = coalesce($3, promised_at),
       reroute_at = $4
 WHERE id = $1;

-- name: desk_last_routed
-- When the desk last assigned each of staff members $2 a conversation of inbox $1.
SELECT routed_to, max(routed_at) AS at FROM desk_conversations
 WHERE inbox_id = $1 AND routed_to = ANY($2::text[])
 GROUP BY routed_to;

-- name: desk_tickets_of
-- The tickets raised by the runs of conversation $1 (its place), oldest first (at most 20).
SELECT t.id, t.subject FROM tickets t JOIN agent_runs r ON r.id = t.raised_by_run
 WHERE r.place = $1
 ORDER BY t.id
 LIMIT 20;
