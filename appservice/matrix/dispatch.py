"""One appservice transaction, stored: its id remembered and every new event kept, in **one** database
transaction, before the homeserver is answered; each event in a savepoint of its own, so one bad event
never loses the others; each sent by its kind to the one handler for it:

    m.room.encrypted            never stored or read (we cannot, and a bot must not pretend it did)
    m.reaction                  a press on a bot's choices (``presses``), else 🛑 (``cancels``)
    poll responses              a vote on a bot's poll (``presses``)
    state (has a state_key)     the room's state as we keep it (``state``), then stored as a line too
    anything a person reads     a line (``lines``): stored, and acted on when new

Threads a summoning line needs that we never heard from the start are fetched before the transaction
begins (``context.ThreadBackfill``), so no room's row is locked while the homeserver is asked.

What must be said to the homeserver (join, decline, leave, invite) is remembered in the same commit
(``room_actions``) and carried out by ``rooms`` after it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from appservice.matrix.cancels import Cancels
from appservice.matrix.context import ThreadBackfill
from appservice.matrix.followups import Followup
from appservice.matrix.lines import LineHandler
from appservice.matrix.presses import POLL_RESPONSES, Presses
from appservice.matrix.said import read_event
from appservice.matrix.state import StateHandler
from engine.errors import StoreUnavailable
from engine.store import Store, Tx

log = logging.getLogger(__name__)

FIRST_TRY_SECONDS = 60.0  # how long a remembered action's first attempt holds its row before another may


async def remember(tx: Tx, followups: list[Followup]) -> list[tuple[int, Followup]]:
    """Record each action in the caller's transaction, so it outlives a crash before it is carried out."""
    remembered = []
    for f in followups:
        action = {"kind": type(f).__name__, **dataclasses.asdict(f)}
        remembered.append((await tx.room_actions.remember(f.room_id, action, FIRST_TRY_SECONDS), f))
    return remembered


class Dispatcher:
    def __init__(self, store: Store, *, state: StateHandler, lines: LineHandler, presses: Presses,
                 cancels: Cancels, threads: ThreadBackfill) -> None:
        self.store = store
        self.state = state
        self.lines = lines
        self.presses = presses
        self.cancels = cancels
        self.threads = threads

    async def transaction(self, txn_id: str, events: list[dict[str, Any]]) -> list[tuple[int, Followup]] | None:
        """Store a transaction's events; the actions it remembered for the homeserver, or None when the
        transaction was seen before (a replay). Raises ``StoreUnavailable`` when the whole transaction must
        be sent again."""
        fetched = await self.threads.fetch(self.store, events)
        async with self.store.transaction("store_transaction") as tx:
            if not await tx.lines.record_transaction(txn_id, len(events)):
                return None
            await self.threads.keep(tx, fetched)
            followups: list[Followup] = []
            for event in events:
                decided = await self.one(tx, event, what="event")
                if decided is not None:
                    followups.extend(decided)
            # Remembered with the events: a crash before the homeserver hears them loses nothing.
            return await remember(tx, followups)

    async def one(self, tx: Tx, event: Mapping[str, Any], *, what: str, backfill: bool = False) -> list[Followup] | None:
        """One event in a savepoint of its own: what it decided for the homeserver (which counts only if the
        savepoint stands), or None when it could not be stored (logged; the others go on)."""
        decided: list[Followup] = []
        try:
            async with tx.savepoint():
                await self.event(tx, event, decided, backfill=backfill)
        except StoreUnavailable:
            raise  # the database went away or asked for a retry: the homeserver sends the transaction again
        except Exception:
            log.exception("%s %s could not be stored; skipped", what, event.get("event_id"),
                          extra={"room": event.get("room_id")})
            return None
        return decided

    async def event(self, tx: Tx, event: Mapping[str, Any], followups: list[Followup], *,
                    backfill: bool = False) -> None:
        """Store one event. ``backfill`` (a room's state read after a join) only records: nothing in it is
        news, so nobody is woken, summoned or answered."""
        event_type = event.get("type")
        room_id = event.get("room_id")
        if not isinstance(room_id, str) or not isinstance(event_type, str):
            log.warning("event without a room or a type skipped: %r", event.get("event_id"))
            return
        if event_type == "m.room.encrypted":
            return
        await tx.rooms.ensure(room_id)
        await tx.rooms.lock(room_id)
        if event_type == "m.reaction":
            if not await self.presses.reaction(tx, room_id, event):
                await self.cancels.reaction(tx, room_id, event)
            return
        if event_type in POLL_RESPONSES:
            await self.presses.poll_response(tx, room_id, event)
            return
        if "state_key" in event:
            await self.state.event(tx, room_id, event, followups, backfill=backfill)
        line = read_event(event)
        if line is not None:
            await self.lines.line(tx, line, event, followups, backfill=backfill)
