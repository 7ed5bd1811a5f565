"""The Matrix surface: how the engine's answers reach a room.

An answer is an ``m.notice`` (bots never answer notices, so no bot loops), markdown rendered to HTML
and sanitised to the spec's allowed tags, always with a plain ``body`` and an explicit ``m.mentions``
(the asker, so they are notified). In a thread it goes into that thread; otherwise it is a reply to
the asking line. It is queued in the outbox in the transaction that finishes the run. An answer that
ends in choices is cut here, once, and recorded as an offer (``appservice.matrix.delivery.offers``; pressed in
``presses``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import Any

from appservice.matrix.asking.voice import SPEAK
from appservice.matrix.claimers.command_state import CommandState
from appservice.matrix.delivery.homeserver import Homeserver
from appservice.matrix.delivery.offers import (
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
from appservice.matrix.delivery.render import progress_txn, run_content
from appservice.matrix.errors import MatrixError
from appservice.matrix.inbound.said import read_event
from appservice.matrix.ours import PUPPET_PREFIX
from appservice.matrix.power import facts_now
from appservice.matrix.tables.offers import OfferTables
from appservice.matrix.tables.outbox import OutboxTables
from appservice.matrix.tables.rooms import RoomTables
from appservice.matrix.voice_tables import VoiceTables
from appservice.voices import VOICE
from engine.clock import Clock
from engine.content import Registry
from engine.content.audience import AudienceFacts
from engine.core import choices
from engine.core.messages import ToolCallStep, load_step
from engine.core.redact import redact
from engine.store import Families, Tx
from engine.surface import Answered, Outcome, RunInfo
from engine.tasks import TaskGroup
from engine.tools.base import is_personal

log = logging.getLogger(__name__)

TYPING_MS = 30_000
TYPING_DELAY = 0.8  # seconds a run works before its bot is shown typing
PROGRESS_DELAY = 4.0  # seconds a run works before it gets a progress line
PROGRESS_EVERY = 60.0  # how often the progress line is brought up to date


class RoomFacts:
    """Who a person is in a Matrix room (``facts_now``): the part of the rooms surface a schedule, an event
    or the handling of a line needs — no homeserver calls."""

    name = "rooms"

    def __init__(self, server_name: str, *, service_user: str | None = None,
                 puppet_prefix: str = PUPPET_PREFIX) -> None:
        self.server_name = server_name
        self.service_user = service_user
        self.puppet_prefix = puppet_prefix

    async def facts(self, db: Families, room_id: str | None, user_id: str | None, *,
                    site_classes: frozenset[str] = frozenset()) -> AudienceFacts:
        return await facts_now(db, room_id, user_id, server_name=self.server_name, service_user=self.service_user,
                               site_classes=site_classes, puppet_prefix=self.puppet_prefix)


class MatrixSurface:
    """The engine's ``Surface`` for Matrix rooms."""

    name = "rooms"

    def __init__(self, store: Families, homeserver: Homeserver, registry: Callable[[], Registry], tasks: TaskGroup,
                 clock: Clock, *, server_name: str, service_user: str | None = None,
                 puppet_prefix: str = PUPPET_PREFIX, commands: CommandState | None = None, typing_delay: float = TYPING_DELAY,
                 progress_delay: float = PROGRESS_DELAY, progress_every: float = PROGRESS_EVERY,
                 hand_over: Callable[[list[str]], Coroutine[Any, Any, None]] | None = None, speaks: bool = False) -> None:
        """``service_user``: the service's own user, which (like a puppet) is no reader of a room. ``hand_over``:
        the outbox's fast path (``Outbox.send_now``), when this process has one: what a run's last commit queued
        is handed to it as soon as the run is let go (after that commit), by transaction id. ``speaks``: a speech
        endpoint is named and buying is on: a voice: bot may answer a voice note aloud."""
        self.store = store
        self.homeserver = homeserver
        self._registry = registry
        self._tasks = tasks
        self.clock = clock
        self.server_name = server_name
        self.service_user = service_user
        self.puppet_prefix = puppet_prefix
        self.commands = commands
        self.typing_delay = typing_delay
        self.progress_delay = progress_delay
        self.progress_every = progress_every
        self.speaks = speaks
        self._typing: dict[int, asyncio.Task[bool]] = {}
        self._progress: dict[int, asyncio.Task[None]] = {}
        self.hand_over = hand_over
        self._fresh: dict[int, list[str]] = {}

    def _queued(self, run: RunInfo, txn: str) -> None:
        """Remember a message a held run's finishing commit queued, for the fast path."""
        if self.hand_over is not None and run.id in self._typing:
            self._fresh.setdefault(run.id, []).append(txn)

    def _puppet(self, run: RunInfo) -> str | None:
        bot = self._registry().get(run.bot)
        return bot.user_id if bot is not None else None

    async def facts(self, db: Families, room_id: str | None, user_id: str | None, *,
                    site_classes: frozenset[str] = frozenset()) -> AudienceFacts:
        return await facts_now(db, room_id, user_id, server_name=self.server_name, service_user=self.service_user,
                               site_classes=site_classes, puppet_prefix=self.puppet_prefix)

    async def published(self, registry: Registry) -> None:
        if self.commands is not None:
            await self.commands.publish_all(registry)

    async def deliver(self, tx: Tx, run: RunInfo, outcome: Outcome) -> None:
        puppet = self._puppet(run)
        if puppet is None or run.place is None:
            log.error("run %s cannot be delivered: its bot or room is gone", run.id, extra={"run": run.id})
            return
        if await tx.of(OutboxTables).sent_as(progress_txn(run.id)) is not None:
            # The progress line goes when the answer (or the ending) lands.
            await tx.of(OutboxTables).enqueue(txn_id=f"{progress_txn(run.id)}.end", room_id=run.place, sender=puppet,
                                    event_type="m.room.redaction", content={}, run_id=run.id,
                                    of_txn=progress_txn(run.id))
        if isinstance(outcome, Answered):
            if await self._shared_since(tx, run):
                await self._withheld(tx, run, puppet)
                return
            await self._answer(tx, run, puppet, outcome.text)
            return
        # The room hears the ending in the bot's words (strings: the kit's, the site's, the bot's own);
        # with no words the bot says nothing. The asker also hears why: the provider's own sentence, with
        # its links, addresses, ids and keys taken out (the whole sentence stays on the run, for the operator).
        bot = self._registry().get(run.bot)
        words = bot.ending(outcome.ending) if bot is not None else None
        if not words:
            log.info("run %s ended %s; no words for it, so nothing is said", run.id, outcome.ending,
                     extra={"run": run.id})
            return
        reason = redact(outcome.reason) if outcome.reason else ""
        text = f"{words}\n\n{reason}" if reason else words
        await tx.of(OutboxTables).enqueue(txn_id=f"summon.run{run.id}.ending", room_id=run.place, sender=puppet,
                                event_type="m.room.message", content=run_content(run, text), run_id=run.id)
        self._queued(run, f"summon.run{run.id}.ending")

    async def _shared_since(self, tx: Tx, run: RunInfo) -> bool:
        """Whether the answer read the person's own things (a personal tool was called) and the room is no
        longer theirs alone (somebody joined or was invited, it went public, while the run worked): whether the
        room was private was judged when the run was taken, and is judged again now, before it is said."""
        registry = self._registry()
        steps = [load_step(p) for p in await tx.runs.steps(run.id)]
        personal = any(isinstance(step, ToolCallStep) and is_personal(step.call.name, registry.tools.get(step.call.name))
                       for step in steps)
        if not personal:
            return False
        facts = await facts_now(tx, run.place, run.asked_by, server_name=self.server_name,
                                service_user=self.service_user, puppet_prefix=self.puppet_prefix)
        return not facts.private

    async def _withheld(self, tx: Tx, run: RunInfo, puppet: str) -> None:
        log.warning("run %s read the person's own things, and its room is no longer theirs alone: its answer is "
                    "not posted there", run.id, extra={"run": run.id, "bot": run.bot, "room": run.place})
        member = await tx.of(RoomTables).member(run.place or "", run.asked_by or "") if run.asked_by else None
        name = (member.display_name if member is not None else None) or run.asked_by or ""
        words = self._registry().strings.get("tools", "shared_now")
        if not words:
            return
        await tx.of(OutboxTables).enqueue(txn_id=answer_txn(run.id), room_id=run.place or "", sender=puppet,
                                event_type="m.room.message", content=run_content(run, words.format(name=name)),
                                run_id=run.id)
        self._queued(run, answer_txn(run.id))

    async def _aloud(self, tx: Tx, run: RunInfo, puppet: str, text: str) -> None:
        """A ``voice:`` bot asked by a voice note answers aloud too: a speak row after the text, which the outbox
        turns into a voice message as it sends it (or drops, the text standing, when speech has fallen)."""
        bot = self._registry().get(run.bot)
        voice = VOICE.of(bot) if bot is not None else None
        if not self.speaks or voice is None or run.trigger_event is None or not text.strip():
            return
        note = await tx.of(VoiceTables).note(run.trigger_event)
        asked = read_event(note.event()) if note is not None else None
        if asked is None or not asked.is_voice:
            return
        content = {**run_content(run, text), SPEAK: {"text": text, "voice": voice.voice}}
        await tx.of(OutboxTables).enqueue(txn_id=f"{answer_txn(run.id)}.voice", room_id=run.place or "", sender=puppet,
                                event_type="m.room.message", content=content, run_id=run.id)

    async def _answer(self, tx: Tx, run: RunInfo, puppet: str, text: str) -> None:
        """The answer, cut once, here (SPEC §4): one that ends in choices is recorded as an offer and shown
        with its choices numbered, then the puppet's keycaps under it — or, where the room chooses polls,
        a poll. Any other answer goes as it was written."""
        room_id = run.place
        assert room_id is not None
        press = await tx.of(OfferTables).taken_press_of_run(run.id)
        if press is not None and press.how != "number" and press.answer_event:
            # Summoned by a keycap or a vote: a reply to that would show nothing, so reply to the offer.
            run = replace(run, trigger_event=press.answer_event)
        txn = answer_txn(run.id)
        cut = choices.cut(text)
        if not cut.offers:
            await tx.of(OutboxTables).enqueue(txn_id=txn, room_id=room_id, sender=puppet, event_type="m.room.message",
                                    content=run_content(run, text), run_id=run.id)
            self._queued(run, txn)
            await self._aloud(tx, run, puppet, text)
            return
        room = await tx.of(RoomTables).get(room_id)
        style = style_of(room.settings if room is not None else None)
        await tx.of(OfferTables).insert(
            run_id=run.id, bot=run.bot, room_id=room_id, thread_root=run.thread, asked_by=run.asked_by,
            words=cut.words, choices=[{"label": c.label, "detail": c.detail} for c in cut.choices],
            links=[{"label": link.label, "url": link.url} for link in cut.links],
            style=style, answer_txn=txn, poll_txn=poll_txn(run.id) if style == "poll" else None)
        await tx.of(OutboxTables).enqueue(txn_id=txn, room_id=room_id, sender=puppet, event_type="m.room.message",
                                run_id=run.id, content=run_content(run, offer_markdown(cut.words, cut.choices, cut.links)))
        self._queued(run, txn)
        await self._aloud(tx, run, puppet, cut.words)
        if style == "poll":
            await tx.of(OutboxTables).enqueue(txn_id=poll_txn(run.id), room_id=room_id, sender=puppet, event_type=POLL_START,
                                    run_id=run.id, content=poll_start_content(poll_question(cut.words), cut.choices,
                                                                             thread_root=run.thread))
            return
        for n in range(1, len(cut.choices) + 1):
            await tx.of(OutboxTables).enqueue(txn_id=keycap_txn(run.id, n), room_id=room_id, sender=puppet,
                                    event_type="m.reaction", content=keycap_content(n), run_id=run.id, of_txn=txn)

    async def working(self, run: RunInfo, on: bool) -> None:
        """Typing, but only for a run that takes a while: an answer that comes at once needs no
        "typing…", and the typing requests would cost the homeserver (and the answer) time. Never
        awaited on the run's path: it is a courtesy."""
        if on:
            self._typing[run.id] = self._tasks.spawn(self._type_after(run), name=f"typing-{run.id}")
            self._progress[run.id] = self._tasks.spawn(self._progress_line(run), name=f"progress-{run.id}")
            return
        fresh = self._fresh.pop(run.id, None)
        if fresh and self.hand_over is not None:
            # Let go after its last commit: what that commit queued goes to the sender now.
            self._tasks.spawn(self.hand_over(fresh), name=f"send-now-{run.id}")
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
        await self.clock.sleep(self.progress_delay)
        registry = self._registry()
        bot = registry.get(run.bot)
        working = registry.strings.get("progress", "working")
        if bot is None or run.place is None or not working:
            return
        hint = registry.strings.get("progress", "cancel_hint")
        still = registry.strings.get("progress", "still_working")
        first = progress_txn(run.id)
        text, n = working.format(bot=bot.name), 0
        while True:
            content = run_content(run, f"{text} {hint}" if hint else text, mention=False)  # pings nobody
            queued = await self.store.of(OutboxTables).enqueue_progress(
                txn_id=first if n == 0 else f"{first}.{n}", run_id=run.id, room_id=run.place, sender=bot.user_id,
                content=content, of_txn=None if n == 0 else first)
            if not queued and n == 0 and await self.store.of(OutboxTables).sent_as(first) is not None:
                # The line is there already: it said the run was waiting (appservice.matrix.delivery.waiting, which puts
                # it back to "working" when the wait is over); it is kept up to date from here.
                queued = True
            if not queued or not still:
                return
            await self.clock.sleep(self.progress_every)
            n += 1
            minutes = max(1, round((self.progress_delay + n * self.progress_every) / 60))
            text = still.format(bot=bot.name, minutes=minutes)

    async def _type_after(self, run: RunInfo) -> bool:
        await self.clock.sleep(self.typing_delay)
        return await self._set_typing(run, True)

    async def _set_typing(self, run: RunInfo, on: bool) -> bool:
        puppet = self._puppet(run)
        if puppet is None or run.place is None:
            return False
        try:
            await self.homeserver.typing(puppet, run.place, TYPING_MS if on else 0)
        except MatrixError as exc:  # a courtesy; must not stop the run
            log.debug("typing for run %s failed: %s", run.id, exc)
            return False
        return True
