"""One person's flood does not starve everyone (issue 12, item 2), end to end on a real Synapse: person A
floods 50 mentions, person B mentions once, and B is answered before A's 4th."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import asyncpg
import pytest

from appservice.app import Service
from tests.matrix.people import Person

pytestmark = pytest.mark.matrix
People = Callable[[str], Awaitable[Person]]
FLOOD = 50
SLOW = 2  # seconds each of A's runs takes (its scripted model turn waits this long)


async def test_a_flood_of_mentions_does_not_hold_up_somebody_elses_one(
    people: People, service: Service, sql: asyncpg.Pool,
) -> None:
    a, b = await people("flooder"), await people("bystander")
    room = await a.room_with("helper")
    await a.client.room_invite(room, b.user_id)
    await b.client.join(room)
    await a.wait_membership(room, b.user_id, "join")
    # Each mention in a thread of its own (a second mention in the same thread would only join the first run).
    roots = await asyncio.gather(*(a.say(room, f"topic {n}") for n in range(FLOOD)))
    flood = await asyncio.gather(*(
        a.say(room, f"Helper, question {n}", mention="helper", thread=root,
              script=[{"text": f"A's answer {n}", "delay": SLOW}])
        for n, root in enumerate(roots)))
    asked = await b.say(room, "Helper, one question", mention="helper", script=[{"text": "B's answer"}])
    answer = await b.answer_to(room, asked, timeout=6 * SLOW + 20)
    assert answer["content"]["body"] == "B's answer"

    runs = await sql.fetch("SELECT id, asked_by, status, finished_at FROM agent_runs WHERE place = $1", room)
    b_run = next(r for r in runs if r["asked_by"] == b.user_id)
    a_done = sorted(r["finished_at"] for r in runs if r["asked_by"] == a.user_id and r["finished_at"] is not None)
    before_b = [t for t in a_done if t < b_run["finished_at"]]
    print(f"answered before B: {len(before_b)} of A's; A's runs: {sum(r['asked_by'] == a.user_id for r in runs)}")
    assert len(before_b) <= 3, f"B was answered after A's {len(before_b)}th"
    # A's flood was mostly refused (at most three runs live at once), and A was told why once, not 47 times.
    refused = await sql.fetchval("SELECT count(*) FROM summon_refusals WHERE asked_by = $1 AND reason = 'too_many'",
                                 a.user_id)
    assert refused >= FLOOD - 3 - len(a_done)
    told = await sql.fetchval("SELECT count(*) FROM outbox WHERE room_id = $1 AND txn_id LIKE 'summon.refused.%'",
                              room)
    assert told == 1
    assert set(flood).isdisjoint({asked})
