"""A line asks a bot: the Matrix side of the one door in (``engine.run.summon``), shared by a mention, a
press on a bot's choices and a command. The asker's facts are read off the room's power levels, the
context is the conversation as they could read it (``context``), a plain mention while their run still
works joins it, and a refusal they can act on (a spend ceiling, too many runs at once, the deployment's
daily cap) is told to them in the site's words."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from appservice.matrix.asking.context import ContextReader
from appservice.matrix.delivery.render import answer_content
from appservice.matrix.inbound.said import Line
from appservice.matrix.power import facts_in_room
from appservice.matrix.tables.outbox import OutboxTables
from appservice.matrix.tables.rooms import RoomTables
from engine.content import Bot, Registry
from engine.meter import NO_METER, Meter
from engine.run.refusals import TOLD, Refused, refusal_words
from engine.run.summon import Summoned, Summons, refusal, summon, would_refuse
from engine.store import Tx

log = logging.getLogger(__name__)

SURFACE = "rooms"
# The refusals a person is told about (``### refusals`` in strings), at most once a minute each.
TELL_EVERY_SECONDS = 60.0


class Asking:
    def __init__(self, registry: Callable[[], Registry], context: ContextReader, *, server_name: str,
                 max_attempts: int = 3, meter: Meter | None = None) -> None:
        self._registry = registry
        self.meter = meter or NO_METER
        self.context = context
        self.server_name = server_name
        self.max_attempts = max_attempts

    async def ask(
        self, tx: Tx, line: Line, bot: Bot, *, prompt: str | None = None, trigger_event: str | None = None,
        extra_context: Mapping[str, Any] | None = None, tell: bool = True,
    ) -> Summoned | Refused:
        """Summon ``bot`` for ``line``'s sender, where the line was said, with every refusal; a ceiling
        refusal is told to them. ``prompt`` replaces the line's words (a press sends the offer's own
        words); ``trigger_event`` replaces the line as the run's one trigger (a reaction, a vote);
        ``extra_context`` rides on the run's context (a command's name and arguments)."""
        registry = self._registry()
        room = await tx.of(RoomTables).get(line.room_id)
        assert room is not None
        facts = facts_in_room(line.sender, room, self.server_name)
        bare = Summons(bot=bot.slug, surface=SURFACE, prompt="", asked_by=line.sender, facts=facts,
                       place=line.room_id, encrypted=room.encrypted)
        # The context is read only for a summons that can stand; one refused on its face is refused with none.
        context = ({} if refusal(registry, bare) is not None
                   else await self.context.read(tx, line, registry.strings))
        if extra_context:
            context = {**context, **extra_context}
        # A plain mention while this person's run with this bot here still works joins that run (SPEC §4):
        # one answer to both, not two runs racing. A press or a command is an act of its own.
        plain = prompt is None and trigger_event is None and not extra_context
        name = next((seen["name"] for seen in context.get("lines", []) if seen.get("event_id") == line.event_id),
                    line.sender)
        later = ({"event_id": line.event_id, "sender": line.sender, "name": name, "said": line.text, "ts": line.ts}
                 if plain else None)
        result = await summon(tx, registry, Summons(
            bot=bot.slug, surface=SURFACE, prompt=line.text if prompt is None else prompt,
            asked_by=line.sender, facts=facts, place=line.room_id, thread=line.thread_root,
            trigger_event=trigger_event or line.event_id, context=context,
            encrypted=room.encrypted, later=later,
        ), max_attempts=self.max_attempts)
        if not isinstance(result, Summoned):
            await self._was_refused(tx, line, bot, result, tell=tell)
        return result

    async def would_refuse(self, tx: Tx, line: Line, bot: Bot, *, also_reserve: float = 0.0,
                           also_live: int = 0, tell: bool = True) -> Refused | None:
        """Whether asking ``bot`` for ``line`` would be refused now, by every gate ``ask`` makes but joining a
        live run, with nothing inserted (``engine.run.summon.would_refuse``): asked before something is paid for
        on the way to asking (a voice note's hearing). A refusal is recorded, and told as ``ask`` tells one
        (unless ``tell`` is False: the caller says it, ``tell_refusal`` first)."""
        room = await tx.of(RoomTables).get(line.room_id)
        assert room is not None
        refused = await would_refuse(tx, self._registry(), Summons(
            bot=bot.slug, surface=SURFACE, prompt="", asked_by=line.sender,
            facts=facts_in_room(line.sender, room, self.server_name), place=line.room_id,
            thread=line.thread_root, trigger_event=line.event_id, encrypted=room.encrypted,
        ), also_reserve=also_reserve, also_live=also_live)
        if refused is not None:
            await self._was_refused(tx, line, bot, refused, tell=tell)
        return refused

    async def _was_refused(self, tx: Tx, line: Line, bot: Bot, refused: Refused, *, tell: bool) -> None:
        self.meter.refused(refused.reason)
        log.info("line %s named %s but was refused: %s", line.event_id, bot.slug, refused.reason,
                 extra={"room": line.room_id, "bot": bot.slug})
        if tell:
            await self.tell_refusal(tx, line, bot.slug, refused)

    async def tell_refusal(self, tx: Tx, line: Line, slug: str, refused: Refused) -> bool:
        """A refusal the person can act on, in the site's words (with none, nothing is said); nothing was
        bought. Over a ceiling or the deployment's daily cap: when it frees up; too many runs: how many are
        live. Told at most once a minute per reason, so a flood of mentions is not answered line by line.
        True when they were told (now, or within the minute); False for a refusal this has no words for."""
        if refused.reason not in TOLD:
            return False
        registry = self._registry()
        bot = registry.get(slug)
        text = refusal_words(refused, registry.strings, bot.name) if bot is not None else None
        if bot is None or not text:
            return False
        if await tx.refusals.lately(line.sender, refused.reason, TELL_EVERY_SECONDS) > 1:
            log.info("refusal not told again within %ss", TELL_EVERY_SECONDS, extra={"room": line.room_id})
            return True
        content = answer_content(text, thread_root=line.thread_root, reply_to=line.event_id, mention=line.sender)
        await tx.of(OutboxTables).enqueue(txn_id=f"summon.refused.{line.event_id}", room_id=line.room_id, sender=bot.user_id,
                                event_type="m.room.message", content=content)
        return True
