-- memory: person+recall (SPEC §11): what a person told a bot, a 384-wide vector of it, found by meaning.
--
-- State, never a projection: it is what somebody said, not something a file declares. So it is theirs: row
-- security as on the people tables (0009) — the tools role reads only the rows of the person its transaction
-- answers for (agent_become_v1), and no client may write at all: there is deliberately no insert or update
-- policy, and the one writer is agent_remember_v1(run, …), SECURITY DEFINER, called by the worker after an
-- answer. It takes the run, never a person: the person is resolved from the run row, so a memory written for
-- somebody else is impossible by construction.
--
-- The vectors need pgvector, which not every PostgreSQL has (Debian 12 packages none; managed offerings do).
-- Where it is missing this migration creates nothing and says so; summon_memories_v1() is asked again when a
-- person+recall bot is published (so an extension installed later is taken up), and that bot is refused with
-- the reason in one line while every other bot runs.

-- Whom run $1 is about, as one key: the account, else the desk contact ('contact:<id>'); NULL: nobody.
CREATE FUNCTION agent_person_v1(run bigint) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT coalesce(s.user_id, 'contact:' || s.contact_id) FROM agent_subject_v1(run) s
$$;
GRANT EXECUTE ON FUNCTION agent_person_v1(bigint) TO summon_tools;

-- Make the memories table if pgvector is there (creating the extension when this role may); NULL when the
-- table stands, else why it cannot.
CREATE FUNCTION summon_memories_v1() RETURNS text
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
            person    text NOT NULL,                 -- agent_person_v1(run) of the run it was told in
            bot       text NOT NULL,
            said      text NOT NULL CHECK (length(said) BETWEEN 1 AND 4000),
            room_id   text,                          -- where it was said (a shared room recalls only its own)
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
    -- The only writer: what run $1's person said, as that run's bot heard it. No argument names a person.
    EXECUTE $fn$
        CREATE FUNCTION public.agent_remember_v1(run bigint, said text, embedding public.vector)
        RETURNS bigint
        LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $body$
            INSERT INTO memories (person, bot, said, room_id, run_id, embedding)
            SELECT agent_person_v1(r.id), r.bot, agent_remember_v1.said, r.room_id, r.id, agent_remember_v1.embedding
              FROM agent_runs r
             WHERE r.id = run AND r.status = 'done' AND agent_person_v1(r.id) IS NOT NULL
            RETURNING id
        $body$
    $fn$;
    -- Only the engine (its owner) calls it; a tool, under its own role, never can.
    REVOKE ALL ON FUNCTION public.agent_remember_v1(bigint, text, public.vector) FROM PUBLIC;
    RETURN NULL;
END $$;

DO $$
DECLARE
    why text := summon_memories_v1();
BEGIN
    IF why IS NOT NULL THEN
        RAISE NOTICE 'memories (person+recall) are not available: %', why;
    END IF;
END $$;
