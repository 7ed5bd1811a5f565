"""The running service's eye on content/: poll what the files look like, recompile when that changes,
and hand on only a registry that compiled. A bad edit keeps the last good registry live and its errors
are logged, every one, until the next edit.

Polling (names, sizes and modification times, every ``interval``) rather than inotify: no new
dependency, the same on every platform and on network mounts, and a content folder is small.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path

from engine.clock import Clock, SystemClock
from engine.content import Registry
from engine.content.files import FetchSpec, compile_content, fetch_url, files_under, where
from engine.content.kinds import Kinds
from engine.sandbox.box import Sandbox

log = logging.getLogger(__name__)

Snapshot = dict[str, tuple[int, int]]
RETRY_MAX = 30.0


def snapshot(*roots: Path | None) -> Snapshot:
    """Every visible file under the roots, with its size and modification time."""
    seen: Snapshot = {}
    for root in roots:
        if root is None or not root.is_dir():
            continue
        for file in files_under(root):
            relative = file.relative_to(root)
            if any(part.startswith(".") for part in relative.parts):
                continue
            try:
                stat = file.stat()
            except OSError:  # gone between the listing and the look: the next poll sees it
                continue
            if file.is_file():
                seen[file.as_posix()] = (stat.st_mtime_ns, stat.st_size)
    return seen


async def watch(
    root: Path,
    kit: Path | None,
    server_name: str,
    on_registry: Callable[[Registry], Awaitable[None]],
    on_errors: Callable[[list[str]], None],
    interval: float = 0.5,
    *,
    kinds: Kinds,
    fetch_spec: FetchSpec | None = fetch_url,
    sealed_places: Callable[[], Awaitable[Collection[str]]] | None = None,
    clock: Clock | None = None,
    sandbox: Sandbox | None = None,
    puppet_prefix: str = "bot_",
    stop: asyncio.Event | None = None,
) -> None:
    """Run until ``stop`` is set (between two looks: a change being published is finished), or until cancelled. ``sealed_places`` (read before each compile) names the places a schedule
    may not speak in (sealed: the deployment cannot read them), so an edit that aims one at one is refused like any bad edit. The files as they are when it starts count as already published (the
    service compiled them on its way up); each change after that is compiled once, and
    ``on_registry`` is awaited with a registry that compiled — if it raises (the database is down),
    the same change is tried again, backing off to ``RETRY_MAX`` seconds. ``on_errors`` is given
    the printable ``path:line: message`` lines of an edit that does not compile (each also logged). A code
    tool's module is loaded to check it only in a process of its own (``sandbox``), never in this one."""
    clock = clock or SystemClock()
    applied = await asyncio.to_thread(snapshot, root, kit)
    failed: Snapshot | None = None  # the last state that did not compile: its errors were said once
    delay = interval
    while True:
        if stop is None:
            await clock.sleep(delay)
        elif await clock.wait(stop, delay):
            return
        current = await asyncio.to_thread(snapshot, root, kit)
        if current == applied or current == failed:
            delay = interval
            continue
        try:
            sealed = await sealed_places() if sealed_places is not None else ()
        except Exception:  # the database is away: try the same change again shortly
            log.warning("could not read the sealed places before compiling; will try again", exc_info=True)
            delay = min(delay * 2, RETRY_MAX)
            continue
        compiled = await asyncio.to_thread(
            compile_content, root, kinds=kinds, server_name=server_name, kit=kit, fetch_spec=fetch_spec,
            sealed_places=sealed, sandbox=sandbox, puppet_prefix=puppet_prefix,
        )
        if isinstance(compiled, list):
            lines = [where(root, error, kit) if kit is not None else where(root, error) for error in compiled]
            for line in lines:
                log.error("content does not compile; the last good content stays live: %s", line)
            failed = current
            on_errors(lines)
            delay = interval
            continue
        try:
            await on_registry(compiled)
        except Exception:
            delay = min(max(delay * 2, interval), RETRY_MAX)
            log.exception("publishing changed content failed; trying again in %.1fs", delay)
            continue
        log.info("content changed and was republished: %s", ", ".join(compiled.bots) or "no bots")
        applied, failed, delay = current, None, interval
