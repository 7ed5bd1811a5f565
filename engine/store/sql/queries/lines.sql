-- What was said: appservice transactions, the events stored once as lines, and the context a bot is given —
-- only the lines the asker could see (summon_can_see_v2, migration 0020), in the order summon heard them (`seq`),
-- newest first so a cap keeps the newest (engine/store/lines.py).

-- name: record_transaction
-- Remember an appservice transaction id; no row back = seen before (a replay: store and summon nothing).
INSERT INTO as_transactions (txn_id, events) VALUES ($1, $2)
ON CONFLICT (txn_id) DO NOTHING
RETURNING txn_id;

-- name: record_first_try
-- A transaction's first statement when nothing is known of it: the failed attempts at transaction $1 (digest $3)
-- and, when there were none, its id remembered ($2 events); new = false when it was seen before (a replay).
WITH failed AS (
    SELECT coalesce((SELECT attempts FROM as_transaction_failures WHERE txn_digest = $3), 0) AS n
), kept AS (
    INSERT INTO as_transactions (txn_id, events) SELECT $1, $2 FROM failed WHERE n = 0
    ON CONFLICT (txn_id) DO NOTHING
    RETURNING txn_id
)
SELECT (SELECT n FROM failed) AS failures, EXISTS (SELECT 1 FROM kept) AS new;

-- name: peek_transaction
-- Before a transaction of several rooms is stored a room at a time: the failed attempts at transaction $1 (digest
-- $2), and whether its id is remembered (seen: a replay).
SELECT coalesce((SELECT attempts FROM as_transaction_failures WHERE txn_digest = $2), 0) AS failures,
       EXISTS (SELECT 1 FROM as_transactions WHERE txn_id = $1) AS seen;

-- name: transaction_failures
-- How many attempts at the transaction with digest $1 failed in a way a retry does not mend (0: none).
SELECT coalesce((SELECT attempts FROM as_transaction_failures WHERE txn_digest = $1), 0);

-- name: count_transaction_failure
-- One more attempt at transaction $1 (its digest) failed with $2, counted in a commit of its own; the count.
INSERT INTO as_transaction_failures (txn_digest, attempts, last_error) VALUES ($1, 1, $2)
ON CONFLICT (txn_digest) DO UPDATE
   SET attempts = as_transaction_failures.attempts + 1, last_error = excluded.last_error, last_at = now()
RETURNING attempts;

-- name: forget_transaction_failures
-- The transaction with digest $1 was stored at last: its failed attempts are forgotten.
DELETE FROM as_transaction_failures WHERE txn_digest = $1;

-- name: reject_event
-- Keep an event that could not be stored, as received ($5, escaped JSON text), with why ($4).
INSERT INTO rejected_events (txn_digest, event_id, room_id, reason, event) VALUES ($1, $2, $3, $4, $5);

-- name: store_event
-- Store a room event once, by event_id; a row back = newly stored (only a new line may summon).
INSERT INTO room_events (event_id, room_id, sender, event_type, state_key, ts, content, said,
                         thread_root, reply_to, replaces)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (event_id) DO NOTHING
RETURNING event_id;

-- name: redact_event
-- A redaction drops the line: no text, never in a context again. Its content goes, except what the Matrix
-- redaction algorithm keeps of state (a membership, a history visibility), which still governs the room.
-- Returns what the line edited (NULL: it was no edit); no row when there was nothing left to redact.
WITH target AS (
    SELECT event_id, replaces FROM room_events WHERE event_id = $1 AND room_id = $2 AND NOT redacted FOR UPDATE
)
UPDATE room_events e
   SET redacted = true, said = '',
       content = CASE
           WHEN e.state_key IS NULL THEN '{}'::jsonb
           WHEN e.event_type = 'm.room.member' THEN jsonb_strip_nulls(jsonb_build_object(
               'membership', e.content->'membership', 'join_authorised_via_users_server',
               e.content->'join_authorised_via_users_server'))
           WHEN e.event_type = 'm.room.history_visibility' THEN jsonb_strip_nulls(jsonb_build_object(
               'history_visibility', e.content->'history_visibility'))
           ELSE '{}'::jsonb
       END
  FROM target t
 WHERE e.event_id = t.event_id
