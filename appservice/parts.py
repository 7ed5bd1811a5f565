"""What the composition root hands each surface's builder, and what a builder hands back.

A builder (``appservice.matrix.build``, ``appservice.desk.build``, ``appservice.door.build``,
``appservice.members.build``) makes its surface's objects whole, each given its collaborators in its
constructor, and pushes how to close what it opened onto the root's one exit stack as it opens it. What it
returns says what the root does with it: the engine's ``Surface`` (for the worker), the routes on the
appservice's HTTP app, what to start when serving (listeners: their closing pushed on the stack too), the
background tasks to spawn after that, and what to do when content is published again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from appservice.config import Config
from appservice.metrics import Metrics
from engine.clock import Clock
from engine.content import Registry
from engine.store import Store
from engine.surface import Surface
from engine.tasks import TaskGroup
from engine.tools.base import Handed

log = logging.getLogger(__name__)

Background = tuple[str, Callable[[], Coroutine[Any, Any, Any]]]  # a task's name, and what it runs


@dataclass(frozen=True)
class Shared:
    """What every builder may be handed: the root's own objects, made before any surface."""

    config: Config
    store: Store
    registry: Callable[[], Registry]
    clock: Clock
    tasks: TaskGroup
    stop: asyncio.Event
    stack: AsyncExitStack
    service_user: str
    metrics: Metrics

    def closing(self, what: str, close: Callable[[], Awaitable[object]]) -> None:
        closing(self.stack, what, close)


def closing(stack: AsyncExitStack, what: str, close: Callable[[], Awaitable[object]]) -> None:
    """``close`` onto the exit stack, said in the log when it runs (so a stop that hangs says on what)."""
    async def logged() -> None:
        log.info("stopping: closing %s", what)
        await close()
    stack.push_async_callback(logged)


async def nothing() -> None:
    return None


@dataclass(frozen=True)
class Parts:
    """A surface as the root uses it (every field optional: only Matrix has routes on the appservice's app,
    the member bots serve nothing of their own)."""

    surface: Surface | None = None
    routes: Callable[[web.Application], None] | None = None
    serve: Callable[[], Awaitable[None]] = nothing
    background: tuple[Background, ...] = ()
    on_publish: Callable[[Registry], Awaitable[None]] | None = None
    # The surface answers as the model speaks: its runs' words are told as they come (engine/run/pieces.py).
    streams: bool = False
    # The tools the surface hands to its asker's own client to run (``engine.tools.base.Handed``), if any.
    handed: Handed | None = None
