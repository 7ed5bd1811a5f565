"""The door's tests: its rows on the real PostgreSQL, and the door itself through the real ``openai`` SDK, with
the fake provider (tests/providers/fake_provider.py) behind the bot."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import openai
import pytest

from appservice.config import Door as DoorConfig
from appservice.config import Listen, provider_settings
from appservice.door.grants import mint, new_grant
from appservice.door.handed import ClientTools
from appservice.door.issue import ceilings_of
from appservice.door.service import DoorListener
from appservice.door.surface import DoorSurface
from appservice.door.tools import make_current_room
from appservice.kinds import KINDS
from engine.clock import SystemClock
from engine.content import Registry, compile_sources
from engine.content.files import KIT_DIR, read_content
from engine.core.limits import Ceilings
from engine.providers.config import choose_answerer
from engine.providers.prices import parse_prices
from engine.run.publish import publish
from engine.run.worker import Worker, WorkerSettings
from engine.tasks import TaskGroup
from tests.providers.fake_provider import FakeProvider
from tests.store import TestStore

SERVER = "localhost"
KEYS = {"k1": "k1-" + "s" * 40, "k2": "k2-" + "t" * 40}

# A bot spoken to through the door, with its own model per provider and the door's own tool.
CALLER = """---
name: Caller
surfaces: [voice, rooms]
tools: [current_room]
model: {first: gpt-caller}
client_tools:
  end_call:
    description: End the call, once the person has said goodbye.
  navigate:
    description: Open a page of the app for the person.
    parameters: {type: object, properties: {page: {type: string}}, required: [page]}
limits:
  steps: 6
  spend: 0.05
  minutes: 2
  per:
    hour: 1.00
---
You are Caller, a bot people talk to by voice. Answer in one or two short sentences.
"""
# A bot that is in rooms only: no door reaches it.
ROOMS_ONLY = """---
name: Roomy
limits: {steps: 2, spend: 0.01, minutes: 1, per: {hour: 0.10}}
---
You are Roomy.
"""


def door_sources() -> dict[str, str]:
    return {"bots/caller.md": CALLER, "bots/roomy.md": ROOMS_ONLY}


@pytest.fixture
def registry() -> Registry:
    result = compile_sources(door_sources(), kinds=KINDS, server_name=SERVER, kit=read_content(KIT_DIR))
    assert isinstance(result, Registry), result
    return result


@pytest.fixture
async def published(db: TestStore, registry: Registry) -> Registry:
    await publish(db, registry)
    await db.workers.beat("test-worker", usable=True, mode="live", providers=["first"])
    return registry


@pytest.fixture
def door_config() -> DoorConfig:
    return DoorConfig(keys=KEYS, signing_key="k1", wait_seconds=20.0, check_seconds=2.0, max_body_size=8192)


# --- the door itself, on the real PostgreSQL, with a fake provider behind the bot -----------------------------

PRICES = parse_prices({"prices": {"first": {"gpt-caller": {"input": 0.000001, "output": 0.000002}}}})
PERSON = "@alice:localhost"


@dataclass
class Harness:
    db: TestStore
    registry: Registry
    config: DoorConfig
    fake: FakeProvider
    listener: DoorListener
    clock: SystemClock
    clients: list[openai.OpenAI | openai.AsyncOpenAI] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.port}/v1"

    def grant(self, *, person: str = PERSON, room: str | None = None, ceilings: Ceilings | None = None,
              minutes: float = 10, key_id: str = "k1", bot: str = "caller", audience: str | None = None) -> str:
        caller = self.registry.get("caller")
        assert caller is not None
        grant = new_grant(bot=bot, person=person, room=room, audience=audience or f"summon-door:{SERVER}",
                          ceilings=ceilings or ceilings_of(caller), now=self.clock.now(), minutes=minutes,
                          minted_by="operator")
        return mint(grant, key_id, KEYS[key_id])

    def client(self, token: str) -> openai.OpenAI:
        """The SDK's sync client (call it in a thread: the door runs in this test's loop)."""
        client = openai.OpenAI(base_url=self.url, api_key=token, max_retries=0, timeout=30)
        self.clients.append(client)
        return client

    def aclient(self, token: str) -> openai.AsyncOpenAI:
        client = openai.AsyncOpenAI(base_url=self.url, api_key=token, max_retries=0, timeout=30)
        self.clients.append(client)
        return client

    async def close_clients(self) -> None:
        for client in self.clients:
            if isinstance(client, openai.AsyncOpenAI):
                await client.close()
            else:
                client.close()

    def provider_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.fake.received("openai")]


@pytest.fixture
async def door(db: TestStore, published: Registry, door_config: DoorConfig) -> AsyncIterator[Harness]:
    """The door listening on a free port, a worker stepping its runs, and the fake provider answering them."""
    fake = FakeProvider()
    await fake.start()
    clock = SystemClock()
    env = {"SUMMON_PROVIDERS": "first", "SUMMON_PROVIDER_FIRST_KIND": "openai",
           "SUMMON_PROVIDER_FIRST_URL": fake.openai_url, "SUMMON_PROVIDER_FIRST_KEY": "sk-first", "AGENTS_LIVE": "1"}
    answerer = choose_answerer(provider_settings(env), clock, prices=PRICES)
    surface = DoorSurface(lambda: published, server_name=SERVER, service_user=f"@summon:{SERVER}")
    stop = asyncio.Event()
    tasks = TaskGroup("door-test")
    worker = Worker(db, lambda: published, answerer, {"voice": surface}, clock,
                    WorkerSettings(lease_seconds=30, poll_seconds=0.2, slots=4), streamed={"voice"},
                    handed={"voice": ClientTools(db, clock, wait_seconds=2.0)},
                    tools={"current_room": make_current_room(db)}, surface_tools=KINDS.tools, worker_id="door-test-worker",
                    status=answerer.status())
    tasks.spawn(worker.run(stop), name="worker")
    # Port 0: any free port (the config takes only real ones; a test's listener takes an ephemeral one).
    config = door_config.model_copy(update={"listen": Listen.model_construct(host="127.0.0.1", port=0)})
    listener = DoorListener(config, store=db, registry=lambda: published, clock=clock, surface=surface, tasks=tasks,
                            server_name=SERVER, service_user=f"@summon:{SERVER}", homeserver=None, whoami=None)
    harness = Harness(db, published, config, fake, listener, clock)
    await listener.start(stop)
    try:
        yield harness
    finally:
        await harness.close_clients()
        stop.set()
        await listener.stop()
        await tasks.close(grace=5.0)
        await answerer.aclose()
        await fake.close()
