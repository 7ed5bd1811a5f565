"""A LISTEN connection that dies without a word (a half-open TCP connection: no FIN, no RST, bytes dropped) is
noticed and replaced, so NOTIFY wakes its listener again — found by `make chaos`'s half-open-listen scenario, where
the workers' LISTEN connections stayed dead for good and every mention after waited for the poll (5 s)."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit, urlunsplit

import pytest

from engine.store import Store
from tests.chaos.proxies import SilentTcp
from tests.faults.support import wait_for
from tests.store import TestStore

pytestmark = pytest.mark.db


async def test_a_silently_dead_listen_connection_is_replaced_and_notify_wakes_again(db: TestStore, dsn: str) -> None:
    url = urlsplit(dsn)
    proxy = SilentTcp(url.hostname or "127.0.0.1", url.port or 5432, "127.0.0.1", 0)
    await proxy.start()
    assert proxy._server is not None
    port = proxy._server.sockets[0].getsockname()[1]
    through = urlunsplit(url._replace(netloc=f"{url.username}@127.0.0.1:{port}"))
    store = await Store.connect(dsn, min_size=1, max_size=2, listen_dsn=through, listen_check=0.3,
                                listen_timeout=0.5)
    woken = 0

    def wake() -> None:
        nonlocal woken
        woken += 1

    stop = asyncio.Event()
    listening = asyncio.ensure_future(store.listen("summon_test_half_open", wake, stop))
    try:
        await wait_for(lambda: _at_least(lambda: woken, 1), timeout=10, what="listening")
        await db.pool.execute("SELECT pg_notify('summon_test_half_open', '')")
        await wait_for(lambda: _at_least(lambda: woken, 2), timeout=10, what="the NOTIFY heard")

        proxy.silence()  # the connection is dead from here on; nothing says so
        await asyncio.sleep(0.1)
        proxy.speak()  # a new connection would work
        # Replaced: a new connection (woken once on connecting), and NOTIFY heard on it.
        await wait_for(lambda: _at_least(lambda: woken, 3), timeout=10, what="the dead connection replaced")
        assert proxy.connections >= 2
        heard = woken
        await db.pool.execute("SELECT pg_notify('summon_test_half_open', '')")
        await wait_for(lambda: _at_least(lambda: woken, heard + 1), timeout=10, what="NOTIFY heard again")
    finally:
        stop.set()
        await asyncio.wait_for(listening, 10)
        await store.close()
        await proxy.close()


async def _at_least(count: object, n: int) -> bool:
    assert callable(count)
    return bool(count() >= n)
