"""Stopping runs from a room: ``!cancel`` (or ``/cancel``) stops the sender's unfinished runs in the thread
(or the main timeline), and 🛑 on a run's progress line (or on the line that summoned it) stops that run.
A room moderator's stops everyone's. ``!cancel`` is answered, by whoever speaks for the service there
(``service_voice``): how many runs were told to stop, or that nothing of theirs was running."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from appservice.matrix.claimers.service_voice import people_in, reply, speaker
from appservice.matrix.inbound.followups import Followup
from appservice.matrix.inbound.said import Line
from appservice.matrix.ours import Ours
from appservice.matrix.power import facts_in_room
from appservice.matrix.tables.rooms import RoomTables
from engine.content.commands import SECTION
from engine.store import Tx

log = logging.getLogger(__name__)

CANCEL_WORDS = frozenset({"!cancel", "/cancel"})
STOP_KEYS = frozenset({"🛑", "\N{OCTAGONAL SIGN}\N{VARIATION SELECTOR-16}"})


class Cancels:
    def __init__(self, ours: Ours, *, server_name: str) -> None:
        self.ours = ours
        self.server_name = server_name

    @staticmethod
    def is_cancel(line: Line) -> bool:
        return line.text.strip() in CANCEL_WORDS

    async def claim(self, tx: Tx, line: Line, event: Mapping[str, Any], followups: list[Followup]) -> bool:
        """The order's "cancel" step (``build.claim_order``): True when ``line`` was a cancel word (carried out)."""
        if not self.is_cancel(line):
            return False
        await self.line(tx, line)
        return True

    async def line(self, tx: Tx, line: Line) -> None:
        asker = None if await self._is_moderator(tx, line.room_id, line.sender) else line.sender
        ids = await tx.runs.request_cancel(line.room_id, line.thread_root, asker)
        log.info("%s asked to cancel; %d run(s) told to stop", line.sender, len(ids), extra={"room": line.room_id})
        registry = self.ours.registry()
        words = (registry.strings.get(SECTION, "cancelled") if ids
                 else registry.strings.get(SECTION, "nothing_to_cancel"))
        sender = speaker(registry, self.ours.service_user, await people_in(tx, line.room_id))
        if words and sender is not None:
            await reply(tx, line, sender, words.format(runs=len(ids)), kind="cancel")

    async def reaction(self, tx: Tx, room_id: str, event: Mapping[str, Any]) -> bool:
        """A stop sign on a run's line (its progress line, the asking line): True when it was one."""
        content = event.get("content")
        rel = content.get("m.relates_to") if isinstance(content, dict) else None
        sender = event.get("sender")
        if not isinstance(rel, dict) or rel.get("rel_type") != "m.annotation" or not isinstance(sender, str):
            return False
        if rel.get("key") not in STOP_KEYS or not isinstance(rel.get("event_id"), str) or self.ours(sender):
            return False
        asker = None if await self._is_moderator(tx, room_id, sender) else sender
        ids = await tx.runs.request_cancel_by_event(rel["event_id"], asker, room_id)
        log.info("%s reacted 🛑; %d run(s) told to stop", sender, len(ids), extra={"room": room_id})
        return True

    async def _is_moderator(self, tx: Tx, room_id: str, user_id: str) -> bool:
        room = await tx.of(RoomTables).get(room_id)
        if room is None:
            return False
        return facts_in_room(user_id, room, self.server_name).is_moderator
