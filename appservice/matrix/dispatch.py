"""One appservice transaction, stored: its id remembered and every new event kept before the homeserver is
answered — in **one** database transaction, or, when its events are several rooms' (a storm's), one a room, in
the order the rooms came, the id remembered with the last (``_store_by_room``: the first room's runs start while
the rest are stored) — one bad event never losing the others; each sent by its kind to the one handler for it:

    m.room.encrypted            never stored or read (we cannot, and a bot must not pretend it did)
    m.reaction                  a room another surface works from first (the desk's staff room: ✅/🗑 on a
                                draft), then a press on a bot's choices (``presses``), else 🛑 (``cancels``)
    poll responses              a vote on a bot's poll (``presses``)
    state (has a state_key)     the room's state as we keep it (``state``), then stored as a line too
    anything a person reads     a line (``lines``): stored, and acted on when new

Threads a summoning line needs that we never heard from the start are fetched before the transaction
begins (``context.ThreadBackfill``), so no room's row is locked while the homeserver is asked.

What must be said to the homeserver (join, decline, leave, invite) is remembered in the same commit
(``room_actions``) and carried out by ``rooms`` after it.

The events are first stored all at once, without a savepoint each (two round trips an event saved: a
backfill's hundred events in one room cost a third less). Should one of them fail, that attempt is rolled back
whole and the transaction stored again at once with every event in a savepoint of its own, so the bad one is
left out and the rest stand — the same outcome, in the same request, as if each had had its savepoint from
the start.

A transaction that can never be stored must not be answered 500 forever (the homeserver sends it again and
again, and everything after it waits). An event that fails in its savepoint is kept in ``rejected_events``
with its reason, and the rest stored. A failure outside any event's savepoint that a retry does not mend
(anything but ``StoreUnavailable``: the database away, or asking for the whole transaction again) is counted
durably, by the transaction id's digest, in a commit of its own (``as_transaction_failures``): after
``GIVE_UP_AFTER`` such attempts the transaction is stored *carefully* — everything outside the events in a
savepoint of its own too, so what fails is left out, logged, and the rest stands — and acknowledged. Should
even that fail ``LAST_TRIES`` more times, every event is recorded as rejected and the transaction
acknowledged, with an error logged: nothing stalls the homeserver's queue for good, and nothing vanishes
without a trace.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from appservice.matrix.asking.context import Fetched, ThreadBackfill
from appservice.matrix.claimers.cancels import Cancels
from appservice.matrix.claimers.presses import POLL_RESPONSES, Presses
from appservice.matrix.inbound.followups import FIRST_TRY_SECONDS, Followup
from appservice.matrix.inbound.lines import AlsoInRooms, LineHandler, RoomWork
from appservice.matrix.inbound.said import read_event
from appservice.matrix.inbound.state import StateHandler
from appservice.matrix.tables.lines import LineTables
from appservice.matrix.tables.room_actions import RoomActionTables
from appservice.matrix.tables.rooms import take_room
from engine.errors import StoreError, StoreRefused, StoreUnavailable, SurfaceError
from engine.store import Store, Tx

log = logging.getLogger(__name__)

Recorded = Literal["new", "replay", "unremembered"]
GIVE_UP_AFTER = 3  # failed attempts (a retry did not mend) before a transaction is stored without what fails
LAST_TRIES = 2  # careful attempts that failed too before every event is recorded as rejected and acknowledged
EVENT_CHARS = 65_536  # of a rejected event kept (a whole event is at most 64 KiB by the spec)
REASON_CHARS = 2_000


def txn_digest(txn_id: str) -> str:
    """What a transaction's failures are counted under: its id may be the very thing the database refuses."""
    return hashlib.sha256(txn_id.encode("utf-8", "surrogatepass")).hexdigest()


def storable(text: str, limit: int) -> str:
    """``text`` as the database takes any text: no NUL, no lone surrogate (each escaped), at most ``limit``."""
    clean = text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"


def described(exc: BaseException) -> str:
    return storable(f"{type(exc).__name__}: {exc}", REASON_CHARS)


