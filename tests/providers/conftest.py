"""Provider tests talk HTTP, through the real SDKs, to fake providers on 127.0.0.1 only. A guard makes
any attempt to resolve another host fail, and fails the test that tried."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from tests.providers.fake_provider import FakeProvider

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


@pytest.fixture(autouse=True)
def only_loopback(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    reached: list[str] = []
    real = socket.getaddrinfo

    def guarded(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else str(host)
        if name not in LOOPBACK:
            reached.append(name)
            raise socket.gaierror(socket.EAI_NONAME, f"provider tests stay on loopback, not {name}")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", guarded)
    yield reached
    assert reached == [], f"a test tried to reach beyond loopback: {reached}"


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
