-- The ledger of applied migrations (engine/store/migrate.py).

-- name: migration_lock
-- One migrator at a time (released when the connection closes).
SELECT pg_advisory_lock(53301);

-- name: migrations_table
-- The ledger of applied migrations.
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    text PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: applied_migrations
-- Which migrations have been applied.
SELECT version FROM schema_migrations;

-- name: record_migration
-- Note one migration as applied.
INSERT INTO schema_migrations (version) VALUES ($1);
