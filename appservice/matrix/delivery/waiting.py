"""A queue people can see (issue 18): a run that waits longer than a moment — queued for a worker's slot, or
held and waiting in line for a provider's permit — says so on its progress line, in the site's words
(``### progress``: ``waiting``, "Helper will get to your question soon — 3 questions ahead of it…"; ``waiting_next``
when it is next), edited in place while it waits and put back to ``working`` when its wait is over. The room
never sees a silence that looks like failure.

One look every ``look_every`` seconds at what waits (``store.runs.waiting``: one query, whichever worker holds
the run), from the process that serves the homeserver. The line is the run's one progress line
(``progress_txn``): the worker's "working on it" line and this are the same message, so the answer landing
takes it away either way. A line's count is brought up to date at most every ``edit_every`` seconds, so a
long queue moving does not flood the homeserver with edits.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from appservice.matrix.delivery.render import progress_txn, run_content
from appservice.matrix.tables.outbox import OutboxTables
from engine.clock import Clock
from engine.content import Registry
from engine.errors import StoreError
from engine.store import Families
from engine.store.runs import WaitingRun
from engine.surface import RunInfo

log = logging.getLogger(__name__)

SURFACE = "rooms"
SHOWN_AFTER = 1.0  # seconds a run waits before its line says so ("longer than a moment")
LOOK_EVERY = 0.5
EDIT_EVERY = 10.0


@dataclass
class _Shown:
    text: str
    at: float  # when the line last changed (this process's monotonic clock)


class WaitingLines:
    def __init__(self, store: Families, registry: Callable[[], Registry], clock: Clock, *,
                 shown_after: float = SHOWN_AFTER, look_every: float = LOOK_EVERY,
                 edit_every: float = EDIT_EVERY) -> None:
        self.store = store
        self._registry = registry
        self.clock = clock
        self.shown_after = shown_after
        self.look_every = look_every
        self.edit_every = edit_every
        self._shown: dict[int, _Shown] = {}

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.look()
            except StoreError as exc:
                log.warning("could not look at what waits (%s); looking again shortly", exc)
            await self.clock.wait(stop, self.look_every)

    async def look(self) -> None:
        """Say so on the line of every run that waits; put back "working" on those whose wait is over."""
        now = self.clock.monotonic()
        waiting = await self.store.runs.waiting(self.shown_after, SURFACE)
        seen = set()
        for run in waiting:
            seen.add(run.id)
            text = self._text(run)
            if text is None:
                continue
            shown = self._shown.get(run.id)
            if shown is None:
                await self._say(run, text)
                self._shown[run.id] = _Shown(text, now)
            elif shown.text != text and now - shown.at >= self.edit_every:
                await self._say(run, text)
                self._shown[run.id] = _Shown(text, now)
        for run_id in [r for r in self._shown if r not in seen]:
            del self._shown[run_id]
            await self._working_again(run_id)

    def _text(self, run: WaitingRun) -> str | None:
        registry = self._registry()
        bot = registry.get(run.bot)
        if bot is None or run.place is None:
            return None
        strings = registry.strings
        words = strings.get("progress", "waiting_next") if run.ahead == 0 else None
        text = (words.format(bot=bot.name) if words
                else (strings.get("progress", "waiting") or "").format(bot=bot.name, ahead=run.ahead))
        if not text:
            return None
        hint = strings.get("progress", "cancel_hint")
        return f"{text} {hint}" if hint else text

    async def _say(self, run: WaitingRun, text: str) -> None:
        """The run's progress line says ``text``: posted when it has none yet, else edited in place."""
        bot = self._registry().get(run.bot)
        assert bot is not None and run.place is not None
        info = RunInfo(id=run.id, bot=run.bot, surface=run.surface, place=run.place, thread=run.thread,
                       trigger_event=run.trigger_event, asked_by=run.asked_by)
        content = run_content(info, text, mention=False)  # pings nobody
        first = progress_txn(run.id)
        if await self.store.of(OutboxTables).enqueue_progress(txn_id=first, run_id=run.id, room_id=run.place,
                                                    sender=bot.user_id, content=content, of_txn=None):
            log.info("run %s waits (%d ahead, %s); its line says so", run.id, run.ahead,
                     run.provider or "for a worker", extra={"run": run.id, "bot": run.bot})
            return
        # The line is there already (the worker's "working on it", or an earlier count): edited in place.
        await self.store.of(OutboxTables).enqueue_progress(txn_id=f"{first}.w{uuid.uuid4().hex[:12]}", run_id=run.id,
                                                 room_id=run.place, sender=bot.user_id, content=content,
                                                 of_txn=first)

    async def _working_again(self, run_id: int) -> None:
        """A run whose line said it waited, and that no longer waits: while it is worked on, "working"."""
        run = await self.store.runs.get(run_id)
        if run is None or run.status != "running" or run.cancel_requested or run.place is None:
            return
        registry = self._registry()
        bot = registry.get(run.bot)
        working = registry.strings.get("progress", "working")
        if bot is None or not working:
            return
        hint = registry.strings.get("progress", "cancel_hint")
        text = working.format(bot=bot.name)
        content = run_content(RunInfo.of(run), f"{text} {hint}" if hint else text, mention=False)
        await self.store.of(OutboxTables).enqueue_progress(txn_id=f"{progress_txn(run.id)}.w{uuid.uuid4().hex[:12]}",
                                                 run_id=run.id, room_id=run.place, sender=bot.user_id,
                                                 content=content, of_txn=progress_txn(run.id))
