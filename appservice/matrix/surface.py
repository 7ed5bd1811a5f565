"""The Matrix surface: how the engine's answers reach a room.

An answer is an ``m.notice`` (bots never answer notices, so no bot loops), markdown rendered to HTML
and sanitised to the spec's allowed tags, always with a plain ``body`` and an explicit ``m.mentions``
(the asker, so they are notified). In a thread it goes into that thread; otherwise it is a reply to
the asking line. It is queued in the outbox in the transaction that finishes the run. An answer that
ends in choices is cut here, once, and recorded as an offer (``appservice.matrix.offers``; pressed in
``presses``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import aiohttp
import asyncpg
from mautrix.appservice import AppServiceAPI
from mautrix.errors import MatrixError as MautrixError
from mautrix.types import RoomID, UserID

from appservice.matrix.offers import (
    POLL_START,
    answer_txn,
    keycap_content,
    keycap_txn,
    offer_markdown,
    poll_question,
    poll_start_content,
    poll_txn,
    style_of,
)
from appservice.matrix.outbox import Outbox
from appservice.matrix.render import render
from engine.content import Registry
from engine.core import choices
from engine.store.db import Database
from engine.surface import Answered, Outcome, RunInfo
from engine.tasks import TaskGroup

log = logging.getLogger(__name__)

TYPING_MS = 30_000
TYPING_DELAY = 0.8  # seconds a run works before its bot is shown typing
PROGRESS_DELAY = 4.0  # seconds a run works before it gets a progress line
PROGRESS_EVERY = 60.0  # how often the progress line is brought up to date


def progress_txn(run_id: int) -> str:
    return f"summon.run{run_id}.progress"


def answer_content(text: str, *, thread_root: str | None, reply_to: str | None, mention: str | None) -> dict[str, Any]:
    """A bot's notice: rendered, replying to ``reply_to`` (in its thread when there is one), and
    mentioning ``mention`` (the asker) — or nobody."""
    rendered = render(text)
    content: dict[str, Any] = {"msgtype": "m.notice", "body": rendered.body,
                               "m.mentions": {"user_ids": [mention]} if mention else {}}
    if rendered.formatted_body is not None:
        content["format"] = "org.matrix.custom.html"
        content["formatted_body"] = rendered.formatted_body
    if thread_root:
        relates: dict[str, Any] = {"rel_type": "m.thread", "event_id": thread_root, "is_falling_back": False}
        if reply_to:
            relates["m.in_reply_to"] = {"event_id": reply_to}
        content["m.relates_to"] = relates
    elif reply_to:
        content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
    return content


def run_content(run: RunInfo, text: str, *, mention: bool = True) -> dict[str, Any]:
    """A notice about ``run``: where it was asked, mentioning the asker unless ``mention`` is False."""
    return answer_content(text, thread_root=run.thread_root, reply_to=run.trigger_event,
                          mention=run.asked_by if mention else None)


class MatrixSurface:
    name = "rooms"

    def __init__(self, db: Database, api: AppServiceAPI, registry: Callable[[], Registry],
                 tasks: TaskGroup, *, typing_delay: float = TYPING_DELAY,
                 progress_delay: float = PROGRESS_DELAY, progress_every: float = PROGRESS_EVERY) -> None:
        self.db = db
        self.q = db.q
        self.api = api
        self._registry = registry
        self._tasks = tasks
        self.typing_delay = typing_delay
        self.progress_delay = progress_delay
        self.progress_every = progress_every
        self._typing: dict[int, asyncio.Task[bool]] = {}
        self._progress: dict[int, asyncio.Task[None]] = {}

    def _puppet(self, run: RunInfo) -> str | None:
        bot = self._registry().get(run.bot)
        return bot.user_id if bot is not None else None

    async def deliver(self, conn: asyncpg.Connection, run: RunInfo, outcome: Outcome) -> None:
        puppet = self._puppet(run)
        if puppet is None or run.room_id is None:
            log.error("run %s cannot be delivered: its bot or room is gone", run.id, extra={"run": run.id})
            return
        if await conn.fetchrow(self.q["outbox_event_for_txn"], progress_txn(run.id)) is not None:
            # The progress line goes when the answer (or the ending) lands.
            await Outbox.enqueue(conn, self.q, txn_id=f"{progress_txn(run.id)}.end", room_id=run.room_id,
                                 sender=puppet, event_type="m.room.redaction", content={}, run_id=run.id,
                                 of_txn=progress_txn(run.id))
        if isinstance(outcome, Answered):
            await self._answer(conn, run, puppet, outcome.text)
            return
        # The room hears the ending in the bot's words (strings: the kit's, the site's, the bot's own);
        # with no words the bot says nothing. The asker also hears why: the provider's own sentence.
        bot = self._registry().get(run.bot)
        words = bot.ending(outcome.ending) if bot is not None else None
        if not words:
            log.info("run %s ended %s; no words for it, so nothing is said", run.id, outcome.ending,
                     extra={"run": run.id})
            return
        text = f"{words}\n\n{outcome.reason}" if outcome.reason else words
        await Outbox.enqueue(conn, self.q, txn_id=f"summon.run{run.id}.ending", room_id=run.room_id,
                             sender=puppet, event_type="m.room.message",
                             content=run_content(run, text), run_id=run.id)

    async def _answer(self, conn: asyncpg.Connection, run: RunInfo, puppet: str, text: str) -> None:
        """The answer, cut once, here (SPEC §4): one that ends in choices is recorded as an offer and shown
        with its choices numbered, then the puppet's keycaps under it — or, where the room chooses polls,
        a poll. Any other answer goes as it was written."""
        room_id = run.room_id
        assert room_id is not None
        press = await conn.fetchrow(self.q["taken_press_of_run"], run.id)
        if press is not None and press["how"] != "number" and press["answer_event"]:
            # Summoned by a keycap or a vote: a reply to that would show nothing, so reply to the offer.
            run = replace(run, trigger_event=press["answer_event"])
        txn = answer_txn(run.id)
        cut = choices.cut(text)
        if not cut.offers:
            await Outbox.enqueue(conn, self.q, txn_id=txn, room_id=room_id, sender=puppet,
                                 event_type="m.room.message", content=run_content(run, text), run_id=run.id)
            return
        room = await conn.fetchrow(self.q["get_room"], room_id)
        style = style_of(room["settings"] if room is not None else None)
        await conn.execute(
            self.q["insert_offer"], run.id, run.bot, room_id, run.thread_root, run.asked_by, cut.words,
            [{"label": c.label, "detail": c.detail} for c in cut.choices],
            [{"label": link.label, "url": link.url} for link in cut.links],
            style, txn, poll_txn(run.id) if style == "poll" else None)
        await Outbox.enqueue(conn, self.q, txn_id=txn, room_id=room_id, sender=puppet,
                             event_type="m.room.message", run_id=run.id,
                             content=run_content(run, offer_markdown(cut.words, cut.choices, cut.links)))
        if style == "poll":
            await Outbox.enqueue(conn, self.q, txn_id=poll_txn(run.id), room_id=room_id, sender=puppet,
                                 event_type=POLL_START, run_id=run.id,
                                 content=poll_start_content(poll_question(cut.words), cut.choices,
                                                            thread_root=run.thread_root))
            return
        for n in range(1, len(cut.choices) + 1):
            await Outbox.enqueue(conn, self.q, txn_id=keycap_txn(run.id, n), room_id=room_id, sender=puppet,
                                 event_type="m.reaction", content=keycap_content(n), run_id=run.id, of_txn=txn)

    async def working(self, run: RunInfo, on: bool) -> None:
        """Typing, but only for a run that takes a while: an answer that comes at once needs no
        "typing…", and the typing requests would cost the homeserver (and the answer) time. Never
        awaited on the run's path: it is a courtesy."""
        if on:
            self._typing[run.id] = self._tasks.spawn(self._type_after(run), name=f"typing-{run.id}")
            self._progress[run.id] = self._tasks.spawn(self._progress_line(run), name=f"progress-{run.id}")
            return
        progress = self._progress.pop(run.id, None)
        if progress is not None:
            progress.cancel()
        pending = self._typing.pop(run.id, None)
        if pending is None:
            return
        if pending.done() and not pending.cancelled() and pending.result():
            self._tasks.spawn(self._set_typing(run, False), name=f"typing-off-{run.id}")
        else:
            pending.cancel()

    async def _progress_line(self, run: RunInfo) -> None:
        """A run past a few seconds gets one progress line (the site's words), edited in place while it
        works and removed when it ends; reacting 🛑 to it cancels the run."""
        await asyncio.sleep(self.progress_delay)
        registry = self._registry()
        bot = registry.get(run.bot)
        working = registry.strings.get("progress", "working")
        if bot is None or run.room_id is None or not working:
            return
        hint = registry.strings.get("progress", "cancel_hint")
        still = registry.strings.get("progress", "still_working")
        first = progress_txn(run.id)
        text, n = working.format(bot=bot.name), 0
        while True:
            content = run_content(run, f"{text} {hint}" if hint else text, mention=False)  # pings nobody
            queued = await self.db.fetchval(
                "enqueue_progress", first if n == 0 else f"{first}.{n}", run.id, run.room_id, bot.user_id,
                content, None if n == 0 else first)
            if queued is None or not still:
                return
            await asyncio.sleep(self.progress_every)
            n += 1
            minutes = max(1, round((self.progress_delay + n * self.progress_every) / 60))
            text = still.format(bot=bot.name, minutes=minutes)

    async def _type_after(self, run: RunInfo) -> bool:
        await asyncio.sleep(self.typing_delay)
        return await self._set_typing(run, True)

    async def _set_typing(self, run: RunInfo, on: bool) -> bool:
        puppet = self._puppet(run)
        if puppet is None or run.room_id is None:
            return False
        try:
            await self.api.intent(UserID(puppet)).set_typing(RoomID(run.room_id), timeout=TYPING_MS if on else 0)
        except (MautrixError, aiohttp.ClientError, OSError) as exc:  # a courtesy; must not stop the run
            log.debug("typing for run %s failed: %s", run.id, exc)
            return False
        return True
