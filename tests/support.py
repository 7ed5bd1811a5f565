"""Small helpers shared by the db and matrix tests."""

from __future__ import annotations

import asyncio

from engine.providers.base import ProviderStatus


async def eventually(check, *, timeout: float = 15.0, interval: float = 0.05):  # type: ignore[no-untyped-def]
    """Poll ``check`` (sync or async) until it returns something truthy; fail after ``timeout``."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return result
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(interval)


# What a test's worker says on its heartbeat: the stand-in, chosen (as SUMMON_AGENT_MOCK=1 chooses it). A worker
# has no default status: one built without saying would count itself usable.
STAND_IN = ProviderStatus(usable=True, mode="stand-in: chosen")
