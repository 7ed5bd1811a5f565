-- Publishing: compiled content projected into its rows, one publish at a time (engine/store/content.py).

-- name: publish_lock
-- One publish at a time (two services watching the same content must not interleave their rows).
SELECT pg_advisory_xact_lock(hashtext('summon.publish'));

-- name: upsert_bot
-- Publish one compiled bot (the projection of its file).
INSERT INTO bots (slug, name, puppet, surfaces, compiled, published_at, withdrawn_at)
VALUES ($1, $2, $3, $4, $5, now(), NULL)
ON CONFLICT (slug) DO UPDATE
   SET name = EXCLUDED.name, puppet = EXCLUDED.puppet, surfaces = EXCLUDED.surfaces,
       compiled = EXCLUDED.compiled, published_at = now(), withdrawn_at = NULL;

-- name: withdraw_bots_except
-- Bots whose files are gone are withdrawn (kept for their runs' history).
UPDATE bots SET withdrawn_at = now() WHERE withdrawn_at IS NULL AND NOT (slug = ANY($1::text[]));

-- name: upsert_skill
-- Publish one compiled skill.
INSERT INTO skills (name, description, compiled, published_at, withdrawn_at)
VALUES ($1, $2, $3, now(), NULL)
ON CONFLICT (name) DO UPDATE
   SET description = EXCLUDED.description, compiled = EXCLUDED.compiled, published_at = now(), withdrawn_at = NULL;

-- name: withdraw_skills_except
-- Skills whose files are gone are withdrawn.
UPDATE skills SET withdrawn_at = now() WHERE withdrawn_at IS NULL AND NOT (name = ANY($1::text[]));

-- name: upsert_tool
-- Publish one compiled tool.
INSERT INTO tools (name, kind, compiled, published_at, withdrawn_at)
VALUES ($1, $2, $3, now(), NULL)
ON CONFLICT (name) DO UPDATE
   SET kind = EXCLUDED.kind, compiled = EXCLUDED.compiled, published_at = now(), withdrawn_at = NULL;

-- name: withdraw_tools_except
-- Tools whose files are gone are withdrawn.
UPDATE tools SET withdrawn_at = now() WHERE withdrawn_at IS NULL AND NOT (name = ANY($1::text[]));

-- name: upsert_command
-- Publish one compiled command: its client-visible shape apart from its prompt.
INSERT INTO commands (name, bot, tool, surfaces, shape, prompt, compiled, published_at, withdrawn_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, now(), NULL)
ON CONFLICT (name) DO UPDATE
   SET bot = EXCLUDED.bot, tool = EXCLUDED.tool, surfaces = EXCLUDED.surfaces, shape = EXCLUDED.shape,
       prompt = EXCLUDED.prompt, compiled = EXCLUDED.compiled, published_at = now(), withdrawn_at = NULL;

-- name: withdraw_commands_except
-- Commands whose files are gone are withdrawn.
UPDATE commands SET withdrawn_at = now() WHERE withdrawn_at IS NULL AND NOT (name = ANY($1::text[]));

-- name: clear_bot_links
-- Forget which skills and tools the bots had; the publish writes them again.
WITH s AS (DELETE FROM bot_skills) DELETE FROM bot_tools;

-- name: insert_bot_skills
-- Which skills each bot has: parallel arrays of bot slugs and skill names.
INSERT INTO bot_skills (bot, skill) SELECT * FROM unnest($1::text[], $2::text[]);

-- name: insert_bot_tools
-- Which tools each bot has of its own: parallel arrays of bot slugs and tool names.
INSERT INTO bot_tools (bot, tool) SELECT * FROM unnest($1::text[], $2::text[]);
