"""A member bot's own tools on the real PostgreSQL: ``card`` hands a malformed card back as mistakes the
model can fix, takes one card per run and only where the charter posts cards; both tools keep to the
charter's ``max_tool_calls``; ``fetch`` with no allow-list has no network."""

from __future__ import annotations

from typing import Any

import pytest

from appservice.members.book import Book
from appservice.members.charter import CharterRules, read_charter
from appservice.members.feeds import Feeds
from appservice.members.seal import Keyring, new_key
from appservice.members.tools import make_card, make_charter_fetch
from engine.core.messages import ToolCall, ToolCallStep, ToolResultStep, dump_step
from engine.errors import ToolError
from engine.tools.base import RunRef
from engine.tools.fetch import FetchSettings
from engine.tools.quarantine import Quarantine
from tests.members.test_members_card import CARD
from tests.store import TestStore

pytestmark = pytest.mark.db
ALICE = "@alice:localhost"


async def charter_run(db: TestStore, **over: Any) -> tuple[Book, RunRef]:
    book = Book(Keyring.parse([f"k1:{new_key()}"]))
    await db.pool.execute("INSERT INTO bots (slug, name, puppet, surfaces, compiled) VALUES ('builder', 'Builder', "
                          "'@bot_builder:localhost', '{matrix,members}', '{}') ON CONFLICT DO NOTHING")
    data: dict[str, Any] = {"name": "Morning News", "schedule": {"every": "2 hours"}, "prompt": "A digest.",
                            "allow": ["https://www.rte.ie/feeds/"], "owner": ALICE, "author": ALICE}
    data.update(over)
    async with db.transaction("t") as tx:
        charter_id = await book.create(tx, read_charter(data), by=ALICE, clock_at=await tx.schedules.now(),
                                       host="builder")
    run_id = await db.runs.insert(bot="builder", surface="members", place="!r:localhost", thread=None,
                                  trigger_event=None, asked_by=None, subject=ALICE, prompt="edition",
                                  context={"kind": "member", "charter": charter_id}, limits={"steps": 8, "spend": 0.25, "minutes": 5}, max_attempts=1)
    assert run_id is not None
    return book, RunRef(run_id, "builder", "members", "!r:localhost", None)


async def record(db: TestStore, run: RunRef, *steps: Any) -> None:
    seq = int(await db.pool.fetchval("SELECT coalesce(max(seq), 0) FROM agent_steps WHERE run_id = $1", run.id))
    for n, step in enumerate(steps, start=seq + 1):
        await db.pool.execute("INSERT INTO agent_steps (run_id, seq, kind, payload, worker) VALUES ($1, $2, $3, $4, 'w')",
                              run.id, n, step.kind, dump_step(step))


async def test_a_malformed_card_goes_back_as_mistakes_then_one_card_is_taken(db: TestStore) -> None:
    book, run = await charter_run(db)
    card = make_card(db, book)
    await record(db, run, ToolCallStep(ToolCall("c1", "card", {"card": {"heading": "H"}})))
    with pytest.raises(ToolError, match="fix these and call card again: blocks: is missing"):
        await card(run, {"card": {"heading": "H"}})
    await record(db, run, ToolResultStep("c1", "not valid", is_error=True),
                 ToolCallStep(ToolCall("c2", "card", {"card": CARD})))
    assert "Card accepted" in await card(run, {"card": CARD})
    await record(db, run, ToolResultStep("c2", "Card accepted"), ToolCallStep(ToolCall("c3", "card", {"card": CARD})))
    with pytest.raises(ToolError, match="one card per edition"):
        await card(run, {"card": CARD})


async def test_a_charter_that_posts_no_card_takes_none(db: TestStore) -> None:
    book, run = await charter_run(db, card=False)
    with pytest.raises(ToolError, match="plain text only"):
        await make_card(db, book)(run, {"card": CARD})


async def test_the_tools_keep_to_max_tool_calls(db: TestStore, quarantine: Quarantine) -> None:
    book, run = await charter_run(db, max_tool_calls=2)
    await record(db, run, *(ToolCallStep(ToolCall(f"f{n}", "fetch", {"url": "https://www.rte.ie/feeds/"}))
                            for n in range(3)))
    with pytest.raises(ToolError, match="used its 2 tool calls"):
        await make_charter_fetch(db, book, Feeds(FetchSettings(), CharterRules(), quarantine))(run, {"url": "https://www.rte.ie/feeds/"})
    with pytest.raises(ToolError, match="used its 2 tool calls"):
        await make_card(db, book)(run, {"card": CARD})


async def test_no_allow_list_no_network(db: TestStore, quarantine: Quarantine) -> None:
    book, run = await charter_run(db, allow=[], tools=["fetch", "card"])
    with pytest.raises(ToolError, match="reads nothing from the web"):
        await make_charter_fetch(db, book, Feeds(FetchSettings(), CharterRules(), quarantine))(run, {"url": "https://www.rte.ie/"})
    book, run = await charter_run(db, tools=["card"])
    with pytest.raises(ToolError, match="reads nothing from the web"):
        await make_charter_fetch(db, book, Feeds(FetchSettings(), CharterRules(), quarantine))(run, {"url": "https://www.rte.ie/feeds/"})


async def test_a_fetch_off_the_charter_list_is_refused(db: TestStore, quarantine: Quarantine) -> None:
    book, run = await charter_run(db)
    with pytest.raises(ToolError, match="not on the list this bot may fetch"):
        await make_charter_fetch(db, book, Feeds(FetchSettings(allow=("https://www.theguardian.com/",)), CharterRules(), quarantine))(
            run, {"url": "https://www.theguardian.com/uk"})
