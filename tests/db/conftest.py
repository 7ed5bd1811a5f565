from __future__ import annotations

from pathlib import Path

import pytest

from engine.content import Registry
from engine.content.files import compile_content
from engine.run.publish import publish
from engine.store.db import Database

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def registry() -> Registry:
    result = compile_content(REPO / "content", server_name="localhost", fetch_spec=None)
    assert isinstance(result, Registry), result
    return result


@pytest.fixture
async def published(db: Database, registry: Registry) -> Registry:
    """The shipped bots, published, with a live worker that can answer (else every summons is refused:
    no provider, no bots)."""
    await publish(db, registry)
    await db.execute("record_provider_status", "test-worker", True, "stand-in: no key", [])
    return registry
