"""Each puppet's commands as Matrix clients draw them (MSC4332): ``m.bot.commands`` (and the unstable
``org.matrix.msc4332.commands``) state, in every room it is joined to and has the power to, whenever it
joins and whenever content is republished. Only commands a plain member may run are published (state is
public to the room); rooms where it lacks power are skipped and logged."""

from __future__ import annotations

import logging

from appservice.matrix.claimers.commands import puppet_commands
from appservice.matrix.claimers.msc4332 import STATE_TYPES, command_state, may_send_state
from appservice.matrix.delivery.homeserver import Homeserver
from appservice.matrix.errors import MatrixError
from appservice.matrix.power import facts_in_room
from appservice.matrix.tables.rooms import RoomTables
from engine.content import Registry
from engine.store import Store

log = logging.getLogger(__name__)


class CommandState:
    def __init__(self, store: Store, homeserver: Homeserver) -> None:
        self.store = store
        self.homeserver = homeserver

    async def publish_all(self, registry: Registry) -> None:
        """Every puppet's command state, in every room it is joined to (after content is republished)."""
        for bot in registry.bots.values():
            if "rooms" not in bot.surfaces:
                continue
            for room_id in await self.store.of(RoomTables).joined_by(bot.user_id):
                await self.publish_in_room(registry, room_id, bot.user_id)

    async def publish_in_room(self, registry: Registry, room_id: str, puppet: str) -> bool:
        """Set ``puppet``'s state in ``room_id`` to its commands, if it is joined and has the power to (and
        only when it differs from what is there). True when the room now shows its commands."""
        bot = next((b for b in registry.bots.values() if b.user_id == puppet), None)
        room = await self.store.of(RoomTables).get(room_id)
        if bot is None or room is None or room.encrypted or room.left_at is not None:
            return False
        member = await self.store.of(RoomTables).member(room_id, puppet)
        if member is None or member.membership != "join":
            return False
        # State is public to the room: publish what a plain local member may run, never more.
        # (Someone the power levels do not name: they hold users_default.)
        plain = facts_in_room(f"@-:{registry.server_name}", room, registry.server_name)
        content = command_state(puppet_commands(registry, bot, plain), registry.strings)
        shown = True
        for event_type in STATE_TYPES:
            if not may_send_state(puppet, event_type, room):
                log.info("%s may not set %s in %s; its commands are not published there", puppet, event_type,
                         room_id, extra={"room": room_id, "bot": bot.slug})
                shown = False
                continue
            try:
                current = await self.homeserver.state_event(puppet, room_id, event_type, puppet)
                if current == content or (current is None and not content["commands"]):
                    continue
                await self.homeserver.set_state_event(puppet, room_id, event_type, puppet, content)
                log.info("published %d command(s) as %s in %s", len(content["commands"]), event_type, room_id,
                         extra={"room": room_id, "bot": bot.slug})
            except MatrixError as exc:
                log.warning("could not publish %s in %s: %s", event_type, room_id, exc,
                            extra={"room": room_id, "bot": bot.slug})
                shown = False
        return shown
