"""The whole service on a real Synapse and a real PostgreSQL, with matrix-nio as the person."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest
from nio import AsyncClient, JoinResponse, RegisterResponse, RoomCreateResponse

from appservice.app import Service
from appservice.config import Desk as DeskConfig
from appservice.config import Door, Listen, Members, Social, SocialBridge, load_config
from appservice.social.demo_bridge import DemoBridge, namespace
from appservice.stand_in import member_bots_book
from engine.providers.mock import first_of
from engine.store.base import init_connection
from tests.book import BOOK
from tests.matrix.people import Person
from tests.speech.fake_speech import FakeSpeech

REPO = Path(__file__).resolve().parents[2]
# The door's grant keys in the matrix tests (the door listens on a free port: ``service.door.port``).
DOOR_KEYS = {"k1": "matrix-tests-door-key-" + "d" * 24}


@pytest.fixture(scope="session")
def content_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the shipped content the tests may edit while the service watches it."""
    target = tmp_path_factory.mktemp("content") / "content"
    shutil.copytree(REPO / "content", target)
    return target


def matrix_dsn(template_dsn: str) -> str:
    return template_dsn.rsplit("/", 1)[0] + "/matrix_tests"


@dataclass
class DeskStaff:
    """A staff member of the desk and the staff room they made (the service user invited) before the service
    started: the service's desk mirrors its conversations there."""

    client: AsyncClient
    room_id: str
    # A second staff member in the same room (the "staffed" inbox lists both: a handoff goes to whoever is present).
    second: AsyncClient


SOCIAL_DRAFTS_PER_HOUR = 6
DESK_STAFF_KEY = "matrix-tests-staff-key-0123456789"
MEMBER_KEY = "k1:" + "bWF0cml4LXRlc3RzLW1lbWJlci1ib3RzLWtleS0xMjM="  # 32 bytes, base64


@pytest.fixture(scope="session")
async def desk_staff(stack: dict[str, str]) -> AsyncIterator[DeskStaff]:
    client = AsyncClient(stack["SUMMON_HS_URL"], f"deskstaff{uuid.uuid4().hex[:8]}")
    resp = await client.register(client.user, "pw-" + uuid.uuid4().hex)
    assert isinstance(resp, RegisterResponse), resp
    await client.set_displayname("Bea from support")
    second = AsyncClient(stack["SUMMON_HS_URL"], f"deskcal{uuid.uuid4().hex[:8]}")
    resp = await second.register(second.user, "pw-" + uuid.uuid4().hex)
    assert isinstance(resp, RegisterResponse), resp
    await second.set_displayname("Cal from support")
    made = await client.room_create(name="desk staff", invite=[f"@summon:{stack['SUMMON_SERVER_NAME']}",
                                                               second.user_id])
    assert isinstance(made, RoomCreateResponse), made
    assert isinstance(await second.join(made.room_id), JoinResponse)
    yield DeskStaff(client, str(made.room_id), second)
    await client.close()
    await second.close()


@dataclass
class SocialStaff:
    """The social team: a staff member and the review room they made (the service user invited) before the service
    started, and the fake bridge (appservice/social/demo_bridge.py, as make dev's) that brings the platform's people into rooms."""

    client: AsyncClient
    room_id: str
    bridge: DemoBridge


@pytest.fixture(scope="session")
async def social_staff(stack: dict[str, str]) -> AsyncIterator[SocialStaff]:
    client = AsyncClient(stack["SUMMON_HS_URL"], f"socialstaff{uuid.uuid4().hex[:8]}")
    resp = await client.register(client.user, "pw-" + uuid.uuid4().hex)
    assert isinstance(resp, RegisterResponse), resp
    await client.set_displayname("Sam from social")
    made = await client.room_create(name="social review", invite=[f"@summon:{stack['SUMMON_SERVER_NAME']}"])
    assert isinstance(made, RoomCreateResponse), made
    bridge = DemoBridge(stack["SUMMON_HS_URL"], stack["SUMMON_FAKEBRIDGE_AS_TOKEN"], stack["SUMMON_SERVER_NAME"])
    yield SocialStaff(client, str(made.room_id), bridge)
    await bridge.close()
    await client.close()


@pytest.fixture(scope="session")
async def fake_speech() -> AsyncIterator[FakeSpeech]:
    """The site's speech endpoints, faked on 127.0.0.1 for the whole session (the service is told of them)."""
    server = FakeSpeech()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture(scope="session")
