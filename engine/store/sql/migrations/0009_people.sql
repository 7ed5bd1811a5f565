-- The site's people (SPEC §8, §9): accounts, desk contacts, tickets, and the site's own facts where a
-- deployment provides them (orders, memberships). The engine reads a person's audience classes from
-- these; a bot reads a person's facts only as that person's own screen could show them.
--
-- Whose data a run is about. `agent_runs.subject` names the person a run is about, never the asker:
--   '@name:server' or a site's own account id  an account (people.user_id; a row there is optional)
--   'contact:<id>'                             a desk contact (desk_contacts.id): on the desk, the
--                                              conversation's customer; a guest has no account
-- The desk writes its conversation's contact there. A subject-less rooms run is about its asker (summon
-- already writes it so); a subject-less run anywhere else is about nobody — on the desk the asker is the
-- staff member, whose things a customer's answer must never be drawn from.
--
-- The boundary is the shape, not a careful WHERE. The bot's tools run as `summon_tools` (SET LOCAL ROLE
-- inside the tool's transaction): a role that owns nothing and is under FORCE ROW LEVEL SECURITY here.
-- The fact functions take no argument at all, so there is nowhere to put somebody else's id; the
-- policies decide whose rows they see, steered by a transaction-local setting that only
-- `agent_become_v1(run)` sets — and seals, so a `set_config` written by hand steers nothing.

-- Roles are cluster-wide and every test database of a cluster runs this: create it once, and refuse
-- (out loud) a role of that name that could log in or bypass row security.
DO $$
DECLARE
    existing pg_roles%ROWTYPE;
BEGIN
    SELECT * INTO existing FROM pg_roles WHERE rolname = 'summon_tools';
    IF NOT FOUND THEN
        BEGIN
            CREATE ROLE summon_tools NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;  -- another database's migration created it a moment ago
        END;
    ELSIF existing.rolcanlogin OR existing.rolbypassrls OR existing.rolsuper THEN
        RAISE EXCEPTION 'role summon_tools exists but may log in or bypass row security; it must not';
    END IF;
    -- Whoever runs the engine must be able to SET ROLE summon_tools (a superuser always can).
    IF NOT pg_has_role(current_user, 'summon_tools', 'MEMBER') THEN
        EXECUTE format('GRANT summon_tools TO %I', current_user);
    END IF;
END $$;

-- An account: a Matrix user, or a site's own account (a signed-in desk contact).
CREATE TABLE people (
    user_id      text PRIMARY KEY,
    display_name text,
    email        text,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- Somebody who wrote to the desk. `user_id` NULL: a guest, with no account to ask about.
CREATE TABLE desk_contacts (
    id         bigserial PRIMARY KEY,
    user_id    text REFERENCES people (user_id),
    name       text,
    email      text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX desk_contacts_account ON desk_contacts (user_id) WHERE user_id IS NOT NULL;

-- A ticket belongs to a contact (a guest's has no account) or to an account (a Matrix user's has no
-- contact); `raised_by_run` is set when a bot raised it.
CREATE TABLE tickets (
    id            bigserial PRIMARY KEY,
    contact_id    bigint REFERENCES desk_contacts (id),
    user_id       text REFERENCES people (user_id),
    subject       text NOT NULL CHECK (length(subject) BETWEEN 1 AND 300),
    body          text NOT NULL CHECK (length(body) <= 8000),
    status        text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'pending', 'resolved')),
    raised_by_run bigint REFERENCES agent_runs (id),
    created_at    timestamptz NOT NULL DEFAULT now(),
    CHECK (contact_id IS NOT NULL OR user_id IS NOT NULL)
);
CREATE INDEX tickets_contact ON tickets (contact_id);
CREATE INDEX tickets_account ON tickets (user_id);

