"""Who takes what is handed to people (issue 31 item 4), on a real PostgreSQL: the router reads the handed
conversations, asks who of the inbox's staff is present (here a scripted presence: the Matrix side's own test,
tests/matrix/test_desk_live.py, asks the real homeserver), and assigns one of them round-robin — the contact told
who has it — or tells the contact when a person will answer, once per handoff. The clock is the test's: a
Wednesday morning in Dublin, or a Saturday."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from appservice.desk.router import Router, Seen
from engine.clock import FakeClock
from tests.desk.conftest import STAFFED_KEY, Contact, DeskRig

pytestmark = pytest.mark.db

WEDNESDAY = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)  # 10:00 in Dublin: open
SATURDAY = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


class Presence:
    def __init__(self, **states: str) -> None:
        self.states = {f"@{name}:localhost": state for name, state in states.items()}
        self.asked: list[str] = []

    async def __call__(self, user_id: str) -> Seen:
        self.asked.append(user_id)
        return Seen(self.states.get(user_id, "offline"), user_id[1:4].title())


async def handed(desk: DeskRig, who: Contact | None = None) -> tuple[Contact, int]:
    who = who or await desk.contact("staffed")
    conversation = await desk.conversation(who)
    await desk.say(who, conversation, "I need a person", script=[{"text": "Let me see."}])
    await desk.work()
    await desk.call("POST", f"{desk.base(who)}/conversations/{conversation}/toggle_status", token=who.token,
                    body={"status": "open"})
    return who, conversation


async def assignee(desk: DeskRig, conversation: int) -> Any:
    return (await desk.row("SELECT assignee FROM desk_conversations WHERE id = $1", conversation))["assignee"]


def router(desk: DeskRig, presence: Presence, now: datetime) -> Router:
    return Router(desk.db, desk.service.desk, FakeClock(now), presence)


async def test_a_handoff_inside_hours_goes_to_a_present_staff_member_round_robin(desk: DeskRig) -> None:
    presence = Presence(sam="online", kim="offline", lee="online")
    ann, first = await handed(desk)
    assert await router(desk, presence, WEDNESDAY).once() == 1
    assert await assignee(desk, first) == "@sam:localhost"
    told = (await desk.messages(ann, first))[-1]
    assert (told["message_type"], told["content"]) == (
        "activity", "Sam has this conversation now and can read everything above, so there is no need to repeat "
        "anything.")
    _, second = await handed(desk)
    _, third = await handed(desk)
    assert await router(desk, presence, WEDNESDAY).once() == 2
    assert {await assignee(desk, second), await assignee(desk, third)} == {"@lee:localhost", "@sam:localhost"}
    assert await assignee(desk, second) == "@lee:localhost"  # sam had the last one: lee, then sam again
    assert "@kim:localhost" not in {await assignee(desk, c) for c in (first, second, third)}  # offline: never
    assert await router(desk, presence, WEDNESDAY).once() == 0  # nothing left to decide


async def test_outside_hours_the_contact_is_told_when_once_and_it_waits_open(desk: DeskRig) -> None:
    presence = Presence(sam="online")
    bo, conversation = await handed(desk)
    assert await router(desk, presence, SATURDAY).once() == 1
    assert await assignee(desk, conversation) is None
    row = await desk.row("SELECT status, promised_at, reroute_at FROM desk_conversations WHERE id = $1", conversation)
    assert row["status"] == "open"
    assert row["promised_at"] == row["reroute_at"] == datetime(2026, 12, 7, 9, 0, tzinfo=UTC)  # Monday 09:00 GMT
    promise = (await desk.messages(bo, conversation))[-1]
    assert promise["content_attributes"]["promise"] == "Monday 09:00 (GMT)"
    assert "Monday 09:00 (GMT)" in promise["content"] and "no need to repeat" in promise["content"]
    # When it falls due the desk decides again: still closed (a Sunday) — no second promise to the contact.
    await desk.db.pool.execute("UPDATE desk_conversations SET reroute_at = now() - interval '1 second' "
                               "WHERE id = $1", conversation)
    assert await router(desk, presence, datetime(2026, 12, 6, 12, 0, tzinfo=UTC)).once() == 1
    assert [m["content_attributes"].get("promise") for m in await desk.messages(bo, conversation)
            if "promise" in m["content_attributes"]] == ["Monday 09:00 (GMT)"]
    # Monday morning, sam online: assigned, and told who has it.
    await desk.db.pool.execute("UPDATE desk_conversations SET reroute_at = now() - interval '1 second' "
                               "WHERE id = $1", conversation)
    assert await router(desk, presence, datetime(2026, 12, 7, 9, 5, tzinfo=UTC)).once() == 1
    assert await assignee(desk, conversation) == "@sam:localhost"


async def test_inside_hours_with_nobody_present_it_is_as_soon_as_one_is_free(desk: DeskRig) -> None:
    cy, conversation = await handed(desk)
    assert await router(desk, Presence(sam="unavailable"), WEDNESDAY).once() == 1
    promise = (await desk.messages(cy, conversation))[-1]
    assert promise["content_attributes"] == {"promise": None}
    assert "as soon as one is free" in promise["content"]
    assert await assignee(desk, conversation) is None


async def test_the_staff_apis_assign_wins_over_the_router(desk: DeskRig) -> None:
    _, conversation = await handed(desk)
    await desk.call("POST", desk.staff_path(conversation, "/assignments"), staff=STAFFED_KEY,
                    body={"assignee_id": "@lee:localhost"})
    presence = Presence(sam="online")
    assert await router(desk, presence, WEDNESDAY).once() == 0
    assert await assignee(desk, conversation) == "@lee:localhost"


async def test_an_inbox_without_staff_routes_nothing(desk: DeskRig) -> None:
    dee = await desk.contact("always")
    conversation = await desk.conversation(dee)
    await desk.call("POST", f"{desk.base(dee)}/conversations/{conversation}/toggle_status", token=dee.token,
                    body={"status": "open"})
    presence = Presence(sam="online")
    await router(desk, presence, WEDNESDAY).once()
    assert await assignee(desk, conversation) is None and presence.asked == []
