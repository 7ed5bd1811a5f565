-- What a bot remembers of a person (SPEC §11; engine/store/memories.py): their earlier questions.

-- name: asked_before
-- What run $1's person (its subject; a rooms run's asker when it has none — never a desk's staff) asked the
-- same bot in earlier runs that were answered, newest first, at most $2; outside run $1's own conversation (the
-- surface hands that over already); with $3, only those asked in run $1's room.
SELECT p.prompt, p.answer, p.created_at, p.room_id
  FROM agent_runs r
  JOIN agent_runs p
    ON p.bot = r.bot
   AND coalesce(p.subject, CASE WHEN p.surface = 'rooms' THEN p.asked_by END)
     = coalesce(r.subject, CASE WHEN r.surface = 'rooms' THEN r.asked_by END)
 WHERE r.id = $1 AND p.id < r.id AND p.status = 'done' AND p.answer IS NOT NULL
   AND (p.room_id IS DISTINCT FROM r.room_id OR p.thread_root IS DISTINCT FROM r.thread_root)
   AND (NOT $3 OR p.room_id = r.room_id)
 ORDER BY p.id DESC
 LIMIT $2;