-- The site's own facts, where a deployment provides them (a shop's orders, a club's memberships).
CREATE TABLE site_orders (
    id         bigserial PRIMARY KEY,
    user_id    text NOT NULL REFERENCES people (user_id),
    product    text NOT NULL,
    status     text NOT NULL DEFAULT 'paid' CHECK (status IN ('pending', 'paid', 'refunded', 'cancelled')),
    amount     numeric(12, 2),
    currency   text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX site_orders_account ON site_orders (user_id);

-- A tier (a subscription: `tier:<slug>`, and `subscribed`) or a role (`role:<name>`), held from `since`
-- until `until` (NULL: open-ended).
CREATE TABLE site_memberships (
    user_id text NOT NULL REFERENCES people (user_id),
    kind    text NOT NULL CHECK (kind IN ('tier', 'role')),
    name    text NOT NULL,
    since   timestamptz NOT NULL DEFAULT now(),
    until   timestamptz,
    PRIMARY KEY (user_id, kind, name)
);

-- The key agent_become_v1 seals its setting with. Nobody but the owner reads it.
CREATE TABLE agent_seal_key (
    only_one boolean PRIMARY KEY DEFAULT true CHECK (only_one),
    key      text NOT NULL
);
INSERT INTO agent_seal_key (key) VALUES (gen_random_uuid()::text || gen_random_uuid()::text);
REVOKE ALL ON agent_seal_key FROM PUBLIC;

-- Whom a run is about, resolved from the run row alone: (account, contact), either or both NULL. The one
-- place the asker is read, and only for a rooms run, where the asker is the person being answered.
CREATE FUNCTION agent_subject_v1(run bigint, OUT user_id text, OUT contact_id bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT CASE WHEN r.subject LIKE 'contact:%' THEN c.user_id
                WHEN r.subject IS NOT NULL THEN r.subject
                WHEN r.surface = 'rooms' THEN r.asked_by
           END,
           c.id
      FROM agent_runs r
      LEFT JOIN desk_contacts c
             ON c.id = CASE WHEN r.subject ~ '^contact:[0-9]{1,18}$' THEN substr(r.subject, 9)::bigint END
     WHERE r.id = run
$$;

-- The seal over (this backend, this transaction, the run): a setting copied from elsewhere, or written by
-- hand, does not match it.
CREATE FUNCTION agent_seal_v1(run bigint) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT encode(sha256(convert_to(
               k.key || ':' || pg_backend_pid() || ':' || extract(epoch FROM transaction_timestamp()) || ':' || run,
               'UTF8')), 'hex')
      FROM agent_seal_key k
$$;

-- Answer for this run's subject for the rest of this transaction: the only writer of `summon.run`.
-- True when there is somebody (an account or a contact) to answer for. A finished run answers for nobody.
CREATE FUNCTION agent_become_v1(run bigint) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    who record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM agent_runs r WHERE r.id = run AND r.status IN ('queued', 'running')) THEN
        RAISE EXCEPTION 'run % is not running', run USING ERRCODE = 'no_data_found';
    END IF;
    PERFORM set_config('summon.run', run::text, true);
    PERFORM set_config('summon.seal', agent_seal_v1(run), true);
    SELECT * INTO who FROM agent_subject_v1(run);
    RETURN who.user_id IS NOT NULL OR who.contact_id IS NOT NULL;
END $$;

-- The run this transaction answers for, if agent_become_v1 set it (and the seal holds); else NULL.
CREATE FUNCTION agent_run_v1() RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    claimed text := current_setting('summon.run', true);
BEGIN
    IF claimed IS NULL OR claimed !~ '^[0-9]+$' THEN
        RETURN NULL;
    END IF;
    IF current_setting('summon.seal', true) IS DISTINCT FROM agent_seal_v1(claimed::bigint) THEN
        RETURN NULL;
    END IF;
    RETURN claimed::bigint;
END $$;

-- The account this transaction answers for (NULL: none — a guest, or nobody).
CREATE FUNCTION agent_account_v1() RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT s.user_id FROM agent_subject_v1(agent_run_v1()) s
$$;

-- The desk contact this transaction answers for (NULL: none).
CREATE FUNCTION agent_contact_v1() RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT s.contact_id FROM agent_subject_v1(agent_run_v1()) s
$$;

-- The fact functions read tables under row security, so they refuse to run as a role that would skip it.
CREATE FUNCTION agent_under_rls_v1() RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = current_user AND (rolsuper OR rolbypassrls)) THEN
        RAISE EXCEPTION 'a personal fact is read as summon_tools (SET LOCAL ROLE), never as %', current_user
            USING ERRCODE = 'insufficient_privilege';
    END IF;
