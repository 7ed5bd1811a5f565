-- A site may give a built-in tool its own file (content/tools/about_me.md): the built-in's `for:`, `needs:`
-- and `personal:`. Published like any tool, as kind 'builtin' (the engine's tool, the site's settings).
ALTER TABLE tools DROP CONSTRAINT tools_kind_check;
ALTER TABLE tools ADD CONSTRAINT tools_kind_check CHECK (kind IN ('openapi', 'module', 'builtin'));
