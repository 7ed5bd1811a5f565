"""Membership work is remembered with the events that decided it: an invite whose join never happened
(the process died between the commit and the homeserver call) is carried out when the service resumes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import pytest
from nio import RoomCreateResponse

from appservice.app import Service
from appservice.matrix.inbound.followups import Followup
from tests.matrix.people import Person
from tests.support import eventually

pytestmark = pytest.mark.matrix
People = Callable[[str], Awaitable[Person]]


async def test_a_join_lost_to_a_crash_is_carried_out_on_resume(
    people: People, service: Service, sql: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch,
) -> None:
    alice = await people("alice")
    puppet = alice.puppet("helper")
    lost: list[Followup] = []

    async def crashed(action_id: int, followup: Followup) -> bool:
        lost.append(followup)  # the process "died" after the commit, before telling the homeserver
        return False

    monkeypatch.setattr(service.rooms, "carry_out_remembered", crashed)
    made = await alice.client.room_create(name="lost join", invite=[puppet])
    assert isinstance(made, RoomCreateResponse), made
    room = str(made.room_id)

    async def remembered() -> Any:
        return await sql.fetchrow(
            "SELECT id, status, action FROM room_actions WHERE room_id = $1", room)


    row = await eventually(remembered, timeout=15)
    assert row["status"] == "pending" and row["action"]["kind"] == "Join" and lost
    assert (await alice.membership(room, puppet) or {}).get("membership") == "invite"

    # Restarted: the action is due once its first attempt's time is up; the resume carries it out.
    monkeypatch.undo()  # the restarted process carries out what it resumes
    await sql.execute("UPDATE room_actions SET next_attempt_at = now() WHERE id = $1", row["id"])
    assert await service.rooms.resume_once() >= 1
    await alice.wait_membership(room, puppet, "join")
    done = await sql.fetchrow("SELECT status, attempts FROM room_actions WHERE id = $1", row["id"])
    assert (done["status"], done["attempts"]) == ("done", 1)


async def test_an_action_the_homeserver_refuses_for_good_is_given_up_with_the_reason(
    people: People, service: Service, sql: asyncpg.Pool,
) -> None:
    alice = await people("alice")
    made = await alice.client.room_create(name="invite only")  # the puppet is not invited: M_FORBIDDEN
    assert isinstance(made, RoomCreateResponse), made
    action = {"kind": "Join", "room_id": str(made.room_id), "user_id": alice.puppet("helper")}
    action_id = await sql.fetchval(
        "INSERT INTO room_actions (room_id, action, next_attempt_at) VALUES ($1, $2, now()) RETURNING id",
        action["room_id"], action)
    assert await service.rooms.resume_once() == 0
    row = await sql.fetchrow("SELECT status, attempts, last_error FROM room_actions WHERE id = $1",
                             action_id)
    assert (row["status"], row["attempts"]) == ("failed", 1)
    assert row["last_error"].startswith("M_FORBIDDEN")
