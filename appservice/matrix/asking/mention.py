"""A mention: the last of the claimers (``appservice.matrix.build.claim_order``). The first bot a line names
that hears mentions (``hears:``) is asked; in a DM with one bot, every line is addressed to it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from appservice.matrix.asking.asking import Asking
from appservice.matrix.inbound.followups import Followup
from appservice.matrix.inbound.mentions import named_bots
from appservice.matrix.inbound.said import Line
from appservice.matrix.ours import Ours
from appservice.matrix.tables.rooms import RoomTables
from engine.content import Registry
from engine.store import Tx

log = logging.getLogger(__name__)


class Mention:
    def __init__(self, registry: Callable[[], Registry], ours: Ours, asking: Asking) -> None:
        self._registry = registry
        self.ours = ours
        self.asking = asking

    async def claim(self, tx: Tx, line: Line, event: Mapping[str, Any], followups: list[Followup]) -> bool:
        """The first bot the line names that hears mentions (``hears:``) is asked. A bot whose file does
        not list ``mention`` is not summoned by being named: it wakes only as its file says."""
        registry = self._registry()
        named = named_bots(line, self.ours.puppets())
        if not named:
            named = await self._dm_of(tx, line, registry)
        if not named:
            return False
        by_user = {b.user_id: b for b in registry.bots.values()}
        bots = [by_user[user_id] for user_id in named if user_id in by_user]
        for bot in bots:
            if bot.hears_mentions:
                await self.asking.ask(tx, line, bot)
                return True
            log.info("line %s names %s, which does not hear mentions (hears: in %s)", line.event_id, bot.slug,
                     bot.source_path, extra={"room": line.room_id, "bot": bot.slug, "asker": line.sender})
        return False

    async def _dm_of(self, tx: Tx, line: Line, registry: Registry) -> list[str]:
        """In a DM with one bot — a room its puppet was invited to as a direct chat, whose only other reader
        is that puppet (the service user aside) — every line is addressed to it, as the peers answer a DM: no
        Matrix user expects to name whom they are talking to there. Anywhere else a line must name its bot; and
        a ``!word`` that is no command of ours is another bot's, even there."""
        if line.text.lstrip().startswith(("!", "/")):
            return []
        readers = await tx.of(RoomTables).direct_readers(line.room_id, 4)  # the person, the bot, the service user: 3 at most
        puppets = {b.user_id for b in registry.bots.values() if "rooms" in b.surfaces}
        people = [r.user_id for r in readers if not self.ours(r.user_id)]
        bots = [r.user_id for r in readers if r.user_id in puppets]
        return bots if people == [line.sender] and len(bots) == 1 else []
