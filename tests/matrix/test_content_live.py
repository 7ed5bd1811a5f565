"""A changed content file is live within seconds in the running service; a broken edit changes nothing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest
from nio import ProfileGetDisplayNameResponse

from appservice.app import Service
from tests.book import SCRIPT_KEY
from tests.matrix.people import Person
from tests.support import eventually

pytestmark = pytest.mark.matrix
People = Callable[[str], Awaitable[Person]]


async def test_an_edited_bot_is_live_within_two_seconds(people: People, service: Service, content_dir: Path,
                                                        sql: asyncpg.Pool) -> None:
    alice = await people("alice")
    room = await alice.room_with("echo")
    puppet = alice.puppet("echo")
    path = content_dir / "bots" / "echo.md"
    original = path.read_text()
    try:
        # A broken edit: the last good content stays live.
        path.write_text(original.replace("name: Echo", "name: Echo\ncolour: blue"))
        fence = await alice.say(room, "Echo, still you?", mention="echo", script=[{"text": "still"}])
        await alice.answer_to(room, fence)
        assert service.registry().get("echo").name == "Echo"  # type: ignore[union-attr]

        path.write_text(original.replace("name: Echo", "name: Parrot"))
        loop_time = __import__("asyncio").get_running_loop().time
        edited = loop_time()
        await eventually(lambda: service.registry().get("echo").name == "Parrot", timeout=2)  # type: ignore[union-attr]
        assert loop_time() - edited <= 2
        row = await sql.fetchrow("SELECT name, compiled FROM bots WHERE slug = 'echo'")
        assert row["name"] == "Parrot"

        async def renamed() -> bool:
            resp = await alice.client.get_displayname(puppet)
            return isinstance(resp, ProfileGetDisplayNameResponse) and resp.displayname == "Parrot"

        await eventually(renamed, timeout=10)
        # The next answer comes from the bot under its new name: named the way an older client would
        # (no m.mentions), by the new display name.
        asked = await alice.send(room, {"msgtype": "m.text", "body": "Parrot, say hi",
                                        SCRIPT_KEY: [{"text": "hi"}]})
        answer = await alice.answer_to(room, asked)
        assert answer["sender"] == puppet and answer["content"]["body"] == "hi"
    finally:
        path.write_text(original)
        await eventually(lambda: service.registry().get("echo").name == "Echo", timeout=5)  # type: ignore[union-attr]
