"""Where the builder is talked to without a mention (SPEC §10): a room whose only human is the person
writing and where the builder's puppet has joined — a DM with the builder, or one of their bots' own rooms.
In a bot's own room its charter rides on the run as standing context (its id, persona, schedule, sources,
task), so "make it daily at 8" or "remove this bot" is understood there. A line from anybody else — any
room another human reads — is never taken here (a mention still asks the builder as anywhere)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from appservice.matrix.asking.asking import Asking
from appservice.matrix.inbound.mentions import named_bots
from appservice.matrix.inbound.said import Line
from appservice.matrix.ours import Ours
from appservice.matrix.power import facts_now
from appservice.matrix.tables.rooms import RoomTables
from appservice.members.book import Book
from appservice.members.runs import standing
from engine.content import Registry
from engine.store import Tx

log = logging.getLogger(__name__)


class MemberRooms:
    def __init__(self, asking: Asking, book: Book, registry: Callable[[], Registry], ours: Ours, *, host: str,
                 server_name: str, service_user: str) -> None:
        self.asking = asking
        self.book = book
        self._registry = registry
        self.ours = ours
        self.host = host
        self.server_name = server_name
        self.service_user = service_user

    async def line(self, tx: Tx, line: Line, event: Mapping[str, Any]) -> bool:
        bot = self._registry().get(self.host)
        if bot is None or line.thread_root is not None:
            return False
        named = named_bots(line, self.ours.puppets())
        if named and named != [bot.user_id]:
            return False  # another bot was asked for by name: it is theirs
        member = await tx.of(RoomTables).member(line.room_id, bot.user_id)
        if member is None or member.membership != "join":
            return False
        facts = await facts_now(tx, line.room_id, line.sender, server_name=self.server_name,
                                service_user=self.service_user)
        if not facts.private:
            return False
        extra: dict[str, Any] | None = None
        for kept in await self.book.owned_by(tx, line.sender):
            if kept.charter.room_id == line.room_id:
                # The charter stays sealed: the run carries its id, and it is opened when the request is built.
                extra = {"standing": standing(kept.id, edition=False), "member_room": kept.id}
                break
        await self.asking.ask(tx, line, bot, extra_context=extra)
        return True