END $$;

-- Row security: a tool sees the rows of the person its transaction answers for, and nothing else. The
-- engine itself (the migrating role: the desk, the audience reader) keeps its access by a named policy,
-- since FORCE puts the owner under the policies too.
ALTER TABLE people ENABLE ROW LEVEL SECURITY;
ALTER TABLE people FORCE ROW LEVEL SECURITY;
ALTER TABLE desk_contacts ENABLE ROW LEVEL SECURITY;
ALTER TABLE desk_contacts FORCE ROW LEVEL SECURITY;
ALTER TABLE tickets ENABLE ROW LEVEL SECURITY;
ALTER TABLE tickets FORCE ROW LEVEL SECURITY;
ALTER TABLE site_orders ENABLE ROW LEVEL SECURITY;
ALTER TABLE site_orders FORCE ROW LEVEL SECURITY;
ALTER TABLE site_memberships ENABLE ROW LEVEL SECURITY;
ALTER TABLE site_memberships FORCE ROW LEVEL SECURITY;

CREATE POLICY people_engine ON people TO CURRENT_USER USING (true) WITH CHECK (true);
CREATE POLICY desk_contacts_engine ON desk_contacts TO CURRENT_USER USING (true) WITH CHECK (true);
CREATE POLICY tickets_engine ON tickets TO CURRENT_USER USING (true) WITH CHECK (true);
CREATE POLICY site_orders_engine ON site_orders TO CURRENT_USER USING (true) WITH CHECK (true);
CREATE POLICY site_memberships_engine ON site_memberships TO CURRENT_USER USING (true) WITH CHECK (true);

CREATE POLICY people_own ON people FOR SELECT TO summon_tools
    USING (user_id = (SELECT agent_account_v1()));
CREATE POLICY desk_contacts_own ON desk_contacts FOR SELECT TO summon_tools
    USING (id = (SELECT agent_contact_v1()) OR user_id = (SELECT agent_account_v1()));
-- A guest's tickets hang off their contact; an account's off the account or any contact linked to it.
CREATE POLICY tickets_own ON tickets FOR SELECT TO summon_tools
    USING (contact_id = (SELECT agent_contact_v1())
           OR user_id = (SELECT agent_account_v1())
           OR contact_id IN (SELECT c.id FROM desk_contacts c WHERE c.user_id = (SELECT agent_account_v1())));
-- The one write a bot makes: a ticket for the person it answers for, raised by that very run, which has
-- declared itself for this transaction (agent_raise_ticket_v1 does both).
CREATE POLICY tickets_raised_by_bot ON tickets FOR INSERT TO summon_tools
    WITH CHECK (raised_by_run = (SELECT agent_run_v1())
                AND raised_by_run::text = current_setting('summon.bot_ticket', true)
                AND contact_id IS NOT DISTINCT FROM (SELECT agent_contact_v1())
                AND user_id IS NOT DISTINCT FROM (SELECT agent_account_v1())
                AND status = 'open');
CREATE POLICY site_orders_own ON site_orders FOR SELECT TO summon_tools
    USING (user_id = (SELECT agent_account_v1()));
CREATE POLICY site_memberships_own ON site_memberships FOR SELECT TO summon_tools
    USING (user_id = (SELECT agent_account_v1()));

-- The person's own questions, for people and bots together. None takes an argument: whom they answer
-- for is the policies' business alone. NULL = nobody to ask about; an empty array = they have none.

-- Their account (NULL for a guest, or nobody). A Matrix user the site has no row for is still somebody.
CREATE FUNCTION my_profile_v1() RETURNS jsonb
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    own jsonb;
BEGIN
    PERFORM agent_under_rls_v1();
    IF agent_account_v1() IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT jsonb_build_object('user_id', p.user_id, 'display_name', p.display_name, 'email', p.email)
      INTO own FROM people p;
    RETURN coalesce(own, jsonb_build_object('user_id', agent_account_v1(), 'display_name', NULL, 'email', NULL));
