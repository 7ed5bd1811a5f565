"""Provider tests talk HTTP, through the real SDKs, to fake providers on 127.0.0.1 only (the loopback
guard in tests/conftest.py fails any test that tries to resolve another host)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.providers.fake_provider import FakeProvider


@pytest.fixture
async def fake() -> AsyncIterator[FakeProvider]:
    server = FakeProvider()
    await server.start()
    try:
        yield server
    finally:
        await server.close()


@pytest.fixture
async def fake2() -> AsyncIterator[FakeProvider]:
    server = FakeProvider()
    await server.start()
    try:
        yield server
    finally:
        await server.close()
