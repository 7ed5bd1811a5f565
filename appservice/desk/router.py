"""Routing what is handed to people (``hours.route`` decides; this carries it out): in the serving process, every
``ROUTE_SECONDS`` the conversations handed to people that nobody has are read; for an inbox with staff, their
presence is asked of the homeserver (outside any transaction, each answer kept ``SEEN_SECONDS``); then, each in a
transaction of its own with the conversation's row taken and read again, it is assigned to a present staff
member — the contact told who has it, the staff member pinged in the staff thread (``StaffRoom.status``) — or the
contact is told when a person will answer (once per handoff), and the desk looks again when that time comes (or
in a minute, when nobody was present)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from appservice.config import DeskInbox
from appservice.desk.desk import Desk, state_of
from appservice.desk.errors import RequestRefused
from appservice.desk.hours import DAYS, Assign, Hours, Promise, route
from appservice.desk.tables import DeskTables
from engine.clock import Clock
from engine.errors import StoreError
from engine.store import Store

log = logging.getLogger(__name__)

ROUTE_SECONDS = 1.0
SEEN_SECONDS = 5.0
LOOK_SECONDS = 3.0  # a presence answer later than this counts as not present
AGAIN_SECONDS = 60.0  # nobody present inside hours: look again this much later
BATCH = 50


@dataclass(frozen=True)
class Seen:
    presence: str  # online | unavailable | offline | unknown
    name: str | None = None  # their display name, when the homeserver says


Look = Callable[[str], Awaitable[Seen]]


def hours_of(inbox: DeskInbox) -> Hours | None:
    h = inbox.office_hours
    if h is None:
        return None
    return Hours(ZoneInfo(h.timezone), frozenset(DAYS.index(d) for d in h.days), time.fromisoformat(h.opens),
                 time.fromisoformat(h.closes))


class Router:
    def __init__(self, store: Store, desk: Desk, clock: Clock, look: Look | None) -> None:
        self.store = store
        self.desk = desk
        self.clock = clock
        self.look = look
        self._seen: dict[str, tuple[float, Seen]] = {}

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.once()
            except StoreError as exc:
                log.warning("desk: could not route handed conversations (the database is unavailable): %s", exc)
            await self.clock.wait(stop, ROUTE_SECONDS)

    async def once(self) -> int:
        """Decide every handed conversation due; how many were decided."""
        due = await self.store.of(DeskTables).to_route(BATCH)
        done = 0
        for conversation_id, inbox_id, fresh in due:
            inbox = self.desk.inboxes.get(inbox_id)
            if inbox is None:
                continue
            staff = list(inbox.settings.staff)
            seen = {s: await self._look(s) for s in staff}
            try:
                if await self._decide(conversation_id, inbox_id, fresh, inbox.settings, staff, seen):
                    done += 1
            except StoreError:
                raise
            except Exception:
                # One conversation that cannot be decided must not stop the others (nor the desk): said, and tried
                # again at the next round.
                log.exception("desk: could not decide who takes conversation %s", conversation_id,
                              extra={"room": f"desk:{conversation_id}"})
        return done

    async def _look(self, user_id: str) -> Seen:
        if self.look is None:
            return Seen("unknown")
        cached = self._seen.get(user_id)
        if cached is not None and self.clock.monotonic() - cached[0] < SEEN_SECONDS:
            return cached[1]
        try:
            async with asyncio.timeout(LOOK_SECONDS):
                seen = await self.look(user_id)
        except Exception as exc:
            log.warning("desk: could not read %s's presence: %s", user_id, exc)
            seen = Seen("unknown")
        self._seen[user_id] = (self.clock.monotonic(), seen)
        return seen

    async def _decide(self, conversation_id: int, inbox_id: int, fresh: bool, settings: DeskInbox, staff: list[str],
                      seen: Mapping[str, Seen]) -> bool:
        now = self.clock.now()
        async with self.store.transaction("desk_route") as tx:
            try:
                where = await self.desk.where(tx, conversation_id)
            except RequestRefused:
                return False
            state = state_of(where.conversation)
            if state.status != "open" or state.assignee is not None:
                return False  # taken meanwhile (the staff API's assign wins)
            last = await tx.of(DeskTables).last_routed(inbox_id, staff) if staff else {}
            decided = route(now=now, hours=hours_of(settings), staff=staff,
                            presence={s: v.presence for s, v in seen.items()}, last_routed=last)
            if decided is None:
                await tx.of(DeskTables).routed(conversation_id, to=None, promised=None, again=None)
                return True
            if isinstance(decided, Assign):
                name = seen[decided.staff].name or decided.staff.split(":", 1)[0].lstrip("@")
                where = await self.desk.assign(tx, where, decided.staff)
                await tx.of(DeskTables).routed(conversation_id, to=decided.staff, promised=None, again=None)
                await self.desk.told_who(tx, where, name)
                log.info("desk conversation %s assigned to %s (present)", conversation_id, decided.staff,
                         extra={"room": where.key})
                return True
            assert isinstance(decided, Promise)
            again = decided.when if decided.when is not None else now + timedelta(seconds=AGAIN_SECONDS)
            if fresh:
                await self.desk.promise(tx, where, None if decided.when is None else when_words(decided.when, hours_of(settings)))
            await tx.of(DeskTables).routed(conversation_id, to=None, promised=decided.when if fresh else None,
                                           again=again)
            log.info("desk conversation %s: nobody to assign now (%s); looking again at %s", conversation_id,
                     "outside office hours" if decided.when else "nobody present", again.isoformat(),
                     extra={"room": where.key})
            return True


def when_words(when: datetime, hours: Hours | None) -> str:
    """A promised moment as the contact reads it: in the inbox's time zone."""
    here = when.astimezone(hours.zone) if hours is not None else when
    return f"{here:%A %H:%M} ({here.tzname()})"
