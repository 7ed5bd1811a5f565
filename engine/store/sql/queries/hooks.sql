-- A site's webhook deliveries, each acted on once (engine/store/hooks.py).

-- name: record_hook_delivery
-- Remember a site event's delivery ($1) and signature ($2); no row back = seen before (a replay: wake nothing).
INSERT INTO hook_deliveries (delivery, signature, key_id, event) VALUES ($1, $2, $3, $4)
ON CONFLICT DO NOTHING
RETURNING delivery;

-- name: prune_hook_deliveries
-- Forget hook deliveries received more than $1 seconds ago (a replay that old fails its timestamp check).
DELETE FROM hook_deliveries WHERE received_at < now() - make_interval(secs => $1);