RETURNING t.replaces;

-- name: line_now_reads
-- What line $1 in room $2 reads as now: its latest edit that still stands (the newest by time, ties to the
-- larger event id; same sender and type), else its own words; '' for a line redacted or never stored.
SELECT coalesce((
    SELECT coalesce(x.said, e.said)
      FROM room_events e
      LEFT JOIN LATERAL (
            SELECT x.said FROM room_events x
             WHERE x.replaces = e.event_id AND x.room_id = e.room_id AND x.sender = e.sender
               AND x.event_type = e.event_type AND NOT x.redacted
             ORDER BY x.ts DESC, x.event_id DESC LIMIT 1) x ON true
     WHERE e.event_id = $1 AND e.room_id = $2 AND NOT e.redacted), '');

-- name: cancel_runs_asked_by
-- The unfinished run that line $1 in room $2 summoned is asked to stop: its asker took the question back.
UPDATE agent_runs SET cancel_requested = true, updated_at = now()
 WHERE trigger_event = $1 AND place = $2 AND status IN ('queued', 'running') AND NOT cancel_requested
RETURNING id;

-- name: scrub_redacted_heard
-- A redacted line's words leave the `heard` steps of the runs it joined (each such step reads "name: words"
-- a line, so the line is left as its name alone); run before the runs' own copies are blanked.
UPDATE agent_steps s
   SET payload = jsonb_set(s.payload, '{text}', to_jsonb(replace(s.payload->>'text', h.name || ': ' || h.said,
                                                                 h.name || ': ')))
  FROM (SELECT r.id, coalesce(nullif(l.value->>'name', ''), l.value->>'sender') AS name, l.value->>'said' AS said
          FROM agent_runs r
         CROSS JOIN LATERAL jsonb_array_elements(r.context->'later') l
         WHERE r.place = $2 AND r.context->'later' @> jsonb_build_array(jsonb_build_object('event_id', $1::text))
           AND l.value->>'event_id' = $1 AND coalesce(l.value->>'said', '') <> '') h
 WHERE s.run_id = h.id AND s.kind = 'heard' AND s.payload->>'text' IS NOT NULL;

-- name: scrub_redacted_line
-- A redacted line $1 leaves every stored context in room $2, finished runs' too: gone from `lines`, blanked in
-- `later` (kept as an empty line, so the count of lines a run has heard still holds); the run it summoned
-- loses its prompt. The runs it touched.
UPDATE agent_runs r
   SET context = r.context
       || CASE WHEN jsonb_typeof(r.context->'lines') = 'array' THEN jsonb_build_object('lines', (
              SELECT coalesce(jsonb_agg(l.value ORDER BY l.n), '[]'::jsonb)
                FROM jsonb_array_elements(r.context->'lines') WITH ORDINALITY AS l(value, n)
               WHERE l.value->>'event_id' IS DISTINCT FROM $1)) ELSE '{}'::jsonb END
       || CASE WHEN jsonb_typeof(r.context->'later') = 'array' THEN jsonb_build_object('later', (
              SELECT coalesce(jsonb_agg(CASE WHEN l.value->>'event_id' = $1
                                             THEN l.value || '{"said": "", "redacted": true}'::jsonb
                                             ELSE l.value END ORDER BY l.n), '[]'::jsonb)
                FROM jsonb_array_elements(r.context->'later') WITH ORDINALITY AS l(value, n))) ELSE '{}'::jsonb END,
       prompt = CASE WHEN r.trigger_event = $1 THEN '' ELSE r.prompt END,
       updated_at = now()
 WHERE r.place = $2
   AND (r.trigger_event = $1
        OR r.context->'lines' @> jsonb_build_array(jsonb_build_object('event_id', $1::text))
        OR r.context->'later' @> jsonb_build_array(jsonb_build_object('event_id', $1::text)))
