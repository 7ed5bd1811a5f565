"""What a person sees of the service itself on a real Synapse: what belongs to no bot in particular (`!help`,
`!cancel`, `!bots …`, a typo of a command) is answered by the service's own user, under the display name the
config gives it; another bot's `!command` gets silence."""

from __future__ import annotations

import hashlib
import io
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest
from nio import DownloadResponse, ProfileGetAvatarResponse, RoomCreateResponse
from PIL import Image

from appservice.app import Service
from appservice.matrix.delivery import avatars as avatars_module
from tests.matrix.people import Person
from tests.support import eventually

pytestmark = pytest.mark.matrix
People = Callable[[str], Awaitable[Person]]


async def service_room(alice: Person, service: Service, *slugs: str) -> str:
    """A room alice made with the service's user and these bots in it (as `make dev`'s demo room is)."""
    ours = [service.service_user, *(alice.puppet(s) for s in slugs)]
    resp = await alice.client.room_create(name=f"face {uuid.uuid4().hex[:6]}", invite=ours)
    assert isinstance(resp, RoomCreateResponse), resp
    for user_id in ours:
        await alice.wait_membership(str(resp.room_id), user_id, "join")
    return str(resp.room_id)


async def test_help_is_answered_by_the_service_user_under_its_own_name(people: People, service: Service) -> None:
    alice = await people("alice")
    room = await service_room(alice, service, "echo", "helper")
    answer = await alice.answer_to(room, await alice.say(room, "!help"))
    assert answer["sender"] == service.service_user  # not Echo, the first bot in the room
    assert "!summarise" in answer["content"]["body"]
    member = await alice.membership(room, service.service_user)
    assert member is not None and member.get("displayname") == "Summon"  # set at start, from the config


async def test_bots_is_answered_by_the_service_user(people: People, service: Service) -> None:
    alice = await people("alice")
    room = await service_room(alice, service, "helper")
    answer = await alice.answer_to(room, await alice.say(room, "!bots list"))
    assert answer["sender"] == service.service_user
    assert "Helper" in answer["content"]["body"]


async def test_cancel_is_answered_even_when_nothing_runs(people: People, service: Service) -> None:
    alice = await people("alice")
    room = await service_room(alice, service, "helper")
    answer = await alice.answer_to(room, await alice.say(room, "!cancel"))
    assert answer["sender"] == service.service_user
    assert answer["content"]["body"] == "Nothing of yours is running here, so there is nothing to stop."


async def test_cancel_says_how_many_runs_it_stopped(people: People, service: Service, sql: asyncpg.Pool) -> None:
    alice = await people("alice")
    room = await service_room(alice, service, "helper")
    # A run that waits on a slow model turn, so it is still going when the cancel comes.
    asked = await alice.say(room, "Helper, take your time", mention="helper", script=[{"text": "slow", "delay": 30}])
    await eventually(lambda: sql.fetchval("SELECT count(*) FROM agent_runs WHERE trigger_event = $1", asked))
    answer = await alice.answer_to(room, await alice.say(room, "!cancel"))
    assert answer["sender"] == service.service_user
    assert answer["content"]["body"] == "Told 1 run(s) here to stop."


async def test_a_typo_is_pointed_at_the_command_and_another_bots_command_gets_silence(
        people: People, service: Service) -> None:
    alice = await people("alice")
    room = await service_room(alice, service, "helper")
    typo = await alice.answer_to(room, await alice.say(room, "!sumarise since=2d"))
    assert typo["sender"] == service.service_user
    assert typo["content"]["body"] == ("No `!sumarise` here — did you mean `!summarise`? `!help` lists what you "
                                       "can run.")
    theirs = await alice.say(room, "!hookshot help")
    # Lines are taken in the order they were said: once a later line is answered, the earlier one was heard.
    await alice.answer_to(room, await alice.say(room, "!help"))
    assert await alice.answers_to(room, theirs) == []


