"""Whose data a run is about (SPEC §8), against real PostgreSQL: personal tools answer for the run's
subject — never the asker — and see only what that person's own screen could show them, because the tools
role is under row security steered by a setting only agent_become_v1 writes (and seals)."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from appservice.kinds import KINDS
from appservice.matrix.delivery.staff import TICKET_MARKER, tell_staff
from appservice.matrix.tables.outbox import OutboxTables
from appservice.matrix.tables.rooms import RoomTables
from engine.content.strings import Strings, parse_strings
from engine.errors import StoreRefused, ToolError
from engine.store import Store, Tx, migrate
from engine.store.queries import Queries
from engine.tools.base import RunRef
from engine.tools.personal import make_about_me, make_raise_ticket, site_classes
from tests.store import TestStore

pytestmark = pytest.mark.db

KIT_STRINGS = Path(__file__).resolve().parents[2] / "engine" / "content" / "kit" / "strings.md"
STAFF_ROOM = "!staff:localhost"
SERVICE = "@summon:localhost"

CUSTOMER = "@xena:localhost"   # X: the customer a desk run is about
AGENT = "@yuri:localhost"      # Y: the staff member who asked on the desk
ROOMS_PERSON = "@rita:localhost"

# The store's own statements, for a test that runs them on a connection of its own beside its own SQL (a
# ``Tx`` runs only the store's methods).
Q = Queries()

PERSONAL_TABLES = ("people", "desk_contacts", "tickets", "site_orders", "site_memberships")


def kit_words() -> Strings:
    parsed = parse_strings("strings.md", KIT_STRINGS.read_text(encoding="utf-8"), KINDS.sections)
    assert isinstance(parsed, Strings), parsed
    return parsed


WORDS = kit_words()


def said(key: str) -> str:
    words = WORDS.get("tools", key)
    assert words is not None
    return words


async def new_run(db: Store, *, surface: str, asked_by: str | None, subject: str | None) -> RunRef:
    run_id = await db.runs.insert(
        bot="helper", surface=surface, place="!room:localhost" if surface == "rooms" else None,
        thread=None, trigger_event=None, asked_by=asked_by, subject=subject, prompt="hello", context={},
        limits={"steps": 8, "spend": 0.25, "minutes": 5}, max_attempts=3,
    )
    assert run_id is not None
    return RunRef(id=int(run_id), bot="helper", surface=surface)


@pytest.fixture
async def site(db: TestStore) -> dict[str, Any]:
    """A bot, three accounts with their own things, a contact for X, and a guest."""
    await db.content.upsert_bot("helper", "Helper", "@bot_helper:localhost", ["rooms", "desk"], {})
    async with db.pool.acquire() as conn, conn.transaction():
        await conn.executemany("INSERT INTO people (user_id, display_name) VALUES ($1, $2)",
                               [(CUSTOMER, "Xena"), (AGENT, "Yuri"), (ROOMS_PERSON, "Rita")])
        x_contact = await conn.fetchval("INSERT INTO desk_contacts (user_id, name) VALUES ($1, 'Xena') RETURNING id",
                                        CUSTOMER)
        y_contact = await conn.fetchval("INSERT INTO desk_contacts (user_id, name) VALUES ($1, 'Yuri') RETURNING id",
                                        AGENT)
        guest = await conn.fetchval("INSERT INTO desk_contacts (name) VALUES ('A guest') RETURNING id")
        await conn.executemany("INSERT INTO site_orders (user_id, product) VALUES ($1, $2)",
                               [(CUSTOMER, "x-book"), (AGENT, "y-lamp"), (ROOMS_PERSON, "r-kettle")])
        await conn.executemany("INSERT INTO site_memberships (user_id, kind, name) VALUES ($1, $2, $3)",
                               [(AGENT, "tier", "gold"), (AGENT, "role", "staff"), (CUSTOMER, "tier", "basic")])
        await conn.executemany("INSERT INTO tickets (contact_id, user_id, subject, body) VALUES ($1, $2, $3, '')",
                               [(x_contact, CUSTOMER, "x-ticket"), (y_contact, AGENT, "y-ticket"),
                                (guest, None, "guest-ticket")])
    return {"x_contact": x_contact, "y_contact": y_contact, "guest": guest}


async def about(db: Store, run: RunRef) -> Any:
    text = await make_about_me(db, lambda: WORDS)(run, {})
    try:
        return json.loads(text)
    except ValueError:
        return text


def products(facts: Mapping[str, Any]) -> set[str]:
    return {order["product"] for order in facts["orders"]}


def subjects(facts: Mapping[str, Any]) -> set[str]:
    return {ticket["subject"] for ticket in facts["tickets"]}


# --- whose facts -------------------------------------------------------------------------------------------


async def test_a_desk_run_about_a_customer_asked_by_an_agent_answers_about_the_customer(
    db: TestStore, site: dict[str, Any],
) -> None:
    run = await new_run(db, surface="desk", asked_by=AGENT, subject=f"contact:{site['x_contact']}")
    facts = await about(db, run)
    assert facts["profile"]["user_id"] == CUSTOMER
    assert products(facts) == {"x-book"}
    assert subjects(facts) == {"x-ticket"}
    assert [m["name"] for m in facts["memberships"]] == ["basic"]
    assert AGENT not in json.dumps(facts) and "y-lamp" not in json.dumps(facts) and "gold" not in json.dumps(facts)


async def test_a_desk_run_with_no_subject_is_about_nobody_never_the_agent(db: TestStore, site: dict[str, Any]) -> None:
    run = await new_run(db, surface="desk", asked_by=AGENT, subject=None)
    assert await about(db, run) == said("nobody")


async def test_a_rooms_run_is_about_its_asker(db: TestStore, site: dict[str, Any]) -> None:
    run = await new_run(db, surface="rooms", asked_by=ROOMS_PERSON, subject=ROOMS_PERSON)
    facts = await about(db, run)
    assert facts["profile"]["display_name"] == "Rita"
    assert products(facts) == {"r-kettle"}
    # Even with no subject written, a rooms run is about whoever asked (resolved in SQL).
    bare = await new_run(db, surface="rooms", asked_by=ROOMS_PERSON, subject=None)
    assert products(await about(db, bare)) == {"r-kettle"}


async def test_a_guest_has_nobody_for_account_facts_but_their_own_contacts_tickets(
    db: TestStore, site: dict[str, Any],
) -> None:
    run = await new_run(db, surface="desk", asked_by=AGENT, subject=f"contact:{site['guest']}")
    facts = await about(db, run)
    assert facts["profile"] == facts["orders"] == facts["memberships"] == said("no_account")
    assert subjects(facts) == {"guest-ticket"}


async def test_empty_is_not_null(db: TestStore, site: dict[str, Any]) -> None:
    await db.pool.execute("INSERT INTO people (user_id) VALUES ('@new:localhost')")
    run = await new_run(db, surface="rooms", asked_by="@new:localhost", subject="@new:localhost")
    facts = await about(db, run)
    assert facts["orders"] == facts["memberships"] == facts["tickets"] == said("none")
    assert said("none") != said("no_account")
    # And in SQL itself: an empty array, not NULL.
    async with db.transaction("test_empty_sql") as tx:
        await tx.people.become(run.id)
        await tx.people.as_tools()
        raw = await tx.people.about_me()
    assert raw is not None
    assert raw["orders"] == [] and raw["memberships"] == [] and raw["tickets"] == []
    assert raw["profile"]["user_id"] == "@new:localhost"


async def test_a_matrix_user_the_site_has_no_row_for_is_somebody_with_none(db: TestStore, site: dict[str, Any]) -> None:
    run = await new_run(db, surface="rooms", asked_by="@stranger:localhost", subject="@stranger:localhost")
    facts = await about(db, run)
    assert facts["profile"]["user_id"] == "@stranger:localhost"
    assert facts["orders"] == said("none")


# --- row security ------------------------------------------------------------------------------------------


async def test_the_tools_role_owns_nothing_cannot_log_in_and_cannot_bypass_row_security(db: TestStore) -> None:
    role = await db.pool.fetchrow(
        "SELECT rolsuper, rolbypassrls, rolcanlogin FROM pg_roles WHERE rolname = 'summon_tools'")
    assert role is not None and not any(role.values())
    owned = await db.pool.fetchval(
        "SELECT count(*) FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner WHERE r.rolname = 'summon_tools'")
    owned += await db.pool.fetchval(
        "SELECT count(*) FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner WHERE r.rolname = 'summon_tools'")
    assert owned == 0
    for table in PERSONAL_TABLES:
        forced = await db.pool.fetchrow(
            "SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE relname = $1", table)
        assert forced is not None and forced["relrowsecurity"] and forced["relforcerowsecurity"], table


async def test_without_agent_become_the_tools_role_sees_nothing(db: TestStore, site: dict[str, Any]) -> None:
    async with db.pool.acquire() as conn, conn.transaction():
        assert await conn.fetchval("SELECT count(*) FROM people") == 3  # the engine itself sees them
        await conn.execute(Q["personal_as_tools"])
        assert await conn.fetchval("SELECT current_user") == "summon_tools"
        for table in PERSONAL_TABLES:
            assert await conn.fetchval(f"SELECT count(*) FROM {table}") == 0, table
        assert await conn.fetchval(Q["personal_about_me"]) is None
    for table in ("agent_runs", "room_events", "outbox", "agent_seal_key"):
        async with db.pool.acquire() as conn, conn.transaction():
            await conn.execute(Q["personal_as_tools"])
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.fetchval(f"SELECT count(*) FROM {table}")


async def test_the_role_and_the_subject_last_only_for_the_transaction(db: TestStore, site: dict[str, Any]) -> None:
    run = await new_run(db, surface="desk", asked_by=AGENT, subject=f"contact:{site['x_contact']}")
    async with db.pool.acquire() as conn:
        async with conn.transaction():
            await conn.fetchval(Q["personal_become"], run.id)
            await conn.execute(Q["personal_as_tools"])
            assert await conn.fetchval("SELECT count(*) FROM site_orders") == 1
        assert await conn.fetchval("SELECT current_user") != "summon_tools"
        assert await conn.fetchval("SELECT current_setting('summon.run', true)") in (None, "")


async def test_becoming_run_a_never_shows_run_bs_subject(db: TestStore, site: dict[str, Any]) -> None:
    a = await new_run(db, surface="desk", asked_by=AGENT, subject=f"contact:{site['x_contact']}")
    b = await new_run(db, surface="rooms", asked_by=AGENT, subject=AGENT)
    async with db.pool.acquire() as conn, conn.transaction():
        assert await conn.fetchval(Q["personal_become"], a.id) is True
        await conn.execute(Q["personal_as_tools"])
        assert {r["product"] for r in await conn.fetch("SELECT product FROM site_orders")} == {"x-book"}
        assert {r["user_id"] for r in await conn.fetch("SELECT user_id FROM people")} == {CUSTOMER}
        assert await conn.fetchval("SELECT count(*) FROM tickets WHERE user_id = $1", AGENT) == 0
        assert await conn.fetchval("SELECT count(*) FROM site_memberships WHERE user_id = $1", AGENT) == 0
        assert await conn.fetchval("SELECT count(*) FROM desk_contacts WHERE id = $1", site["y_contact"]) == 0
    facts_b = await about(db, b)
    assert products(facts_b) == {"y-lamp"}


async def test_a_setting_written_by_hand_steers_nothing(db: TestStore, site: dict[str, Any]) -> None:
    a = await new_run(db, surface="desk", asked_by=AGENT, subject=f"contact:{site['x_contact']}")
    b = await new_run(db, surface="rooms", asked_by=AGENT, subject=AGENT)
    async with db.pool.acquire() as conn:
        async with conn.transaction():
            await conn.execute(Q["personal_as_tools"])
            await conn.execute("SELECT set_config('summon.run', $1, true)", str(b.id))
            assert await conn.fetchval("SELECT count(*) FROM site_orders") == 0
        async with conn.transaction():
            # Become A, then point the setting at B: the seal is A's, so B's rows stay hidden.
            await conn.fetchval(Q["personal_become"], a.id)
            await conn.execute(Q["personal_as_tools"])
            await conn.execute("SELECT set_config('summon.run', $1, true)", str(b.id))
            assert await conn.fetchval("SELECT count(*) FROM site_orders") == 0
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.fetchval("SELECT agent_seal_v1($1)", b.id)


async def test_the_seal_does_not_carry_into_another_transaction(db: TestStore, site: dict[str, Any]) -> None:
    a = await new_run(db, surface="desk", asked_by=AGENT, subject=f"contact:{site['x_contact']}")
    async with db.pool.acquire() as conn:
        async with conn.transaction():
            await conn.fetchval(Q["personal_become"], a.id)
            await conn.execute(Q["personal_as_tools"])
            kept = await conn.fetchval("SELECT current_setting('summon.seal')")
        async with conn.transaction():
            await conn.execute(Q["personal_as_tools"])
            await conn.execute("SELECT set_config('summon.run', $1, true), set_config('summon.seal', $2, true)",
                               str(a.id), kept)
            assert await conn.fetchval("SELECT count(*) FROM site_orders") == 0


async def test_the_fact_functions_refuse_a_role_that_skips_row_security(db: TestStore, site: dict[str, Any]) -> None:
    with pytest.raises(StoreRefused, match="summon_tools") as refused:
        await db.people.about_me()
    assert isinstance(refused.value.__cause__, asyncpg.InsufficientPrivilegeError)


async def test_a_finished_run_answers_for_nobody(db: TestStore, site: dict[str, Any]) -> None:
    run = await new_run(db, surface="rooms", asked_by=ROOMS_PERSON, subject=ROOMS_PERSON)
    await db.pool.execute("UPDATE agent_runs SET status = 'done' WHERE id = $1", run.id)
    with pytest.raises(Exception, match="not running"):
        await about(db, run)


# --- the shape: no person argument anywhere ----------------------------------------------------------------


async def test_no_function_the_tools_role_may_call_takes_a_person(db: TestStore) -> None:
    rows = await db.pool.fetch(
        """SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS args, p.prosrc
             FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = 'public' AND has_function_privilege('summon_tools', p.oid, 'EXECUTE')""")
    callable_by_tools = {r["proname"]: r["args"] for r in rows}
    assert callable_by_tools == {
        # Not agent_become_v1 (0061): the engine becomes the run before it takes the tools role.
        "agent_raise_ticket_v1": "run bigint, subject text, body text",
        "agent_run_v1": "", "agent_account_v1": "", "agent_contact_v1": "", "agent_under_rls_v1": "",
        "my_profile_v1": "", "my_tickets_v1": "", "my_orders_v1": "", "my_memberships_v1": "", "about_me_v1": "",
        # person+recall (0042): whom a run is about as one key, and pgvector's own functions a recall reads with.
        "agent_person_v1": "run bigint",
        "vector_in": "cstring, oid, integer", "vector_out": "vector", "cosine_distance": "vector, vector",
    }
    for row in rows:
        assert not re.search(r"asked_by|asker|sender", row["prosrc"]), f"{row['proname']} mentions the asker"
    # The resolver is the engine's, not the tools': it is the one place the asker is read.
    assert not await db.pool.fetchval(
        "SELECT has_function_privilege('summon_tools', 'agent_subject_v1(bigint)', 'EXECUTE')")


async def test_the_tools_role_answers_only_for_the_run_its_transaction_became(
    db: TestStore, site: dict[str, Any],
) -> None:
    """Issue 24, item 15: the two SECURITY DEFINER functions the tools role could call took any run id —
    agent_become_v1 made the transaction answer for any live run's person, agent_person_v1 named any run's."""
    a = await new_run(db, surface="desk", asked_by=AGENT, subject=f"contact:{site['x_contact']}")
    b = await new_run(db, surface="rooms", asked_by=AGENT, subject=AGENT)
    async with db.pool.acquire() as conn:
        async with conn.transaction():
            assert await conn.fetchval(Q["personal_become"], a.id) is True
            await conn.execute(Q["personal_as_tools"])
            assert await conn.fetchval("SELECT agent_person_v1($1)", a.id) == CUSTOMER
            assert await conn.fetchval("SELECT agent_person_v1($1)", b.id) is None  # never B's person
        async with conn.transaction():
            await conn.fetchval(Q["personal_become"], a.id)
            await conn.execute(Q["personal_as_tools"])
            with pytest.raises(asyncpg.InsufficientPrivilegeError):  # the tools role becomes no run at all
                await conn.fetchval(Q["personal_become"], b.id)
        async with conn.transaction():
            await conn.execute(Q["personal_as_tools"])
            with pytest.raises(asyncpg.InsufficientPrivilegeError):  # …not even as the first thing it does
                await conn.fetchval(Q["personal_become"], b.id)
        async with conn.transaction():
            await conn.fetchval(Q["personal_become"], a.id)
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="cannot become run"):  # nor the engine, twice
                await conn.fetchval(Q["personal_become"], b.id)
        async with conn.transaction():
            await conn.fetchval(Q["personal_become"], a.id)
            await conn.execute(Q["personal_as_tools"])
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="does not answer for run"):
                await conn.fetchval(Q["personal_raise_ticket"], b.id, "s", "b")
    assert await db.pool.fetchval("SELECT count(*) FROM tickets WHERE raised_by_run = $1", b.id) == 0


# --- raise_ticket ------------------------------------------------------------------------------------------


async def test_raise_ticket_for_a_guest_belongs_to_the_contact_carries_no_account_and_tells_the_staff(
    db: TestStore, site: dict[str, Any],
) -> None:
    run = await new_run(db, surface="desk", asked_by=None, subject=f"contact:{site['guest']}")

    async def notify(tx: Tx, ticket: Mapping[str, Any]) -> None:
        await tell_staff(tx, STAFF_ROOM, SERVICE, ticket)

    answer = await make_raise_ticket(db, lambda: WORDS, notify)(run, {"subject": "Refund", "body": "Wants money back."})
    ticket = await db.pool.fetchrow("SELECT * FROM tickets WHERE raised_by_run = $1", run.id)
    assert ticket is not None
    assert ticket["contact_id"] == site["guest"] and ticket["user_id"] is None
    assert (ticket["subject"], ticket["body"], ticket["status"]) == ("Refund", "Wants money back.", "open")
    assert answer == said("ticket_raised").format(ticket=f"#{ticket['id']}")
    notice = await db.pool.fetchrow("SELECT * FROM outbox WHERE txn_id = $1", f"summon-ticket-{ticket['id']}")
    assert notice is not None
    assert (notice["room_id"], notice["sender"], notice["run_id"]) == (STAFF_ROOM, SERVICE, run.id)
    assert notice["content"]["msgtype"] == "m.notice" and "Refund" in notice["content"]["body"]
    assert notice["content"][TICKET_MARKER]["contact_id"] == site["guest"]
    # The guest now sees it among their own tickets.
    seen = await about(db, await new_run(db, surface="desk", asked_by=None, subject=f"contact:{site['guest']}"))
    assert subjects(seen) == {"guest-ticket", "Refund"}


async def test_raise_ticket_for_a_matrix_user_the_site_has_no_row_for(db: TestStore, site: dict[str, Any]) -> None:
    """A room asker is somebody even with no `people` row: their ticket is raised, on their account."""
    run = await new_run(db, surface="rooms", asked_by="@stranger:localhost", subject=None)
    answer = await make_raise_ticket(db, lambda: WORDS)(run, {"subject": "Broken link", "body": "The docs 404."})
    ticket = await db.pool.fetchrow("SELECT * FROM tickets WHERE raised_by_run = $1", run.id)
    assert ticket is not None and (ticket["contact_id"], ticket["user_id"]) == (None, "@stranger:localhost")
    assert answer == said("ticket_raised").format(ticket=f"#{ticket['id']}")


async def test_raise_ticket_on_the_desk_is_the_customers_not_the_agents(db: TestStore, site: dict[str, Any]) -> None:
    run = await new_run(db, surface="desk", asked_by=AGENT, subject=f"contact:{site['x_contact']}")
    await make_raise_ticket(db, lambda: WORDS)(run, {"subject": "Late parcel", "body": "Where is it?"})
    ticket = await db.pool.fetchrow("SELECT * FROM tickets WHERE raised_by_run = $1", run.id)
    assert ticket is not None and (ticket["contact_id"], ticket["user_id"]) == (site["x_contact"], CUSTOMER)


async def test_raise_ticket_with_nobody_to_raise_it_for_says_so_and_writes_nothing(
    db: TestStore, site: dict[str, Any],
) -> None:
    run = await new_run(db, surface="desk", asked_by=AGENT, subject=None)
    told: list[Any] = []

    async def notify(tx: Tx, ticket: Mapping[str, Any]) -> None:
        told.append(ticket)

    answer = await make_raise_ticket(db, lambda: WORDS, notify)(run, {"subject": "x", "body": "y"})
    assert answer == said("nobody") and told == []
    assert await db.pool.fetchval("SELECT count(*) FROM tickets WHERE raised_by_run = $1", run.id) == 0


async def test_a_failed_notice_takes_the_ticket_with_it(db: TestStore, site: dict[str, Any]) -> None:
    run = await new_run(db, surface="desk", asked_by=None, subject=f"contact:{site['guest']}")

    async def notify(tx: Tx, ticket: Mapping[str, Any]) -> None:
        # The database refuses the notice (a run that does not exist), in the ticket's own transaction.
        await tx.of(OutboxTables).enqueue(txn_id=f"summon-ticket-{ticket['id']}", room_id=STAFF_ROOM, sender=SERVICE,
                                event_type="m.room.message", content={}, run_id=-1)

    with pytest.raises(StoreRefused, match="outbox_run_id_fkey"):
        await make_raise_ticket(db, lambda: WORDS, notify)(run, {"subject": "x", "body": "y"})
    assert await db.pool.fetchval("SELECT count(*) FROM tickets WHERE raised_by_run = $1", run.id) == 0


@pytest.mark.parametrize("args", [{}, {"subject": " ", "body": "b"}, {"subject": "a\nb", "body": "b"},
                                  {"subject": "x" * 301, "body": "b"}, {"subject": "s"}])
async def test_raise_ticket_refuses_bad_arguments_in_words_the_model_can_act_on(
    db: TestStore, site: dict[str, Any], args: dict[str, Any],
) -> None:
    run = await new_run(db, surface="desk", asked_by=None, subject=f"contact:{site['guest']}")
    with pytest.raises(ToolError):
        await make_raise_ticket(db, lambda: WORDS)(run, args)


async def test_the_tools_role_cannot_write_a_ticket_except_as_its_runs_own(db: TestStore, site: dict[str, Any]) -> None:
    guest_run = await new_run(db, surface="desk", asked_by=None, subject=f"contact:{site['guest']}")
    insert = "INSERT INTO tickets (contact_id, user_id, subject, body, raised_by_run) VALUES ($1, $2, 's', 'b', $3)"
    # Not declared for this transaction.
    async with db.pool.acquire() as conn, conn.transaction():
        await conn.fetchval(Q["personal_become"], guest_run.id)
        await conn.execute(Q["personal_as_tools"])
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(insert, site["guest"], None, guest_run.id)
    # Declared, but for somebody else's contact.
    async with db.pool.acquire() as conn, conn.transaction():
        await conn.fetchval(Q["personal_become"], guest_run.id)
        await conn.execute(Q["personal_as_tools"])
        await conn.execute("SELECT set_config('summon.bot_ticket', $1, true)", str(guest_run.id))
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(insert, site["x_contact"], CUSTOMER, guest_run.id)
    assert await db.pool.fetchval("SELECT count(*) FROM tickets WHERE raised_by_run = $1", guest_run.id) == 0


# --- the audience reader -----------------------------------------------------------------------------------


async def test_site_classes_reads_the_people_tables(db: TestStore, site: dict[str, Any]) -> None:
    async with db.pool.acquire() as conn, conn.transaction():
        await conn.execute("INSERT INTO site_orders (user_id, product, status) VALUES ($1, 'refunded-thing', 'refunded')",
                           AGENT)
        await conn.execute(
            "INSERT INTO site_memberships (user_id, kind, name, until) VALUES ($1, 'tier', 'lapsed', now() - interval '1 day')",
            AGENT)
    async with db.transaction("test_classes") as tx:
        assert await site_classes(tx, AGENT) == {
            "customer", "bought:y-lamp", "subscribed", "tier:gold", "role:staff"}
        assert await site_classes(tx, "@nobody:localhost") == frozenset()
        assert await site_classes(tx, None) == frozenset()


# --- the role is cluster-wide ------------------------------------------------------------------------------


async def test_the_migration_runs_again_in_another_database_of_the_same_cluster(dsn: str) -> None:
    base, _, _ = dsn.rpartition("/")
    name = f"t_again_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(f"{base}/postgres")
    try:
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        try:
            applied = await migrate(f"{base}/{name}")
            assert "0009_people" in applied
        finally:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


async def test_an_engine_that_is_not_a_superuser_keeps_its_tables_and_its_tools_stay_fenced(dsn: str) -> None:
    """In production the engine connects as the tables' owner, not a superuser: FORCE puts the owner under
    the policies, so its own named policy must admit it, and it must be able to become the tools role."""
    base, _, _ = dsn.rpartition("/")
    owner, name = f"summon_owner_{uuid.uuid4().hex[:8]}", f"t_owner_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(f"{base}/postgres")
    try:
        await admin.execute(f'CREATE ROLE "{owner}" LOGIN CREATEROLE')
        # summon_tools exists already in this cluster (another database's migration made it): since PostgreSQL 16
        # CREATEROLE no longer lets the owner grant itself a role somebody else made, so a superuser does (the
        # operator guide says so); on a cluster where the owner makes the role, it holds it from the start.
        await admin.execute(f'GRANT summon_tools TO "{owner}"')
        await admin.execute(f'CREATE DATABASE "{name}" OWNER "{owner}" TEMPLATE template0')
        owned = f"postgresql://{owner}@{base.rpartition('@')[2]}/{name}"
        try:
            await migrate(owned)
            db = await TestStore.open(owned, min_size=1, max_size=2)
            try:
                await db.content.upsert_bot("helper", "Helper", "@bot_helper:localhost", ["desk"], {})
                async with db.pool.acquire() as conn, conn.transaction():
                    await conn.execute("INSERT INTO people (user_id) VALUES ($1)", CUSTOMER)
                    await conn.execute("INSERT INTO site_orders (user_id, product) VALUES ($1, 'x-book')", CUSTOMER)
                    contact = await conn.fetchval(
                        "INSERT INTO desk_contacts (user_id) VALUES ($1) RETURNING id", CUSTOMER)
                async with db.transaction("test_owner") as tx:
                    assert await site_classes(tx, CUSTOMER) == {"customer", "bought:x-book"}
                run = await new_run(db, surface="desk", asked_by=AGENT, subject=f"contact:{contact}")
                assert products(await about(db, run)) == {"x-book"}
                async with db.pool.acquire() as conn, conn.transaction():
                    await conn.execute(Q["personal_as_tools"])
                    assert await conn.fetchval("SELECT count(*) FROM site_orders") == 0
            finally:
                await db.close()
        finally:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.execute(f'DROP ROLE IF EXISTS "{owner}"')
        await admin.close()


async def test_an_encrypted_staff_room_is_never_sent_the_ticket(db: TestStore, site: dict[str, Any]) -> None:
    await db.of(RoomTables).ensure(STAFF_ROOM)
    await db.of(RoomTables).mark_encrypted(STAFF_ROOM)
    run = await new_run(db, surface="desk", asked_by=None, subject=f"contact:{site['guest']}")

    async def notify(tx: Tx, ticket: Mapping[str, Any]) -> None:
        await tell_staff(tx, STAFF_ROOM, SERVICE, ticket)

    await make_raise_ticket(db, lambda: WORDS, notify)(run, {"subject": "Refund", "body": "Wants money back."})
    assert await db.pool.fetchval("SELECT count(*) FROM tickets WHERE raised_by_run = $1", run.id) == 1
    assert await db.pool.fetchval("SELECT count(*) FROM outbox WHERE room_id = $1", STAFF_ROOM) == 0