RETURNING r.id;

-- name: reword_line_in_runs
-- Every stored context in room $2 that holds line $1 reads it as $3 (what it reads as now that an edit of it
-- was redacted); a line that now reads as nothing leaves them.
UPDATE agent_runs r
   SET context = jsonb_set(r.context, '{lines}', (
           SELECT coalesce(jsonb_agg(CASE WHEN l.value->>'event_id' = $1 THEN l.value || jsonb_build_object('said', $3::text)
                                          ELSE l.value END ORDER BY l.n), '[]'::jsonb)
             FROM jsonb_array_elements(r.context->'lines') WITH ORDINALITY AS l(value, n)
            WHERE NOT (l.value->>'event_id' = $1 AND $3::text = ''))),
       updated_at = now()
 WHERE r.place = $2 AND r.context->'lines' @> jsonb_build_array(jsonb_build_object('event_id', $1::text))
RETURNING r.id;

-- name: event_sender
-- Who sent event $1 in room $2 (a redaction is applied only by its sender or a room's redactor).
SELECT sender FROM room_events WHERE event_id = $1 AND room_id = $2;

-- name: context_thread
-- A thread as the asker ($4) could see it: its root first, then its replies up to the asking line ($3: heard
-- up to it; NULL: up to now), newest first, each as it reads now (its latest standing edit). The newest $5
-- candidates, then checked for visibility. The root and the replies are read apart, the replies newest first by
-- the thread index and stopped after $5, so a summons in a thread of 5,000 lines reads about $5 of them, not all
-- 5,000 to sort them (make bench-scale, tests/bench/year.py).
WITH recent AS (
    SELECT * FROM (
        SELECT e.event_id, e.room_id, e.sender, coalesce(x.said, e.said) AS said, e.ts, e.seq, e.fetched
          FROM room_events e
          LEFT JOIN LATERAL (
                SELECT x.said FROM room_events x
                 WHERE x.replaces = e.event_id AND x.room_id = e.room_id AND x.sender = e.sender
                   AND x.event_type = e.event_type AND NOT x.redacted
                 ORDER BY x.ts DESC, x.event_id DESC LIMIT 1) x ON true
         WHERE e.room_id = $1 AND e.event_id = $2 AND e.replaces IS NULL
           AND NOT e.redacted AND coalesce(x.said, e.said) <> ''
           AND e.seq <= coalesce((SELECT u.seq FROM room_events u WHERE u.event_id = $3), 9223372036854775807)
        UNION ALL
        (SELECT e.event_id, e.room_id, e.sender, coalesce(x.said, e.said) AS said, e.ts, e.seq, e.fetched
           FROM room_events e
           LEFT JOIN LATERAL (
                 SELECT x.said FROM room_events x
                  WHERE x.replaces = e.event_id AND x.room_id = e.room_id AND x.sender = e.sender
                    AND x.event_type = e.event_type AND NOT x.redacted
                  ORDER BY x.ts DESC, x.event_id DESC LIMIT 1) x ON true
          WHERE e.thread_root = $2 AND e.room_id = $1 AND e.event_id <> $2 AND e.replaces IS NULL
            AND NOT e.redacted AND coalesce(x.said, e.said) <> ''
            AND e.seq <= coalesce((SELECT u.seq FROM room_events u WHERE u.event_id = $3), 9223372036854775807)
          ORDER BY e.seq DESC
          LIMIT $5)
    ) both_parts
     ORDER BY event_id = $2 DESC, seq DESC
     LIMIT $5
)
SELECT e.event_id, e.sender, coalesce(m.display_name, e.sender) AS name, e.said, e.ts
  FROM recent e
  LEFT JOIN room_members m ON m.room_id = e.room_id AND m.user_id = e.sender
 WHERE summon_can_see_v2(e.room_id, $4, e.event_id, e.seq, e.fetched)
 ORDER BY e.event_id = $2 DESC, e.seq DESC;

-- name: context_timeline
-- The room's main timeline as the asker ($3) could see it, up to the asking line ($2: heard up to it; NULL: up
-- to now), newest first: what was said, as it reads now (thread replies are not folded in), and who came and
-- went (a rename is not a coming). The newest $4 candidates are taken first (by the timeline index) and only
-- they are checked for visibility, so a summons costs the same in a room of a million lines as in one of fifty.
WITH recent AS (
    SELECT e.event_id, e.room_id, e.sender, coalesce(x.said, e.said) AS said, e.ts, e.seq, e.fetched,
           e.event_type, e.state_key, e.content
      FROM room_events e
      LEFT JOIN LATERAL (
            SELECT x.said FROM room_events x
             WHERE x.replaces = e.event_id AND x.room_id = e.room_id AND x.sender = e.sender
               AND x.event_type = e.event_type AND NOT x.redacted
             ORDER BY x.ts DESC, x.event_id DESC LIMIT 1) x ON e.state_key IS NULL
      LEFT JOIN LATERAL (
            SELECT p.content->>'membership' AS membership FROM room_events p
             WHERE p.room_id = e.room_id AND p.event_type = 'm.room.member' AND p.state_key = e.state_key
               AND p.seq < e.seq
             ORDER BY p.seq DESC LIMIT 1) was ON e.event_type = 'm.room.member'
     WHERE e.room_id = $1 AND e.thread_root IS NULL AND e.replaces IS NULL AND NOT e.redacted
       AND e.seq <= coalesce((SELECT u.seq FROM room_events u WHERE u.event_id = $2), 9223372036854775807)
       AND (coalesce(x.said, e.said) <> ''
            OR (e.event_type = 'm.room.member' AND (
                   (e.content->>'membership' = 'join' AND was.membership IS DISTINCT FROM 'join')
                OR (e.content->>'membership' IN ('leave', 'ban') AND was.membership = 'join'))))
     ORDER BY e.seq DESC
     LIMIT $4
)
SELECT e.event_id, e.sender, coalesce(m.display_name, e.sender) AS name, e.said, e.ts,
       e.content->>'membership' AS membership,
       coalesce(nullif(e.content->>'displayname', ''), t.display_name, e.state_key) AS subject
  FROM recent e
  LEFT JOIN room_members m ON m.room_id = e.room_id AND m.user_id = e.sender
  LEFT JOIN room_members t ON e.event_type = 'm.room.member' AND t.room_id = e.room_id AND t.user_id = e.state_key
 WHERE summon_can_see_v2(e.room_id, $3, e.event_id, e.seq, e.fetched)
 ORDER BY e.seq DESC;

