"""A deployment that chose its puppet prefix (``appservice.puppet_prefix: ai_``), on the same real Synapse as
the tests' own: its puppets are @ai_<slug>, its registration's namespace follows, and the homeserver lets
them in and answers through them."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest
import yaml
from nio import RoomCreateResponse

from appservice.app import Service
from appservice.config import parse_config
from appservice.stand_in import member_bots_book
from engine.providers.mock import first_of
from tests.book import BOOK, SCRIPT_KEY
from tests.matrix.people import Person
from tests.matrix.prefixed import PREFIX, prefixed_raw

pytestmark = pytest.mark.matrix
People = Callable[[str], Awaitable[Person]]


@pytest.fixture(scope="session")
async def prefixed(stack: dict[str, str], template_dsn: str, content_dir: Path) -> AsyncIterator[Service]:
    admin = await asyncpg.connect(template_dsn.rsplit("/", 1)[0] + "/postgres")
    try:
        await admin.execute('DROP DATABASE IF EXISTS "matrix_prefixed" WITH (FORCE)')
        await admin.execute('CREATE DATABASE "matrix_prefixed" TEMPLATE summon_template')
    finally:
        await admin.close()
    raw = prefixed_raw(stack, template_dsn.rsplit("/", 1)[0] + "/matrix_prefixed")
    raw["content"] = {"dir": str(content_dir)}
    raw["worker"] = {"poll_seconds": 1.0}
    service = Service(parse_config(raw, {}), stand_in=first_of(BOOK, member_bots_book))
    await service.start()
    yield service
    await service.stop()


async def test_a_custom_prefix_makes_its_puppets_and_a_matching_registration(
        people: People, prefixed: Service, stack: dict[str, str]) -> None:
    server = stack["SUMMON_SERVER_NAME"]
    helper = prefixed.registry().get("helper")
    assert helper is not None and helper.user_id == f"@{PREFIX}helper:{server}"
    written = yaml.safe_load(Path(stack["SUMMON_PREFIXED_REGISTRATION"]).read_text(encoding="utf-8"))
    assert {"exclusive": True, "regex": f"@{PREFIX}.*:{server}"} in written["namespaces"]["users"]
    alice = await people("alice")
    made = await alice.client.room_create(name=f"prefix {uuid.uuid4().hex[:6]}", invite=[helper.user_id])
    assert isinstance(made, RoomCreateResponse), made
    room = str(made.room_id)
    await alice.wait_membership(room, helper.user_id, "join")
    asked = await alice.send(room, {"msgtype": "m.text", "body": "Helper, who are you?",
                                    "m.mentions": {"user_ids": [helper.user_id]},
                                    SCRIPT_KEY: [{"text": "the helper, under a prefix of its deployment's"}]})
    answer = await alice.answer_to(room, asked)
    assert answer["sender"] == helper.user_id
    assert "under a prefix of its deployment's" in answer["content"]["body"]
    member = await alice.membership(room, helper.user_id)
    assert member is not None and member.get("displayname") == "Helper"


