"""The order a new line is offered in is written down once (``appservice.matrix.build.claim_order``) and is the
one the service builds: a reorder fails here. The first claimer that takes a line ends it; the voice step
asks only for a voice line. No homeserver, no database: the claimers that would reach one are never called."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, cast

import pytest

from appservice.matrix.asking.asking import Asking
from appservice.matrix.build import wire_dispatcher
from appservice.matrix.inbound.followups import Followup
from appservice.matrix.inbound.lines import Claim, LineHandler, first_claim
from appservice.matrix.inbound.said import Line
from appservice.matrix.surface import RoomFacts
from engine.content import Registry
from engine.store import Store, Tx

EVERY_STEP = ["staff room", "cancel", "room admin", "press", "memories", "command", "voice note", "typo",
              "own room", "mention"]
MATRIX_ALONE = ["cancel", "room admin", "press", "command", "typo", "mention"]
NO_TX = cast(Tx, object())  # never touched: a fake claimer ignores it, and no real one is reached with it
LINE = Line(event_id="$1", room_id="!r:localhost", sender="@ann:localhost", ts=1, event_type="m.room.message",
            text="Helper, hi")


def no_registry() -> Registry:
    raise AssertionError("building the order reads no content")


class Heard:
    """What a fake claimer was offered, in order."""

    def __init__(self) -> None:
        self.offered: list[str] = []


class StaffRoom:
    def __init__(self, heard: Heard, takes: bool) -> None:
        self.heard, self.takes = heard, takes

    async def line(self, tx: Tx, line: Line, ours: Callable[[str], bool]) -> bool:
        self.heard.offered.append("staff room")
        return self.takes

    async def reaction(self, tx: Tx, room_id: str, event: Mapping[str, Any], ours: Callable[[str], bool]) -> bool:
        return False


class Voice:
    def __init__(self, heard: Heard) -> None:
        self.heard_ = heard

    async def heard(self, tx: Tx, line: Line, followups: list[Followup]) -> bool:
        self.heard_.offered.append("voice note")
        return True


class Memories:
    async def claim(self, tx: Tx, line: Line, event: Mapping[str, Any], followups: list[Followup]) -> bool:
        return False


class OwnRoom:
    async def line(self, tx: Tx, line: Line, event: Mapping[str, Any]) -> bool:
        return False


def lines_built(**surfaces: Any) -> LineHandler:
    """The line handler exactly as the service wires it (``wire_dispatcher``), with what the other surfaces
    and this one's optional parts bring."""
    dispatcher = wire_dispatcher(cast(Store, object()), no_registry, server_name="localhost",
                                 service_user="@summon:localhost", facts=RoomFacts("localhost"), **surfaces)
    return dispatcher.lines


def every_step(heard: Heard, *, staff_takes: bool = False) -> LineHandler:
    def own_rooms(asking: Asking) -> OwnRoom:
        return OwnRoom()

    return lines_built(elsewhere=StaffRoom(heard, staff_takes), voice=Voice(heard), memories=Memories(),
                       own_rooms=own_rooms)


def test_the_built_order_is_the_written_one() -> None:
    assert [c.name for c in every_step(Heard()).claims] == EVERY_STEP


def test_a_surface_that_is_not_there_leaves_its_step_out_and_the_rest_in_place() -> None:
    assert [c.name for c in lines_built().claims] == MATRIX_ALONE


async def test_the_staff_room_taking_a_line_ends_it_before_any_other_step() -> None:
    heard = Heard()
    handler = every_step(heard, staff_takes=True)
    assert await first_claim(handler.claims, NO_TX, LINE, {}, []) == "staff room"  # the rest would need the tx
    assert heard.offered == ["staff room"]


async def test_the_voice_step_asks_only_for_a_voice_line() -> None:
    heard = Heard()
    (voice,) = [c for c in every_step(heard).claims if c.name == "voice note"]
    assert not await voice.claimer(NO_TX, LINE, {}, [])
    assert heard.offered == []
    assert await voice.claimer(NO_TX, replace(LINE, is_voice=True), {}, [])
    assert heard.offered == ["voice note"]


@pytest.mark.parametrize(("takes", "offered", "claimed"), [
    ("b", ["a", "b"], "b"),
    ("a", ["a"], "a"),
    (None, ["a", "b", "c"], None),
])
async def test_the_first_that_claims_ends_it(takes: str | None, offered: list[str], claimed: str | None) -> None:
    seen: list[str] = []

    def step(name: str) -> Claim:
        async def claimer(tx: Tx, line: Line, event: Mapping[str, Any], followups: list[Followup]) -> bool:
            seen.append(name)
            return name == takes
        return Claim(name, claimer)

    assert await first_claim([step("a"), step("b"), step("c")], NO_TX, LINE, {}, []) == claimed
    assert seen == offered
