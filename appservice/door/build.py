"""The door, built whole: its surface in every process with workers (so a door turn is handed over wherever it
ran), and its listener in ``summon serve`` when ``door.listen`` is configured."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from appservice.door.handed import ClientTools
from appservice.door.service import DoorListener
from appservice.door.surface import DoorSurface
from appservice.door.tables import forget_door_sessions
from appservice.matrix.delivery.homeserver import Homeserver
from appservice.parts import Parts, Shared, nothing
from engine.errors import StoreError

log = logging.getLogger(__name__)
PRUNE_SECONDS = 60.0


@dataclass(frozen=True)
class Door:
    surface: DoorSurface
    listener: DoorListener | None
    parts: Parts


def build_door(shared: Shared, *, homeserver: Homeserver, http: bool) -> Door:
    c = shared.config
    server = c.homeserver.server_name
    surface = DoorSurface(shared.registry, server_name=server, service_user=shared.service_user,
                          puppet_prefix=c.appservice.puppet_prefix)
    listener = None
    if http and c.door is not None and c.door.listen is not None:
        listener = DoorListener(
            c.door, store=shared.store, registry=shared.registry, clock=shared.clock, surface=surface,
            tasks=shared.tasks, server_name=server, service_user=shared.service_user, homeserver=homeserver,
            whoami=homeserver.whoami, max_attempts=c.worker.max_attempts)

    async def serve() -> None:
        assert listener is not None
        shared.closing("the door's listener", listener.stop)
        await listener.start(shared.stop)

    async def prune() -> None:
        """Every minute, as the schedule ticks prune: expired sessions and their grants forgotten."""
        while not shared.stop.is_set():
            try:
                await forget_door_sessions(shared.store)
            except StoreError:
                log.exception("door: pruning expired sessions failed; will try again")
            await shared.clock.wait(shared.stop, PRUNE_SECONDS)

    return Door(surface=surface, listener=listener, parts=Parts(
        surface=surface, serve=serve if listener is not None else nothing, background=(("door-prune", prune),),
        streams=True, handed=ClientTools(shared.store, shared.clock)))