async def service(stack: dict[str, str], template_dsn: str, content_dir: Path,
                  desk_staff: DeskStaff, fake_speech: FakeSpeech, social_staff: SocialStaff) -> AsyncIterator[Service]:
    """One summon service for the matrix tests (each test makes its own rooms and people), with a desk whose
    staff room is ``desk_staff``'s."""
    admin = await asyncpg.connect(template_dsn.rsplit("/", 1)[0] + "/postgres")
    try:
        await admin.execute('DROP DATABASE IF EXISTS "matrix_tests"')
        await admin.execute('CREATE DATABASE "matrix_tests" TEMPLATE summon_template')
    finally:
        await admin.close()
    env = {**os.environ, "SUMMON_DATABASE_DSN": matrix_dsn(template_dsn)}
    config = load_config(Path(stack["SUMMON_CONFIG"]), env)
    config = config.model_copy(update={
        "worker": config.worker.model_copy(update={"poll_seconds": 1.0}),
        # A display name other than the localpart, so a test sees the service set its own at start.
        "appservice": config.appservice.model_copy(update={"display_name": "Summon"}),
        "content": config.content.model_copy(update={"dir": str(content_dir)}),
        "door": Door(keys=DOOR_KEYS, signing_key="k1", listen=Listen.model_construct(host="127.0.0.1", port=0)),
        "desk": DeskConfig.model_validate({
            "listen": {"host": "127.0.0.1", "port": 0}, "secret": "matrix-tests-desk-secret-" + "d" * 16,
            "staff_room": desk_staff.room_id,
            "inboxes": {"web": {"title": "Help", "staff_key": DESK_STAFF_KEY, "daily_spend": 100.0},
                        # Handoffs here go to whichever of its two staff members is present (no office hours).
                        "staffed": {"title": "Staffed", "staff_key": DESK_STAFF_KEY, "daily_spend": 100.0,
                                    "staff": [desk_staff.client.user_id, desk_staff.second.user_id]}},
        }),
        # Social rules (docs/social.md): the fake bridge's puppets are guests; two drafts an hour a rule, to see the cap.
        "social": Social(staff_room=social_staff.room_id, drafts_per_hour=SOCIAL_DRAFTS_PER_HOUR, history_lines=4,
                         history_chars=600,
                         bridges=(SocialBridge(users=namespace(stack["SUMMON_SERVER_NAME"]), network="Fakebook"),)),
        # Member bots (docs/member-bots.md): a fast clock, a low floor, and the loopback feed server allowed.
        "members": Members(keys=[MEMBER_KEY], min_every_seconds=60, tick_seconds=0.5, dry_run_seconds=60,
                           loopback_feeds_for_tests=True, admins=[]),
    })
    # Speech is bought only with AGENTS_LIVE=1: switched on for the speech endpoints alone (the model stays mocked).
    speech_env = {**os.environ, "SUMMON_STT_URL": fake_speech.url, "SUMMON_STT_KEY": "stt-key",
                  "SUMMON_TTS_URL": fake_speech.url, "SUMMON_TTS_KEY": "tts-key", "AGENTS_LIVE": "1"}
    # The stand-in answers by the tests' book, then by the member bots' (editions, the builder), as the demo's.
    svc = Service(config, stand_in=first_of(BOOK, member_bots_book), env=speech_env)
    await svc.start()
    yield svc
    await svc.stop()


@pytest.fixture(scope="session")
async def sql(service: Service, template_dsn: str) -> AsyncIterator[asyncpg.Pool]:
    """The raw pool on the service's database, for a test's own SQL (to set a scene or check a row); the
    service's store keeps its connections to itself."""
    pool = await asyncpg.create_pool(matrix_dsn(template_dsn), min_size=1, max_size=4, init=init_connection)
    assert pool is not None
    yield pool
    await pool.close()


@pytest.fixture
async def people(stack: dict[str, str], service: Service) -> AsyncIterator[Callable[[str], Awaitable[Person]]]:
    made: list[AsyncClient] = []

    async def make(name: str) -> Person:
        client = AsyncClient(stack["SUMMON_HS_URL"], f"{name}{uuid.uuid4().hex[:8]}")
        resp = await client.register(client.user, "pw-" + uuid.uuid4().hex)
        assert isinstance(resp, RegisterResponse), resp
        made.append(client)
        return Person(client, service)

    yield make
    for c in made:
        await c.close()
