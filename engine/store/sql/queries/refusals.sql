-- Refused summonses, kept for the operator (engine/store/refusals.py).

-- name: record_refusal
-- Remember one refused summons: which bot, where, who asked, why (and for a ceiling, which window).
INSERT INTO summon_refusals (bot, surface, place, thread, trigger_event, asked_by, reason, detail)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8);

-- name: inspect_refusals
-- The latest refusals, newest first, optionally only room $1 or bot $2, at most $3.
SELECT id, bot, surface, place, thread, trigger_event, asked_by, reason, detail, created_at
  FROM summon_refusals
 WHERE ($1::text IS NULL OR place = $1) AND ($2::text IS NULL OR bot = $2)
 ORDER BY id DESC
 LIMIT $3;

-- name: prune_refusals
-- Forget refused summonses recorded more than $1 seconds ago.
DELETE FROM summon_refusals WHERE created_at < now() - make_interval(secs => $1);

-- name: refused_lately
-- How many summonses by person $1 were refused for reason $2 in the last $3 seconds (this one included).
SELECT count(*) FROM summon_refusals
 WHERE asked_by = $1 AND reason = $2 AND created_at > now() - make_interval(secs => $3);
