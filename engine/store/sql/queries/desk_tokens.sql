-- name: desk_revoke_tokens
-- Refuse every token of contact $1 (of one of inboxes $2) whose chain began until now; its id, NULL: none there.
UPDATE desk_contacts SET tokens_valid_after = now()
 WHERE id = $1 AND inbox_id = ANY($2::bigint[])
RETURNING id;

-- name: desk_revoked_among
-- Of contacts $1, those whose tokens were revoked, and when (the streams ask after their LISTEN comes back).
SELECT id, tokens_valid_after FROM desk_contacts WHERE id = ANY($1::bigint[]) AND tokens_valid_after IS NOT NULL;