-- name: context_stored
-- Whether an event is stored (a thread whose root is not predates us: fetch it from the homeserver).
SELECT EXISTS (SELECT 1 FROM room_events WHERE event_id = $1);

-- name: context_store_fetched
-- Keep a thread's event fetched from the homeserver (a line, or the edit bundled with one: $10 names the line
-- it edits) once, by event_id; it summons nothing, and is marked fetched: it was said before we heard the
-- room, at a place in it we do not know.
INSERT INTO room_events (event_id, room_id, sender, event_type, state_key, ts, content, said,
                         thread_root, reply_to, replaces, fetched)
VALUES ($1, $2, $3, $4, NULL, $5, $6, $7, $8, $9, $10, true)
ON CONFLICT (event_id) DO NOTHING;

-- name: context_room_name
-- What a person calls the room: its name, else its canonical alias, else its id.
SELECT coalesce(
    (SELECT nullif(content->>'name', '') FROM room_events
      WHERE room_id = $1 AND event_type = 'm.room.name' AND state_key = '' AND NOT redacted
      ORDER BY seq DESC LIMIT 1),
    (SELECT nullif(content->>'alias', '') FROM room_events
      WHERE room_id = $1 AND event_type = 'm.room.canonical_alias' AND state_key = '' AND NOT redacted
      ORDER BY seq DESC LIMIT 1),
    $1);
