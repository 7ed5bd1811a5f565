-- Queries only the tests run: reading the schema back, and what a publish wrote.

-- name: describe_columns
-- The schema's columns, for comparing a migrated database with engine/store/sql/schema.txt.
SELECT format('column %s.%s %s%s%s', c.table_name, c.column_name, c.data_type,
              CASE WHEN c.is_nullable = 'NO' THEN ' not null' ELSE '' END,
              coalesce(' default ' || c.column_default, '')) AS line
  FROM information_schema.columns c
 WHERE c.table_schema = 'public'
 ORDER BY c.table_name, c.ordinal_position;

-- name: describe_indexes
-- The schema's indexes.
SELECT format('index %s', indexdef) AS line FROM pg_indexes WHERE schemaname = 'public'
 ORDER BY tablename, indexname;

-- name: describe_constraints
-- The schema's constraints.
SELECT format('constraint %s.%s %s', conrelid::regclass, conname, pg_get_constraintdef(oid)) AS line
  FROM pg_constraint WHERE connamespace = 'public'::regnamespace
 ORDER BY conrelid::regclass::text, conname;

-- name: describe_triggers
-- The schema's triggers.
SELECT format('trigger %s', pg_get_triggerdef(oid)) AS line FROM pg_trigger
 WHERE NOT tgisinternal ORDER BY tgrelid::regclass::text, tgname;

-- name: describe_functions
-- The schema's functions.
SELECT format('function %s(%s) returns %s', p.proname, pg_get_function_arguments(p.oid),
              pg_get_function_result(p.oid)) AS line
  FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace ORDER BY p.proname, line;

-- name: published_bots
-- Every bot that is published now.
SELECT slug, name, puppet, surfaces, compiled FROM bots WHERE withdrawn_at IS NULL ORDER BY slug;

-- name: published_skills
-- Every skill that is published now.
SELECT name, description, compiled FROM skills WHERE withdrawn_at IS NULL ORDER BY name;

-- name: published_tools
-- Every tool that is published now.
SELECT name, kind, compiled FROM tools WHERE withdrawn_at IS NULL ORDER BY name;

-- name: published_commands
-- Every command that is published now, with what a client may see of it.
SELECT name, bot, tool, surfaces, shape, prompt FROM commands WHERE withdrawn_at IS NULL ORDER BY name;

-- name: bot_skill_names
-- The skills bot $1 has, by name.
SELECT skill FROM bot_skills WHERE bot = $1 ORDER BY skill;

-- name: bot_tool_names
-- The tools bot $1 has of its own, by name.
SELECT tool FROM bot_tools WHERE bot = $1 ORDER BY tool;
