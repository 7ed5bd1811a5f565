-- What a bot remembers of a person (SPEC §11; engine/store/memories.py): their earlier questions.

-- name: asked_before
-- What run $1's person (its subject; a rooms run's asker when it has none — never a desk's staff) asked the
-- same bot in earlier runs that were answered, newest first, at most $2; outside run $1's own conversation (the
-- surface hands that over already); with $3, only those asked in run $1's room since everybody who reads it now
-- came in (a line from before somebody joined is not repeated to them).
SELECT p.prompt, p.answer, p.created_at, p.place
  FROM agent_runs r
  JOIN agent_runs p
    ON p.bot = r.bot
   AND coalesce(p.subject, CASE WHEN p.surface = 'rooms' THEN p.asked_by END)
     = coalesce(r.subject, CASE WHEN r.surface = 'rooms' THEN r.asked_by END)
 WHERE r.id = $1 AND p.id < r.id AND p.status = 'done' AND p.answer IS NOT NULL
   AND (p.place IS DISTINCT FROM r.place OR p.thread IS DISTINCT FROM r.thread)
   AND (NOT $3 OR (p.place = r.place AND p.created_at >= (
        SELECT max(m.updated_at) FROM room_members m WHERE m.room_id = r.place AND m.membership IN ('join', 'invite'))))
 ORDER BY p.id DESC
 LIMIT $2;

-- name: memories_ready
-- Make the memories table if pgvector is there; NULL when it stands, else why it cannot (one line).
SELECT summon_memories_v1();

-- name: remember
-- What finished run $1's person said ($2) and its vector ($3, pgvector's text form), written as that run's: the
-- person and the bot come from the run row. The memory's id; NULL when the run is about nobody.
SELECT agent_remember_v1($1, $2, $3::text::vector);

-- name: recall
-- As the tools role answering for a run's person (row security keeps every other person's rows out): what they
-- told bot $1 nearest in meaning to vector $2, no further than cosine distance $3, at most $4; with $5, only what
-- was said in room $5, and then only since $6 (when everybody who reads the room now came in). Nearest first.
SELECT m.said, m.at, (m.embedding <=> $2::text::vector)::float8 AS distance
  FROM memories m
 WHERE m.person = agent_person_v1(agent_run_v1()) AND m.bot = $1
   AND ($5::text IS NULL OR m.place = $5)
   AND ($6::timestamptz IS NULL OR m.at >= $6)
   AND (m.embedding <=> $2::text::vector) <= $3
 ORDER BY m.embedding <=> $2::text::vector
 LIMIT $4;

-- name: memories_of
-- What person $1 told bot $2, newest first, at most $3 (their own `!memories`).
SELECT id, said, at FROM memories WHERE person = $1 AND bot = $2 ORDER BY id DESC LIMIT $3;

-- name: forget_memory
-- Person $1 forgets their memory $3 of bot $2 (`!forget <n>`); a row back when it was theirs.
DELETE FROM memories WHERE person = $1 AND bot = $2 AND id = $3 RETURNING id;

-- name: forget_memories
-- Person $1 forgets everything they told bot $2 (`!forget all`); how many.
DELETE FROM memories WHERE person = $1 AND bot = $2;