async def test_a_typo_of_a_command_withheld_from_the_person_gets_silence(people: People, service: Service) -> None:
    alice, bob = await people("alice"), await people("bob")
    room = await service_room(alice, service, "helper")
    await alice.client.room_invite(room, bob.user_id)
    await bob.client.join(room)
    await alice.wait_membership(room, bob.user_id, "join")
    # !triage is for moderators: a member is never told it is there, not even as a spelling hint.
    near = await bob.say(room, "!triag")
    await bob.answer_to(room, await bob.say(room, "!help"))
    assert await bob.answers_to(room, near) == []
    mine = await alice.answer_to(room, await alice.say(room, "!triag"))
    assert "did you mean `!triage`?" in mine["content"]["body"]


async def avatar_of(person: Person, user_id: str) -> str | None:
    resp = await person.client.get_avatar(user_id)
    return resp.avatar_url if isinstance(resp, ProfileGetAvatarResponse) else None


async def test_puppets_and_the_service_user_have_avatars_after_start(people: People, service: Service,
                                                                    sql: asyncpg.Pool,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    alice = await people("alice")
    ours = [service.service_user, *(bot.user_id for bot in service.registry().bots.values())]
    avatars = {user_id: await avatar_of(alice, user_id) for user_id in ours}
    assert all(a is not None and a.startswith("mxc://") for a in avatars.values()), avatars
    assert len(set(avatars.values())) == len(ours)  # no two look alike
    # Each was uploaded once, by its content hash, and is what the database remembers.
    assert set(avatars.values()) <= {r["mxc"] for r in await sql.fetch("SELECT mxc FROM avatar_uploads")}
    # Set again (a restart, a republish): nothing is uploaded twice, nothing changes.
    uploads = await sql.fetchval("SELECT count(*) FROM avatar_uploads")
    assert await service.avatars.set_all() == 0
    assert await sql.fetchval("SELECT count(*) FROM avatar_uploads") == uploads
    # Nor drawn again, even by a process that never drew them (another one, or this one restarted): the
    # database knows each drawn face by what it is drawn from.
    drawn: list[list[tuple[str, str | None]]] = []
    real = avatars_module.draw_apart

    async def counted(faces: list[tuple[str, str | None]], emoji_font: Path) -> list[bytes]:
        drawn.append(faces)
        return await real(faces, emoji_font)

    monkeypatch.setattr(avatars_module, "draw_apart", counted)
    monkeypatch.setattr(avatars_module, "_DRAWN", {})
    assert await service.avatars.set_all() == 0
    assert drawn == []
    # What a client downloads is a picture: the service user's drawn initial, a PNG.
    got = await alice.client.download(str(avatars[service.service_user]))
    assert isinstance(got, DownloadResponse) and got.body.startswith(b"\x89PNG")


def picture(rgb: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 64), rgb).save(out, format="PNG")
    return out.getvalue()


async def test_a_changed_avatar_file_is_republished(people: People, service: Service, content_dir: Path,
                                                   sql: asyncpg.Pool) -> None:
    alice = await people("alice")
    echo = alice.puppet("echo")
    drawn = await avatar_of(alice, echo)
    bot_file = content_dir / "bots" / "echo.md"
    image = content_dir / "avatars" / "echo.png"
    original = bot_file.read_text(encoding="utf-8")
    image.parent.mkdir(exist_ok=True)
    uploaded = "SELECT mxc FROM avatar_uploads WHERE sha256 = $1"
    try:
        image.write_bytes(picture((200, 30, 30)))
        bot_file.write_text(original.replace("name: Echo", "name: Echo\navatar: avatars/echo.png"), encoding="utf-8")
        red = await eventually(lambda: sql.fetchval(uploaded, hashlib.sha256(image.read_bytes()).hexdigest()))
        await eventually(lambda: _is(alice, echo, red))
        assert red != drawn
        image.write_bytes(picture((30, 30, 200)))  # the same file, another picture
        blue = await eventually(lambda: sql.fetchval(uploaded, hashlib.sha256(image.read_bytes()).hexdigest()))
        await eventually(lambda: _is(alice, echo, blue))
        assert blue != red
    finally:
        bot_file.write_text(original, encoding="utf-8")
        await eventually(lambda: _is(alice, echo, drawn))  # back to the one drawn from its initial
        image.unlink()


async def _is(person: Person, user_id: str, mxc: str | None) -> bool:
    return await avatar_of(person, user_id) == mxc
