"""The door's tests: its rows on the real PostgreSQL, and the door itself through the real ``openai`` SDK, with
the fake provider (tests/providers/fake_provider.py) behind the bot."""

from __future__ import annotations

import pytest

from appservice.config import Door as DoorConfig
from engine.content import Registry, compile_sources
from engine.content.files import KIT_DIR, read_content
from engine.run.publish import publish
from tests.store import TestStore

SERVER = "localhost"
KEYS = {"k1": "k1-" + "s" * 40, "k2": "k2-" + "t" * 40}

# A bot spoken to through the door, with its own model per provider and the door's own tool.
CALLER = """---
name: Caller
surfaces: [voice, rooms]
tools: [current_room]
model: {first: gpt-caller}
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
    result = compile_sources(door_sources(), server_name=SERVER, kit=read_content(KIT_DIR))
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
