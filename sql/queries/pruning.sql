-- What the tick prunes (engine/run/ticks.py, `prune`).

-- name: prune_hook_deliveries
-- Forget hook deliveries received more than $1 seconds ago (a replay that old fails its timestamp check).
DELETE FROM hook_deliveries WHERE received_at < now() - make_interval(secs => $1);

-- name: prune_refusals
-- Forget refused summonses recorded more than $1 seconds ago.
DELETE FROM summon_refusals WHERE created_at < now() - make_interval(secs => $1);
