"""The desk, built whole: its service (inboxes loaded), its staff room when one is configured, and its parts —
served (its own listener, streams, webhooks) only by ``summon serve``; every process that finishes runs
delivers desk answers."""

from __future__ import annotations

from dataclasses import dataclass

from appservice.desk.metrics import DeskGauges
from appservice.desk.router import Seen
from appservice.desk.service import DeskService
from appservice.desk.staff_room import StaffRoom
from appservice.matrix.delivery.homeserver import Homeserver
from appservice.parts import Parts, Shared
from engine.content import Registry


@dataclass(frozen=True)
class Desk:
    service: DeskService
    staff_room: StaffRoom | None
    parts: Parts


async def build_desk(shared: Shared, *, homeserver: Homeserver) -> Desk:
    c = shared.config
    assert c.desk is not None
    async def look(user_id: str) -> Seen:
        """A staff member's presence and name, as the service user (who shares the staff room with them) sees."""
        presence, name = await homeserver.presence_of(shared.service_user, user_id)
        return Seen(presence, name)

    desk = DeskService(c.desk, shared.store, shared.registry, shared.clock, server_name=c.homeserver.server_name,
                       max_attempts=c.worker.max_attempts, look=look)
    # After its tasks have ended (so pushed before the task group's close): the webhooks' connections.
    shared.closing("the desk's webhook connections", desk.release)
    await desk.load()
    shared.metrics.read_also(DeskGauges(shared.metrics.registry, desk.outcomes).read)
    staff_room = None
    if c.desk.staff_room is not None:
        staff_room = StaffRoom(desk.desk, shared.registry, room_id=c.desk.staff_room,
                               service_user=shared.service_user)
        desk.changes.watch(staff_room)

    async def serve() -> None:
        shared.closing("the desk's listener and streams", desk.close)
        await desk.serve(shared.tasks, shared.stop)

    async def puppets() -> None:
        """The desk's bots into its staff room, so their answers and drafts go there by them."""
        assert staff_room is not None
        slugs = sorted({bot.slug for inbox in desk.desk.inboxes.values()
                        for bot in desk.desk.roster(inbox.row.id).all()})
        await staff_room.invite_puppets(homeserver, slugs)

    async def published(_: Registry) -> None:
        await puppets()

    parts = Parts(surface=desk.surface, serve=serve,
                  background=(("desk-staff-room", puppets),) if staff_room is not None else (),
                  on_publish=published if staff_room is not None else None)
    return Desk(service=desk, staff_room=staff_room, parts=parts)