END $$;

-- Their tickets, newest first (a guest's too, by their contact).
CREATE FUNCTION my_tickets_v1() RETURNS jsonb
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    PERFORM agent_under_rls_v1();
    IF agent_account_v1() IS NULL AND agent_contact_v1() IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN coalesce((SELECT jsonb_agg(jsonb_build_object('id', t.id, 'subject', t.subject, 'status', t.status,
                                                         'created_at', t.created_at) ORDER BY t.created_at DESC, t.id DESC)
                       FROM tickets t), '[]'::jsonb);
END $$;

-- Their orders, newest first (NULL without an account).
CREATE FUNCTION my_orders_v1() RETURNS jsonb
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    PERFORM agent_under_rls_v1();
    IF agent_account_v1() IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN coalesce((SELECT jsonb_agg(jsonb_build_object('id', o.id, 'product', o.product, 'status', o.status,
                                                         'amount', o.amount, 'currency', o.currency,
                                                         'created_at', o.created_at) ORDER BY o.created_at DESC, o.id DESC)
                       FROM site_orders o), '[]'::jsonb);
END $$;

-- Their tiers and roles held now (NULL without an account).
CREATE FUNCTION my_memberships_v1() RETURNS jsonb
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    PERFORM agent_under_rls_v1();
    IF agent_account_v1() IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN coalesce((SELECT jsonb_agg(jsonb_build_object('kind', m.kind, 'name', m.name, 'since', m.since,
                                                         'until', m.until) ORDER BY m.kind, m.name)
                       FROM site_memberships m
                      WHERE m.since <= now() AND (m.until IS NULL OR m.until > now())), '[]'::jsonb);
END $$;

-- Everything at once (NULL: nobody at all to ask about).
CREATE FUNCTION about_me_v1() RETURNS jsonb
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    PERFORM agent_under_rls_v1();
    IF agent_account_v1() IS NULL AND agent_contact_v1() IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN jsonb_build_object('profile', my_profile_v1(), 'tickets', my_tickets_v1(),
                              'orders', my_orders_v1(), 'memberships', my_memberships_v1());
END $$;

-- A bot hands the conversation to a person: a ticket for the run's subject (its contact and account taken
-- from the run, never from an argument), declared as the bot's own for this transaction only.
CREATE FUNCTION agent_raise_ticket_v1(run bigint, subject text, body text) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    raised tickets%ROWTYPE;
BEGIN
    PERFORM agent_under_rls_v1();
    IF NOT agent_become_v1(run) THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('summon.bot_ticket', run::text, true);
    INSERT INTO tickets (contact_id, user_id, subject, body, raised_by_run)
    VALUES (agent_contact_v1(), agent_account_v1(), agent_raise_ticket_v1.subject, agent_raise_ticket_v1.body, run)
    RETURNING * INTO raised;
    RETURN to_jsonb(raised);
END $$;

-- Function-only reach: nothing is anybody's by default — not these functions, not the engine's others
-- (existing, and those later migrations create), which the engine calls as their owner; the tools role
-- gets the person's own questions, the seal checks its policies call, and reads of the tables they filter.
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA public FROM PUBLIC;
ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_become_v1(bigint), agent_run_v1(), agent_account_v1(), agent_contact_v1(),
    agent_under_rls_v1(), my_profile_v1(), my_tickets_v1(), my_orders_v1(), my_memberships_v1(), about_me_v1(),
    agent_raise_ticket_v1(bigint, text, text)
    TO summon_tools;
GRANT SELECT ON people, desk_contacts, tickets, site_orders, site_memberships TO summon_tools;
GRANT INSERT (contact_id, user_id, subject, body, raised_by_run) ON tickets TO summon_tools;
GRANT USAGE ON SEQUENCE tickets_id_seq TO summon_tools;
