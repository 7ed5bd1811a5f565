-- What was said: appservice transactions, the events stored once as lines, and the context a bot is given —
-- only the lines the asker could see (summon_can_see_v1, migration 0013), newest first so a cap keeps the newest
-- (engine/store/lines.py).

-- name: record_transaction
-- Remember an appservice transaction id; no row back = seen before (a replay: store and summon nothing).
INSERT INTO as_transactions (txn_id, events) VALUES ($1, $2)
ON CONFLICT (txn_id) DO NOTHING
RETURNING txn_id;

-- name: store_event
-- Store a room event once, by event_id; a row back = newly stored (only a new line may summon).
INSERT INTO room_events (event_id, room_id, sender, event_type, state_key, ts, content, said,
                         thread_root, reply_to, replaces)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (event_id) DO NOTHING
RETURNING event_id;

-- name: apply_edit
-- An edit replaces its original's text: same sender, newer than any edit applied before.
UPDATE room_events SET said = $3, edited_ts = $4
 WHERE event_id = $1 AND sender = $2 AND replaces IS NULL AND coalesce(edited_ts, ts) <= $4;

-- name: redact_event
-- A redaction drops the line: no text, never in a context again. Its content goes, except what the Matrix
-- redaction algorithm keeps of state (a membership, a history visibility), which still governs the room.
UPDATE room_events
   SET redacted = true, said = '',
       content = CASE
           WHEN state_key IS NULL THEN '{}'::jsonb
           WHEN event_type = 'm.room.member' THEN jsonb_strip_nulls(jsonb_build_object(
               'membership', content->'membership', 'join_authorised_via_users_server',
               content->'join_authorised_via_users_server'))
           WHEN event_type = 'm.room.history_visibility' THEN jsonb_strip_nulls(jsonb_build_object(
               'history_visibility', content->'history_visibility'))
           ELSE '{}'::jsonb
       END
 WHERE event_id = $1 AND room_id = $2;

-- name: event_sender
-- Who sent event $1 in room $2 (a redaction is applied only by its sender or a room's redactor).
SELECT sender FROM room_events WHERE event_id = $1 AND room_id = $2;

-- name: context_thread
-- A thread as the asker could see it: its root first, then its replies up to the asking line, newest first
-- (the newest $5 candidates, then checked for visibility).
WITH recent AS (
    SELECT e.event_id, e.room_id, e.sender, e.said, e.ts
      FROM room_events e
     WHERE e.room_id = $1 AND (e.event_id = $2 OR e.thread_root = $2) AND e.replaces IS NULL
       AND NOT e.redacted AND e.said <> '' AND e.ts <= $3
     ORDER BY e.event_id = $2 DESC, e.ts DESC, e.event_id DESC
     LIMIT $5
)
SELECT e.event_id, e.sender, coalesce(m.display_name, e.sender) AS name, e.said, e.ts
  FROM recent e
  LEFT JOIN room_members m ON m.room_id = e.room_id AND m.user_id = e.sender
 WHERE summon_can_see_v1(e.room_id, $4, e.event_id, e.ts)
 ORDER BY e.event_id = $2 DESC, e.ts DESC, e.event_id DESC;

-- name: context_timeline
-- The room's main timeline as the asker could see it, up to the asking line, newest first: what was said
-- (thread replies are not folded in) and who came and went (a rename is not a coming). The newest $4
-- candidates are taken first (by the timeline index) and only they are checked for visibility, so a
-- summons costs the same in a room of a million lines as in one of fifty.
WITH recent AS (
    SELECT e.event_id, e.room_id, e.sender, e.said, e.ts, e.event_type, e.state_key, e.content
      FROM room_events e
      LEFT JOIN LATERAL (
            SELECT p.content->>'membership' AS membership FROM room_events p
             WHERE p.room_id = e.room_id AND p.event_type = 'm.room.member' AND p.state_key = e.state_key
               AND (p.ts, p.event_id) < (e.ts, e.event_id)
             ORDER BY p.ts DESC, p.event_id DESC LIMIT 1) was ON e.event_type = 'm.room.member'
     WHERE e.room_id = $1 AND e.thread_root IS NULL AND e.replaces IS NULL AND NOT e.redacted AND e.ts <= $2
       AND (e.said <> ''
            OR (e.event_type = 'm.room.member' AND (
                   (e.content->>'membership' = 'join' AND was.membership IS DISTINCT FROM 'join')
                OR (e.content->>'membership' IN ('leave', 'ban') AND was.membership = 'join'))))
     ORDER BY e.ts DESC, e.event_id DESC
     LIMIT $4
)
SELECT e.event_id, e.sender, coalesce(m.display_name, e.sender) AS name, e.said, e.ts,
       e.content->>'membership' AS membership,
       coalesce(nullif(e.content->>'displayname', ''), t.display_name, e.state_key) AS subject
  FROM recent e
  LEFT JOIN room_members m ON m.room_id = e.room_id AND m.user_id = e.sender
  LEFT JOIN room_members t ON e.event_type = 'm.room.member' AND t.room_id = e.room_id AND t.user_id = e.state_key
 WHERE summon_can_see_v1(e.room_id, $3, e.event_id, e.ts)
 ORDER BY e.ts DESC, e.event_id DESC;

-- name: context_stored
-- Whether an event is stored (a thread whose root is not predates us: fetch it from the homeserver).
SELECT EXISTS (SELECT 1 FROM room_events WHERE event_id = $1);

-- name: context_store_fetched
-- Keep a thread's event fetched from the homeserver as a line (once, by event_id); it summons nothing.
INSERT INTO room_events (event_id, room_id, sender, event_type, state_key, ts, content, said,
                         thread_root, reply_to, replaces)
VALUES ($1, $2, $3, $4, NULL, $5, $6, $7, $8, $9, NULL)
ON CONFLICT (event_id) DO NOTHING;

-- name: context_room_name
-- What a person calls the room: its name, else its canonical alias, else its id.
SELECT coalesce(
    (SELECT nullif(content->>'name', '') FROM room_events
      WHERE room_id = $1 AND event_type = 'm.room.name' AND state_key = '' AND NOT redacted
      ORDER BY ts DESC, event_id DESC LIMIT 1),
    (SELECT nullif(content->>'alias', '') FROM room_events
      WHERE room_id = $1 AND event_type = 'm.room.canonical_alias' AND state_key = '' AND NOT redacted
      ORDER BY ts DESC, event_id DESC LIMIT 1),
    $1);
