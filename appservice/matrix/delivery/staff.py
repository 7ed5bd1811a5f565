"""Telling the staff in Matrix (SPEC §9): a ticket a bot raised becomes a notice in the deployment's staff
room, queued in the ticket's own transaction, so a ticket nobody was told about cannot exist (and a notice
about a ticket that was rolled back is never sent)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from appservice.matrix.tables.outbox import OutboxTables
from appservice.matrix.tables.rooms import RoomTables
from engine.store import Tx

log = logging.getLogger(__name__)

TICKET_MARKER = "org.summon.ticket"


def ticket_notice(ticket: Mapping[str, Any]) -> dict[str, Any]:
    """The notice for one ticket: its number, subject and body, and whom it is for (an account, or the desk
    contact of a guest). It pings nobody."""
    who = ticket.get("user_id") or f"desk contact {ticket.get('contact_id')}"
    parts = [f"🎫 #{ticket['id']} {ticket['subject']}", str(ticket.get("body") or "").strip(),
             f"{who} · run {ticket.get('raised_by_run')}"]
    return {
        "msgtype": "m.notice",
        "body": "\n\n".join(part for part in parts if part),
        "m.mentions": {},
        TICKET_MARKER: {key: ticket.get(key) for key in ("id", "contact_id", "user_id", "raised_by_run")},
    }


async def tell_staff(tx: Tx, room_id: str, sender: str, ticket: Mapping[str, Any]) -> None:
    """Queue the ticket's notice to the staff room as ``sender``, under a transaction id of the ticket's own
    (a retried raise queues nothing new)."""
    room = await tx.of(RoomTables).get(room_id)
    if room is not None and room.encrypted:
        # Never a plaintext message into an encrypted room (SPEC §4): the ticket stands, nobody is told here.
        log.error("ticket %s raised, but the staff room %s is encrypted: not told there; configure a room "
                  "without encryption (tools.staff_room)", ticket.get("id"), room_id, extra={"room": room_id})
        return
    await tx.of(OutboxTables).enqueue(
        txn_id=f"summon-ticket-{ticket['id']}", room_id=room_id, sender=sender, event_type="m.room.message",
        content=ticket_notice(ticket), run_id=ticket.get("raised_by_run"),
    )
