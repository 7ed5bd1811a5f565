"""The social surface in Matrix rooms (``appservice.matrix.inbound.lines.AlsoInRooms``): what the dispatcher offers
it, in the order the rooms surface offers its own claimers.

- A line in the review place's threads is the staff's (a reply to a draft sends its words); ``!rules`` is a
  staff member's, wherever the service hears it.
- In a bridged room, a guest's line (a bridge puppet's) is this surface's alone: it is matched against the room's
  rules and never reaches a command, a press or a mention — a guest asks no bot of ours directly.
- ✅ and 🗑 on a draft in the review place; every state event, for what it says of a bridge; and what the room is,
  for ``!bots status``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from appservice.matrix.inbound.followups import Followup
from appservice.matrix.inbound.said import Line
from appservice.social.asking import SocialAsking
from appservice.social.bridged import Bridges
from appservice.social.commands import RulesCommands
from appservice.social.kind import NAME
from appservice.social.review import Review
from appservice.social.tables import SocialTables
from engine.store import Tx


class SocialRooms:
    name = NAME

    def __init__(self, bridges: Bridges, commands: RulesCommands, asking: SocialAsking, review: Review,
                 ours: Callable[[str], bool]) -> None:
        self.bridges = bridges
        self.commands = commands
        self.asking = asking
        self.review = review
        self.ours = ours

    async def claim(self, tx: Tx, line: Line, event: Mapping[str, Any], followups: list[Followup]) -> bool:
        if await self.review.line(tx, line, self.ours):
            return True
        room = await tx.of(SocialTables).room(line.room_id)
        if room is not None and room.bridged and self.bridges.is_guest(line.sender, room):
            if line.sender != room.bridge:  # the bridge bot's own words (its status, its errors) are nobody's question
                await self.asking.heard(tx, line, room)
            return True
        return await self.commands.claim(tx, line, followups)

    async def reaction(self, tx: Tx, room_id: str, event: Mapping[str, Any], ours: Callable[[str], bool]) -> bool:
        return await self.review.reaction(tx, room_id, event, ours)

    async def state(self, tx: Tx, room_id: str, event: Mapping[str, Any]) -> None:
        await self.bridges.state(tx, room_id, event)

    async def about(self, tx: Tx, room_id: str) -> str:
        """For ``!bots status``: the bridge the room is known by, and how many rules it has ("" when not bridged)."""
        return await self.commands.about(tx, room_id)
