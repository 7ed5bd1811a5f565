-- A run's address is its surface's, opaque to the engine (issue 26 item 1): the engine-owned tables keep it as
-- `place` and `thread`, no longer in columns named for Matrix (room_id, thread_root). The surfaces' own tables
-- (rooms, room_events, outbox, offers, room actions, the door's, the desk's) keep their own names.
--
-- A rename carries indexes, constraints and row-security policies with it, but not the bodies of functions,
-- which are text: the memories' writer (agent_remember_v1, made by summon_remember_fn_v1) and the memories
-- table's maker (summon_memories_v1, for a database that gains pgvector later) are made again here.
ALTER TABLE agent_runs RENAME COLUMN room_id TO place;
ALTER TABLE agent_runs RENAME COLUMN thread_root TO thread;
ALTER INDEX IF EXISTS agent_runs_room RENAME TO agent_runs_place_live;
ALTER INDEX IF EXISTS agent_runs_in_room RENAME TO agent_runs_in_place;
ALTER TABLE summon_refusals RENAME COLUMN room_id TO place;
ALTER TABLE summon_refusals RENAME COLUMN thread_root TO thread;
ALTER INDEX IF EXISTS summon_refusals_room RENAME TO summon_refusals_place;

-- The memories' writer, as 0061 made it, reading the run's place.
CREATE OR REPLACE FUNCTION summon_remember_fn_v1() RETURNS void
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    EXECUTE $fn$
        CREATE OR REPLACE FUNCTION public.agent_remember_v1(run bigint, said text, embedding public.vector)
        RETURNS bigint
        LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $body$
            INSERT INTO memories (person, bot, said, place, run_id, embedding)
            SELECT agent_person_of_v1(r.id), r.bot, agent_remember_v1.said, r.place, r.id,
                   agent_remember_v1.embedding
              FROM agent_runs r
             WHERE r.id = run AND r.status = 'done' AND agent_person_of_v1(r.id) IS NOT NULL
            RETURNING id
        $body$
    $fn$;
    -- Only the engine (its owner) calls it; a tool, under its own role, never can.
    REVOKE ALL ON FUNCTION public.agent_remember_v1(bigint, text, public.vector) FROM PUBLIC;
END $$;

-- Where pgvector made the memories table, its column is renamed and its writer made again.
DO $$
BEGIN
    IF to_regclass('public.memories') IS NOT NULL THEN
        ALTER TABLE public.memories RENAME COLUMN room_id TO place;
        PERFORM summon_remember_fn_v1();
    END IF;
END $$;

-- The memories table's maker (0061's), for a database that gains pgvector later: with `place`.
CREATE OR REPLACE FUNCTION summon_memories_v1() RETURNS text
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    IF to_regclass('public.memories') IS NOT NULL THEN
        RETURN NULL;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector') THEN
        IF NOT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
            RETURN 'the database has no pgvector extension (install it, e.g. the postgresql-16-pgvector package, or use a PostgreSQL that has it)';
        END IF;
        BEGIN
            CREATE EXTENSION vector SCHEMA public;
        EXCEPTION WHEN insufficient_privilege THEN
            RETURN 'pgvector is installed but this role may not create it (a superuser runs: CREATE EXTENSION vector)';
        END;
    END IF;
    EXECUTE $ddl$
        CREATE TABLE public.memories (
            id        bigserial PRIMARY KEY,
            person    text NOT NULL,                 -- agent_person_of_v1(run) of the run it was told in
            bot       text NOT NULL,
            said      text NOT NULL CHECK (length(said) BETWEEN 1 AND 4000),
            place     text,                          -- where it was said (a shared place recalls only its own)
            run_id    bigint REFERENCES agent_runs (id) ON DELETE SET NULL,
            embedding public.vector(384) NOT NULL,
            at        timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX memories_of ON public.memories (person, bot, id);
        CREATE INDEX memories_near ON public.memories USING hnsw (embedding public.vector_cosine_ops);
        ALTER TABLE public.memories ENABLE ROW LEVEL SECURITY;
        ALTER TABLE public.memories FORCE ROW LEVEL SECURITY;
        CREATE POLICY memories_engine ON public.memories TO CURRENT_USER USING (true) WITH CHECK (true);
        CREATE POLICY memories_own ON public.memories FOR SELECT TO summon_tools
            USING (person = agent_person_v1(agent_run_v1()));
        GRANT SELECT ON public.memories TO summon_tools;
    $ddl$;
    -- What a recall reads with, as the tools role: a vector from its text form, and the cosine distance.
    GRANT EXECUTE ON FUNCTION public.vector_in(cstring, oid, integer), public.vector_out(public.vector),
        public.cosine_distance(public.vector, public.vector) TO summon_tools;
    PERFORM summon_remember_fn_v1();
    RETURN NULL;
END $$;
