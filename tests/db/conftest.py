from __future__ import annotations

from pathlib import Path

import pytest

from appservice.kinds import KINDS
from engine.content import Registry
from engine.content.files import compile_content
from engine.run.publish import publish
from tests.store import TestStore

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def registry() -> Registry:
    result = compile_content(REPO / "content", kinds=KINDS, server_name="localhost", fetch_spec=None)
    assert isinstance(result, Registry), result
    return result


@pytest.fixture
async def published(db: TestStore, registry: Registry) -> Registry:
    """The shipped bots, published, with a live worker that can answer (else every summons is refused:
    no provider, no bots)."""
    await publish(db, registry)
    await db.workers.beat("test-worker", usable=True, mode="stand-in: chosen", providers=[])
    return registry
