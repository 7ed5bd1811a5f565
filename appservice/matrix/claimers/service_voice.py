"""Who answers what belongs to no bot in particular (``!help``, ``!cancel``, a typo of a command): the
service's own user where it has joined the room, else — where nobody invited it — the first of our bots
that is there, since only a member can post. Its answers are notices replying to the line, in its thread."""

from __future__ import annotations

from collections.abc import Mapping

from appservice.matrix.delivery.render import answer_content
from appservice.matrix.inbound.said import Line
from appservice.matrix.tables.outbox import OutboxTables
from appservice.matrix.tables.rooms import RoomTables
from engine.content import Registry
from engine.store import Tx


def speaker(registry: Registry, service_user: str, people: Mapping[str, str | None]) -> str | None:
    """Who speaks for the service in a room of ``people`` (joined members): its own user, else the first of
    our bots in the room; None when none of ours is there."""
    if service_user in people:
        return service_user
    return next((b.user_id for b in registry.bots.values() if b.user_id in people), None)


async def people_in(tx: Tx, room_id: str) -> dict[str, str | None]:
    return {r.user_id: r.display_name for r in await tx.of(RoomTables).people(room_id)}


async def reply(tx: Tx, line: Line, sender: str, text: str, *, kind: str) -> None:
    """``text`` as a notice from ``sender`` replying to ``line`` (in its thread), under a txn id stable for
    the line (``summon.<kind>.<event id>``), so a redelivered line is answered once."""
    content = answer_content(text, thread_root=line.thread_root, reply_to=line.event_id, mention=line.sender)
    await tx.of(OutboxTables).enqueue(txn_id=f"summon.{kind}.{line.event_id}", room_id=line.room_id, sender=sender,
                            event_type="m.room.message", content=content)
