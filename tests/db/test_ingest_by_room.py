"""A homeserver transaction carrying several rooms' events (a storm's) is stored a room at a time, each room's
events in a commit of their own, the id remembered with the last (issue 27 item 3): the first room's run can
start while the next rooms are stored, and the promises of one commit still hold — stored once, summoned once,
a replay stores nothing, a bad event loses only itself, a refused id is counted and then stored carefully."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from appservice.matrix.dispatch import GIVE_UP_AFTER, Dispatcher, by_room
from appservice.matrix.inbound.followups import Followup
from engine.content import Registry
from engine.errors import StoreRefused
from engine.store import Tx
from tests.db.test_ingest import HELPER, count, feed, message, pipeline
from tests.store import TestStore

pytestmark = pytest.mark.db
HALL, YARD = "!hall:localhost", "!yard:localhost"


def said(room: str, body: str, *, mention: bool = True) -> dict[str, Any]:
    return {**message(body, mentions=[HELPER] if mention else None), "room_id": room}


def test_events_go_by_room_in_the_order_heard() -> None:
    a1, b1, a2, stray, b2 = said(HALL, "a1"), said(YARD, "b1"), said(HALL, "a2"), {"type": "x"}, said(YARD, "b2")
    assert by_room([a1, b1, a2, stray, b2]) == [[a1, a2, stray], [b1, b2]]
    assert by_room([stray, a1]) == [[stray], [a1]]


async def test_the_first_rooms_run_is_committed_before_the_next_room_is_stored(db: TestStore,
                                                                              published: Registry) -> None:
    ingest = pipeline(db, published)
    seen_from_outside: list[int] = []
    real = Dispatcher.event

    async def watched(self: Dispatcher, tx: Tx, event: Mapping[str, Any], followups: list[Followup], *,
                      backfill: bool = False) -> None:
        if event.get("room_id") == YARD:  # another connection sees the hall's run already
            seen_from_outside.append(await count(db, "SELECT count(*) FROM agent_runs WHERE place = $1", HALL))
        await real(self, tx, event, followups, backfill=backfill)

    ask_hall, ask_yard = said(HALL, "Helper, hall?"), said(YARD, "Helper, yard?")
    try:
        Dispatcher.event = watched  # type: ignore[method-assign]
        assert await feed(ingest, db, "storm-1", [ask_hall, said(HALL, "and more", mention=False), ask_yard]) == []
    finally:
        Dispatcher.event = real  # type: ignore[method-assign]
    assert seen_from_outside == [1]
    assert await count(db, "SELECT count(*) FROM agent_runs") == 2
    assert await count(db, "SELECT count(*) FROM room_events") == 3
    # A replay stores and summons nothing; the same events in a new transaction neither.
    assert await feed(ingest, db, "storm-1", [ask_hall, ask_yard]) is None
    assert await feed(ingest, db, "storm-2", [ask_hall, ask_yard]) == []
    assert await count(db, "SELECT count(*) FROM agent_runs") == 2
    assert await count(db, "SELECT count(*) FROM as_transactions") == 2


async def test_a_bad_event_in_one_room_loses_only_itself(db: TestStore, published: Registry) -> None:
    ingest = pipeline(db, published)
    huge = {**said(YARD, "stamped past the end of time", mention=False), "origin_server_ts": 2**63}
    events = [said(HALL, "Helper, hall?"), said(YARD, "Helper, yard?"), huge, said(YARD, "after it", mention=False)]
    assert await feed(ingest, db, "storm-bad", events) == []
    assert await count(db, "SELECT count(*) FROM room_events") == 3
    assert await count(db, "SELECT count(*) FROM rejected_events WHERE event_id = $1", huge["event_id"]) == 1
    assert await count(db, "SELECT count(*) FROM agent_runs") == 2
    assert await count(db, "SELECT count(*) FROM as_transaction_failures") == 0


async def test_a_refused_id_of_a_transaction_of_several_rooms_is_counted_then_stored_carefully(
        db: TestStore, published: Registry) -> None:
    events = [said(HALL, "Helper, hall?"), said(YARD, "Helper, yard?")]
    for _ in range(GIVE_UP_AFTER):
        with pytest.raises(StoreRefused):
            await feed(pipeline(db, published), db, "storm\x00nul", events)
    assert await count(db, "SELECT count(*) FROM room_events") == 0
    assert await feed(pipeline(db, published), db, "storm\x00nul", events) == []
    assert await count(db, "SELECT count(*) FROM agent_runs") == 2
