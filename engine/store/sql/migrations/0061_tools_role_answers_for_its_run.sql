-- The tools role answers only for the run its transaction became (issue 24, item 15). Two SECURITY DEFINER
-- functions it could call took any run id: agent_become_v1(run) made the transaction answer for any live
-- run's person, and agent_person_v1(run) named any run's person. Now:
--
-- - agent_become_v1 is the engine's alone: the engine becomes the run (as itself) before it takes the tools
--   role, and a transaction that became one run cannot become another.
-- - agent_person_v1(run) names the person only of the run the transaction became (else NULL); the engine's
--   own writer of memories (agent_remember_v1, for a finished run) asks agent_person_of_v1, which the tools
--   role may not call.
-- - agent_raise_ticket_v1(run, …) raises a ticket only for the run the transaction became.

CREATE OR REPLACE FUNCTION agent_become_v1(run bigint) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    who record;
    became bigint := agent_run_v1();
BEGIN
    IF became IS NOT NULL AND became IS DISTINCT FROM run THEN
        RAISE EXCEPTION 'this transaction answers for run %; it cannot become run %', became, run
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM agent_runs r WHERE r.id = run AND r.status IN ('queued', 'running')) THEN
        RAISE EXCEPTION 'run % is not running', run USING ERRCODE = 'no_data_found';
    END IF;
    PERFORM set_config('summon.run', run::text, true);
    PERFORM set_config('summon.seal', agent_seal_v1(run), true);
    SELECT * INTO who FROM agent_subject_v1(run);
    RETURN who.user_id IS NOT NULL OR who.contact_id IS NOT NULL;
END $$;
REVOKE EXECUTE ON FUNCTION agent_become_v1(bigint) FROM summon_tools;

-- Whom run $1 is about, as one key (the engine's: the tools role asks agent_person_v1).
CREATE FUNCTION agent_person_of_v1(run bigint) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT coalesce(s.user_id, 'contact:' || s.contact_id) FROM agent_subject_v1(run) s
$$;
REVOKE ALL ON FUNCTION agent_person_of_v1(bigint) FROM PUBLIC;

-- Whom run $1 is about, only when it is the run this transaction became (NULL otherwise).
CREATE OR REPLACE FUNCTION agent_person_v1(run bigint) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT agent_person_of_v1(run) WHERE run = agent_run_v1()
$$;

-- A ticket for the run this transaction became (the engine became it before taking the tools role); NULL:
-- nobody to raise it for.
CREATE OR REPLACE FUNCTION agent_raise_ticket_v1(run bigint, subject text, body text) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    raised tickets%ROWTYPE;
BEGIN
    PERFORM agent_under_rls_v1();
    IF run IS DISTINCT FROM agent_run_v1() THEN
        RAISE EXCEPTION 'this transaction does not answer for run %', run USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF agent_account_v1() IS NULL AND agent_contact_v1() IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('summon.bot_ticket', run::text, true);
    INSERT INTO tickets (contact_id, user_id, subject, body, raised_by_run)
    VALUES (agent_contact_v1(), agent_account_v1(), agent_raise_ticket_v1.subject, agent_raise_ticket_v1.body, run)
    RETURNING * INTO raised;
    RETURN to_jsonb(raised);
END $$;

-- The memories' writer, where pgvector made it (0042), and as summon_memories_v1 makes it from now on: the
-- person from agent_person_of_v1 (a finished run; no transaction became it).
CREATE OR REPLACE FUNCTION summon_remember_fn_v1() RETURNS void
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    EXECUTE $fn$
        CREATE OR REPLACE FUNCTION public.agent_remember_v1(run bigint, said text, embedding public.vector)
        RETURNS bigint
        LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $body$
            INSERT INTO memories (person, bot, said, room_id, run_id, embedding)
            SELECT agent_person_of_v1(r.id), r.bot, agent_remember_v1.said, r.room_id, r.id,
                   agent_remember_v1.embedding
              FROM agent_runs r
             WHERE r.id = run AND r.status = 'done' AND agent_person_of_v1(r.id) IS NOT NULL
            RETURNING id
        $body$
    $fn$;
    -- Only the engine (its owner) calls it; a tool, under its own role, never can.
    REVOKE ALL ON FUNCTION public.agent_remember_v1(bigint, text, public.vector) FROM PUBLIC;
END $$;

DO $$
BEGIN
    IF to_regclass('public.memories') IS NOT NULL THEN
        PERFORM summon_remember_fn_v1();
    END IF;
END $$;

-- Make the memories table if pgvector is there (0042's, with the writer above); NULL when it stands, else why not.
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
    PERFORM summon_remember_fn_v1();
    RETURN NULL;
END $$;