async def remember(tx: Tx, followups: list[Followup]) -> list[tuple[int, Followup]]:
    """Record each action in the caller's transaction, so it outlives a crash before it is carried out."""
    remembered = []
    for f in followups:
        action = {"kind": type(f).__name__, **dataclasses.asdict(f)}
        remembered.append((await tx.of(RoomActionTables).remember(f.room_id, action, FIRST_TRY_SECONDS), f))
    return remembered


class _EventFailed(SurfaceError):
    """An event could not be read into the store in the pass without savepoints: that attempt is rolled back and
    made again, each event in a savepoint of its own (where it is rejected, and the rest stored)."""

    def __init__(self, event: Mapping[str, Any], cause: Exception) -> None:
        super().__init__(f"event {event.get('event_id')!r} failed: {described(cause)}")


class _FailedBefore(SurfaceError):
    """An attempt at this transaction failed before: stored again knowing how often (its first try's work, one
    statement, rolled back)."""

    def __init__(self, attempts: int) -> None:
        super().__init__(f"{attempts} earlier attempt(s) failed")
        self.attempts = attempts


class _FirstTryRefused(SurfaceError):
    """The first try's one statement was refused (the transaction id itself, say): its failures are asked on their
    own and it is stored as before it was known whether there were any."""


class Dispatcher:
    def __init__(self, store: Store, *, state: StateHandler, lines: LineHandler, presses: Presses,
                 cancels: Cancels, threads: ThreadBackfill, elsewhere: RoomWork | None = None,
                 also: Sequence[AlsoInRooms] = ()) -> None:
        self.store = store
        self.state = state
        self.lines = lines
        self.presses = presses
        self.cancels = cancels
        self.threads = threads
        self.elsewhere = elsewhere
        self.also = tuple(also)

    async def transaction(self, txn_id: str, events: list[dict[str, Any]]) -> list[tuple[int, Followup]] | None:
        """Store a transaction's events; the actions it remembered for the homeserver, or None when the
        transaction was seen before (a replay). Raises ``StoreUnavailable`` when the whole transaction must
        be sent again; raises what else failed (counted) until ``GIVE_UP_AFTER`` attempts have."""
        fetched = await self.threads.fetch(self.store, events)
        digest = txn_digest(txn_id)
        try:
            # The common case, in one database transaction whose first statement says whether an attempt at
            # this one failed before (failed=None); then it is stored as below, knowing how often.
            return await self._attempt(txn_id, digest, events, fetched, None, careful=False)
        except _FailedBefore as before:
            failed = before.attempts
        except _FirstTryRefused:
            failed = await self.store.of(LineTables).transaction_failures(digest)
        if failed >= GIVE_UP_AFTER + LAST_TRIES:
            return await self._give_up(txn_id, digest, events, failed)
        return await self._attempt(txn_id, digest, events, fetched, failed, careful=failed >= GIVE_UP_AFTER)

    async def _attempt(self, txn_id: str, digest: str, events: list[dict[str, Any]], fetched: Fetched,
                       failed: int | None, *, careful: bool) -> list[tuple[int, Followup]] | None:
        """Store it all at once, then (an event failing) each event in a savepoint; carefully, the latter only.
        A failure a retry does not mend is counted before it is raised."""
        try:
            if failed is None and len(rooms := by_room(events)) > 1:
                return await self._store_by_room(txn_id, digest, rooms, fetched)
            if not careful:
                try:
                    return await self._store(txn_id, digest, events, fetched, failed, careful=False, at_once=True)
                except _EventFailed as exc:
                    log.warning("transaction %r: %s; storing it again with each event in a savepoint of its own",
                                txn_id, exc, extra={"txn": txn_id})
                    failed = failed or 0  # that first try was a new one: it knew of no failure
            return await self._store(txn_id, digest, events, fetched, failed, careful=careful, at_once=False)
        except (StoreUnavailable, _FailedBefore, _FirstTryRefused):
            raise  # the database is away, or asked for it all again: the homeserver's retry mends it
        except Exception as exc:
            await self._count_failure(txn_id, digest, exc)
            raise

    async def _store_by_room(self, txn_id: str, digest: str, rooms: list[list[dict[str, Any]]],
                             fetched: Fetched) -> list[tuple[int, Followup]] | None:
        """The common case of a transaction of several rooms' events (a storm's): each room's in a commit of its
        own, in the order the rooms came, so the first room's runs start while the next rooms are stored and no
        commit holds more than one room's row; the id is remembered with the last room's. A crash or a failure
        part way stores nothing twice when the homeserver sends it again (an event is stored once, by its id,
        and only a newly stored line summons). Asked first, in a statement of its own: whether it was seen or
        failed before (then it is a replay, or stored as ``_attempt`` does once it knows how often)."""
        try:
            before, seen = await self.store.of(LineTables).peek_transaction(txn_id, digest)
        except StoreRefused as exc:
            raise _FirstTryRefused(str(exc)) from exc
        if before:
            raise _FailedBefore(before)
        if seen:
            return None
        remembered: list[tuple[int, Followup]] = []
        for n, events in enumerate(rooms[:-1]):
            remembered += await self._store_room(txn_id, events, fetched if n == 0 else None)
        last = await self._store(txn_id, digest, rooms[-1], None if len(rooms) > 1 else fetched, None,
                                 careful=False, at_once=True, retried=True)
        return None if last is None else remembered + last

    async def _store_room(self, txn_id: str, events: list[dict[str, Any]],
                          fetched: Fetched | None) -> list[tuple[int, Followup]]:
        """One room's events of a transaction, in a commit of their own: all at once, else (one failing) each in a
        savepoint of its own, as ``_attempt`` stores a whole transaction."""
        try:
            async with self.store.transaction("store_transaction_room") as tx:
                if fetched is not None:
                    await self._keep_threads(tx, fetched, careful=False)
                followups: list[Followup] = []
                for event in events:
                    followups.extend(await self._at_once(tx, event))
                return await remember(tx, followups)
        except _EventFailed as exc:
            log.warning("transaction %r: %s; storing its room's events again each in a savepoint of its own",
                        txn_id, exc, extra={"txn": txn_id})
        async with self.store.transaction("store_transaction_room") as tx:
            if fetched is not None:
                await self._keep_threads(tx, fetched, careful=False)
            followups = []
            for event in events:
                followups.extend(await self.one(tx, event, what="event", txn=txn_digest(txn_id)) or [])
            return await remember(tx, followups)

    async def _store(self, txn_id: str, digest: str, events: list[dict[str, Any]], fetched: Fetched | None,
                     failed: int | None, *, careful: bool, at_once: bool,
                     retried: bool = False) -> list[tuple[int, Followup]] | None:
        """One attempt at storing the transaction, in one database transaction. ``at_once``: the events without a
        savepoint each — the first to fail raises ``_EventFailed`` and the attempt is rolled back whole, or, with
        ``retried``, stored again at once each in a savepoint of its own. ``failed`` None: not yet known, asked with
        the id remembered (``_FailedBefore`` when there were). ``fetched`` None: the threads are kept already."""
        if retried:
            try:
                return await self._store(txn_id, digest, events, fetched, failed, careful=careful, at_once=at_once)
            except _EventFailed as exc:
                log.warning("transaction %r: %s; storing its last room's events again each in a savepoint of its "
                            "own", txn_id, exc, extra={"txn": txn_id})
                return await self._store(txn_id, digest, events, fetched, failed or 0, careful=careful,
                                         at_once=False)
        async with self.store.transaction("store_transaction") as tx:
            if failed is None:
                try:
                    before, new = await tx.of(LineTables).record_first_try(txn_id, len(events), digest)
                except StoreRefused as exc:
                    raise _FirstTryRefused(str(exc)) from exc
                if before:
                    raise _FailedBefore(before)
                recorded: Recorded = "new" if new else "replay"
            else:
                recorded = await self._record(tx, txn_id, len(events), careful=careful)
            if recorded == "replay":
                return None
            if fetched is not None:
                await self._keep_threads(tx, fetched, careful=careful)
            followups: list[Followup] = []
            rejected = 0
            for event in events:
                decided = (await self._at_once(tx, event) if at_once
                           else await self.one(tx, event, what="event", txn=digest))
                if decided is None:
                    rejected += 1
                else:
                    followups.extend(decided)
            if failed:
                if recorded == "new":  # an id never remembered keeps its count: sent again, it is careful at once
                    await tx.of(LineTables).forget_transaction_failures(digest)
                (log.error if careful or rejected else log.warning)(
                    "transaction %r stored after %d failed attempt(s)%s; %d event(s) rejected (see "
                    "rejected_events)", txn_id, failed, ", without what failed" if careful else "", rejected,
                    extra={"txn": txn_id})
            # Remembered with the events: a crash before the homeserver hears them loses nothing.
            return await self._remember(tx, followups, careful=careful)

    async def _at_once(self, tx: Tx, event: Mapping[str, Any]) -> list[Followup]:
        decided: list[Followup] = []
        try:
            await self.event(tx, event, decided)
        except StoreUnavailable:
            raise
        except Exception as exc:
            raise _EventFailed(event, exc) from exc
        return decided

    async def _record(self, tx: Tx, txn_id: str, events: int, *, careful: bool) -> Recorded:
        """Remember the transaction id. Carefully, an id the database refuses is not remembered: its events
        are still stored once each (by event id), so one sent again stores and summons nothing new."""
        if not careful:
            return "new" if await tx.of(LineTables).record_transaction(txn_id, events) else "replay"
        try:
            async with tx.savepoint():
                return "new" if await tx.of(LineTables).record_transaction(txn_id, events) else "replay"
        except StoreUnavailable:
            raise
        except Exception as exc:
            log.error("transaction %r: its id cannot be remembered (%s); its events are stored without it", txn_id,
                      described(exc), extra={"txn": txn_id})
            return "unremembered"

    async def _keep_threads(self, tx: Tx, fetched: Fetched, *, careful: bool) -> None:
        if not careful:
            await self.threads.keep(tx, fetched)
            return
        try:
            async with tx.savepoint():
                await self.threads.keep(tx, fetched)
        except StoreUnavailable:
            raise
        except Exception as exc:
            log.error("the threads fetched for a transaction could not be kept (%s); their contexts are "
                      "incomplete", described(exc))

    async def _remember(self, tx: Tx, followups: list[Followup], *, careful: bool) -> list[tuple[int, Followup]]:
        if not careful:
            return await remember(tx, followups)
        remembered: list[tuple[int, Followup]] = []
        for f in followups:
            try:
                async with tx.savepoint():
                    remembered.extend(await remember(tx, [f]))
            except StoreUnavailable:
                raise
            except Exception as exc:
                log.error("%s in %s could not be remembered (%s); it is not carried out", type(f).__name__,
                          f.room_id, described(exc), extra={"room": f.room_id})
        return remembered

    async def _count_failure(self, txn_id: str, digest: str, exc: Exception) -> None:
        """Count a failed attempt that a retry does not mend, in a commit of its own (the attempt's own writes
        are rolled back). The database refusing even that leaves the count as it was, said in the log."""
        try:
            attempts = await self.store.of(LineTables).count_transaction_failure(digest, described(exc))
        except StoreError as counting:
            log.error("transaction %r could not be stored (%s), nor its failure counted (%s)", txn_id,
                      described(exc), counting, extra={"txn": txn_id})
            return
        then = ("it will be stored without what fails" if attempts >= GIVE_UP_AFTER
                else f"{GIVE_UP_AFTER - attempts} more before it is stored without what fails")
        log.error("transaction %r could not be stored (attempt %d; %s): %s", txn_id, attempts, then,
                  described(exc), exc_info=exc, extra={"txn": txn_id})

    async def _give_up(self, txn_id: str, digest: str, events: list[dict[str, Any]],
                       failed: int) -> list[tuple[int, Followup]]:
        """The last resort, after storing it carefully failed too: every event recorded as rejected (each in
        its own commit) and the transaction acknowledged, so the homeserver's queue moves on."""
        reason = f"the transaction could not be stored in {failed} attempts"
        for event in events:
            try:
                await self.store.of(LineTables).reject(**_rejection(digest, event, reason))
            except StoreError as exc:
                log.error("event %r of transaction %r could not even be recorded as rejected (%s)",
                          event.get("event_id"), txn_id, exc, extra={"txn": txn_id})
        log.error("transaction %r acknowledged unstored after %d failed attempts; its %d event(s) are in "
                  "rejected_events", txn_id, failed, len(events), extra={"txn": txn_id})
        return []

    async def created(self, tx: Tx, room_id: str, create: Mapping[str, Any]) -> None:
        """A room made with our bots in it: the state handler's (``StateHandler.created``)."""
        await self.state.created(tx, room_id, create)

    async def one(self, tx: Tx, event: Mapping[str, Any], *, what: str, backfill: bool = False,
                  txn: str | None = None) -> list[Followup] | None:
        """One event in a savepoint of its own: what it decided for the homeserver (which counts only if the
        savepoint stands), or None when it could not be stored (logged, and kept in ``rejected_events`` with
        why; the others go on). ``txn`` is the digest of the transaction it came in."""
        decided: list[Followup] = []
        try:
            async with tx.savepoint():
                await self.event(tx, event, decided, backfill=backfill)
        except StoreUnavailable:
            raise  # the database went away or asked for a retry: the homeserver sends the transaction again
        except Exception as exc:
            log.exception("%s %s could not be stored; rejected", what, event.get("event_id"),
                          extra={"room": event.get("room_id")})
            try:
                async with tx.savepoint():
                    await tx.of(LineTables).reject(**_rejection(txn, event, described(exc)))
            except StoreUnavailable:
                raise
            except Exception:
                log.exception("%s %s could not even be recorded as rejected", what, event.get("event_id"),
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
        await take_room(tx, room_id)
        if event_type == "m.reaction":
            work = self.elsewhere
            if work is not None and await work.reaction(tx, room_id, event, self.lines.ours):
                return
            for other in self.also:
                if await other.reaction(tx, room_id, event, self.lines.ours):
                    return
            if not await self.presses.reaction(tx, room_id, event) and not await self.cancels.reaction(
                    tx, room_id, event) and not backfill:
                await self.state.reacted(tx, room_id, event)
            return
        if event_type in POLL_RESPONSES:
            await self.presses.poll_response(tx, room_id, event)
            return
        if "state_key" in event:
            await self.state.event(tx, room_id, event, followups, backfill=backfill)
            for other in self.also:
                await other.state(tx, room_id, event)
        line = read_event(event)
        if line is not None:
            await self.lines.line(tx, line, event, followups, backfill=backfill)


def by_room(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """A transaction's events by room, each room's in the order heard, the rooms in the order they first came
    (an event naming no room goes with the first room: it is skipped, logged, wherever it is)."""
    rooms: dict[Any, list[dict[str, Any]]] = {}
    for event in events:
        room = event.get("room_id")
        key = room if isinstance(room, str) else next(iter(rooms), None)
        rooms.setdefault(key, []).append(event)
    return list(rooms.values())


def _rejection(digest: str | None, event: Mapping[str, Any], reason: str) -> dict[str, Any]:
    """An event as ``rejected_events`` keeps it: whatever it holds, as text the database takes."""
    event_id, room_id = event.get("event_id"), event.get("room_id")
    return {
        "digest": digest,
        "event_id": storable(event_id, 255) if isinstance(event_id, str) else None,
        "room_id": storable(room_id, 255) if isinstance(room_id, str) else None,
        "reason": storable(reason, REASON_CHARS),
        "event": storable(json.dumps(event, ensure_ascii=True, default=repr), EVENT_CHARS),
    }
