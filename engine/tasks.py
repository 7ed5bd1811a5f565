"""Background tasks that are never lost: the one helper that keeps a task's reference and logs what it
raised (never a bare ``asyncio.create_task``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from types import TracebackType
from typing import Any

log = logging.getLogger(__name__)


class TaskGroup:
    """Spawned tasks are kept, their failures logged with the group's name, and cancelled on exit."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str | None = None) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("task %s in %s failed", task.get_name(), self.name, exc_info=exc)

    async def __aenter__(self) -> TaskGroup:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self, grace: float = 0.0) -> None:
        """Give running tasks ``grace`` seconds to finish on their own (a loop that was told to stop
        finishes its cleanup, like releasing a connection), then cancel what is left."""
        tasks = list(self._tasks)
        if grace > 0 and tasks:
            await asyncio.wait(tasks, timeout=grace)
            late = sorted(t.get_name() for t in tasks if not t.done())
            if late:
                log.warning("%s: cancelling %d task(s) still running after %.1fs: %s", self.name, len(late), grace,
                            ", ".join(late))
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
