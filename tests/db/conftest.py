from __future__ import annotations

from pathlib import Path

import pytest

from engine.content import Registry, compile_sources
from engine.contentfiles import read_content
from engine.publish import publish
from engine.store.db import Database

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def registry() -> Registry:
    result = compile_sources(read_content(REPO / "content"), server_name="localhost")
    assert isinstance(result, Registry), result
    return result


@pytest.fixture
async def published(db: Database, registry: Registry) -> Registry:
    await publish(db, registry)
    return registry
