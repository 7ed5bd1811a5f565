-- Member bots' charters, sealed, and their clocks (engine/store/members.py).

-- name: insert_member_bot
-- A new charter $1 by $2 for $3, sealed under key $4 ($5 the nonce and ciphertext, $6 its plain size), with its
-- clock (on host bot $8, trigger 'member:<id>') started at $7: the first edition was the dry run.
WITH made AS (
    INSERT INTO member_bots (id, author, owner, key_id, sealed, size) VALUES ($1, $2, $3, $4, $5, $6)
    RETURNING id
), clock AS (
    INSERT INTO bot_clock (bot, trigger, last_fired_at, started_at)
    SELECT $8, 'member:' || id, $7, $7 FROM made
)
SELECT id FROM made;

-- name: member_bot
-- One charter's row, sealed.
SELECT id, author, owner, key_id, sealed, size, failures, created_at, updated_at FROM member_bots WHERE id = $1;

-- name: member_bot_for_update
-- One charter's row, locked for the rest of the transaction (an overwrite, a removal, a re-seal, a firing).
SELECT id, author, owner, key_id, sealed, size, failures, created_at, updated_at FROM member_bots
 WHERE id = $1 FOR UPDATE;

-- name: member_bots_owned_by
-- Every charter person $1 owns, oldest first.
SELECT id, author, owner, key_id, sealed, size, failures, created_at, updated_at FROM member_bots
 WHERE owner = $1 ORDER BY created_at, id;

-- name: member_bot_ids
-- Every charter's id, oldest first (the tick and a key rotation walk them).
SELECT id FROM member_bots ORDER BY created_at, id;

-- name: member_bots_not_under
-- The ids of the charters sealed under some key other than $1 (what a rotation has still to re-seal).
SELECT id FROM member_bots WHERE key_id <> $1 ORDER BY created_at, id;

-- name: reseal_member_bot
-- Charter $1 sealed again ($2 key, $3 nonce and ciphertext, $4 size); its author and owner kept unless $5/$6 say.
UPDATE member_bots
   SET key_id = $2, sealed = $3, size = $4, owner = coalesce($5, owner), updated_at = now()
 WHERE id = $1;

-- name: delete_member_bot
-- Charter $1 removed, with its clock; no row back = there was none.
WITH gone AS (
    DELETE FROM member_bots WHERE id = $1 RETURNING id
), clock AS (
    DELETE FROM bot_clock c USING gone WHERE c.trigger = 'member:' || gone.id
)
SELECT id FROM gone;

-- name: member_bot_failed
-- One more failed edition of charter $1; how many in a row now.
UPDATE member_bots SET failures = failures + 1 WHERE id = $1 RETURNING failures;

-- name: member_bot_succeeded
-- An edition of charter $1 went out: its outage (if any) is over. How many failures it cleared.
UPDATE member_bots m SET failures = 0 FROM member_bots o WHERE m.id = $1 AND o.id = m.id RETURNING o.failures;

-- name: cancel_member_run
-- Ask member-bot run $1 (a dry run that took too long) to stop, when it is unfinished.
UPDATE agent_runs SET cancel_requested = true, updated_at = now()
 WHERE id = $1 AND surface = 'members' AND status IN ('queued', 'running') AND NOT cancel_requested
RETURNING id;
