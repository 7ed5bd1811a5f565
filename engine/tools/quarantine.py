"""Fetched documents parsed where a deadline really stops them (SPEC §15): in child processes with an
address-space limit, killed at the deadline.

A thread is no place to parse what a stranger wrote: when its deadline passes, the caller stops waiting but the
thread goes on (``/dev/zero`` handed to feedparser read on at 170 MiB/s after its 5 s were up), and abandoned
threads fill the default executor that name resolution shares (``getaddrinfo`` for every client waited behind
four of them). Here each document goes to one of a few long-lived children (``engine.tools.parsers``, started on
first use, each limited to ``memory_bytes`` of address space, writing no files, dying with the service); the
parent waits at most ``seconds`` and then kills it, and a child that ran out of memory, answered too much or
went away is replaced. A reply is bounded (``reply_bytes``), and a child is retired after ``uses`` documents, so
nothing one document did to its memory outlives many more. The children get an empty environment and no
descriptors but their pipes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from dataclasses import dataclass
from typing import Any

from engine.errors import ToolError
from engine.tools.parsers import REPLY, REQUEST

log = logging.getLogger(__name__)

_KINDS = {"feed": b"f", "links": b"l", "words": b"w"}
_SAID = {"memory": "it needed more memory than a document may use", "nesting": "it is nested too deeply"}


@dataclass(frozen=True)
class QuarantineLimits:
    children: int = 2
    memory_bytes: int = 256 * 1024 * 1024
    seconds: float = 5.0
    reply_bytes: int = 2 * 1024 * 1024
    uses: int = 500


class _Child:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.uses = 0

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    async def ask(self, kind: bytes, base: str, body: bytes, reply_bytes: int) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.uses += 1
        encoded = base.encode()
        self.process.stdin.write(REQUEST.pack(kind, len(encoded), len(body)) + encoded + body)
        await self.process.stdin.drain()
        (length,) = REPLY.unpack(await self.process.stdout.readexactly(REPLY.size))
        if length > reply_bytes:
            raise ToolError(f"it came to more than a document may ({length} bytes)")
        reply = json.loads(await self.process.stdout.readexactly(length))
        assert isinstance(reply, dict)
        return reply

    async def kill(self) -> None:
        if self.alive:
            self.process.kill()
        await self.process.wait()


class Quarantine:
    """Parses fetched documents in limited children. ``read(kind, …)`` → the parsed value, or ToolError in
    words (refused, too slow, too big); ``close()`` ends every child."""

    def __init__(self, limits: QuarantineLimits | None = None) -> None:
        self.limits = limits or QuarantineLimits()
        self._idle: list[_Child] = []
        self._busy: set[_Child] = set()
        self._slots = asyncio.Semaphore(self.limits.children)
        self._closed = False

    async def feed(self, url: str, body: bytes, *, seconds: float | None = None) -> dict[str, Any]:
        value = await self.read("feed", url, body, seconds=seconds)
        assert isinstance(value, dict)
        return value

    async def links(self, url: str, html: str, *, seconds: float | None = None) -> list[str]:
        value = await self.read("links", url, html.encode(), seconds=seconds)
        return [str(link) for link in value]

    async def words(self, url: str, html: str, *, seconds: float | None = None) -> str:
        return str(await self.read("words", url, html.encode(), seconds=seconds))

    async def read(self, kind: str, url: str, body: bytes, *, seconds: float | None = None) -> Any:
        if self._closed:
            raise ToolError(f"{url} could not be read: the service is stopping")
        limit = self.limits.seconds if seconds is None else seconds
        try:
            async with asyncio.timeout(limit):
                await self._slots.acquire()
        except TimeoutError:
            raise ToolError(f"{url} could not be read within {limit:g}s (every reader was busy); gave up") from None
        try:
            return await self._read(kind, url, body, limit)
        finally:
            self._slots.release()

    async def _read(self, kind: str, url: str, body: bytes, limit: float) -> Any:
        child = await self._child()
        self._busy.add(child)
        keep = False
        try:
            async with asyncio.timeout(limit):
                reply = await child.ask(_KINDS[kind], url, body, self.limits.reply_bytes)
            keep = "error" not in reply and child.uses < self.limits.uses
        except TimeoutError:
            log.info("quarantined %s parse of %s killed at its %gs deadline", kind, url, limit)
            raise ToolError(f"{url} could not be read within {limit:g}s; gave up") from None
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            # The child died under it: out of its address space (the kernel refused it more), or killed.
            log.info("quarantined %s parse of %s: the reader died (%s)", kind, url, type(exc).__name__)
            raise ToolError(f"{url} could not be read: {_SAID['memory']}") from None
        except ToolError as exc:
            raise ToolError(f"{url} could not be read: {exc}") from None
        finally:
            self._busy.discard(child)
            if keep and child.alive and not self._closed:
                self._idle.append(child)
            else:
                await child.kill()
        if "ok" in reply:
            return reply["ok"]
        if "refused" in reply:
            raise ToolError(f"{url} was not read: {reply['refused']}")
        log.info("quarantined %s parse of %s failed: %s", kind, url, reply.get("error"))
        raise ToolError(f"{url} could not be read: {_SAID.get(str(reply.get('error')), 'it does not parse')}")

    async def _child(self) -> _Child:
        while self._idle:
            child = self._idle.pop()
            if child.alive:
                return child
            await child.kill()
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-m", "engine.tools.parsers", str(self.limits.memory_bytes),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            env={}, close_fds=True)
        return _Child(process)

    async def close(self) -> None:
        self._closed = True
        children = [*self._idle, *self._busy]
        self._idle.clear()
        for child in children:
            await child.kill()
