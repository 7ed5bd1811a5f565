-- name: desk_revoke_tokens
-- Refuse every token of contact $1 (of one of inboxes $2) whose chain began until now; its id, NULL: none there.
UPDATE desk_contacts SET tokens_valid_after = now()
 WHERE id = $1 AND inbox_id = ANY($2::bigint[])
RETURNING id;
