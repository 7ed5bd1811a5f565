"""Rooms and puppets: what must be said to the homeserver about membership.

- Puppets ``@bot_<slug>`` are registered idempotently and take their bot's display name.
- They accept invites to rooms where their bot is offered (``surfaces: [rooms]``); an invite whose
  stripped state carries ``m.room.encryption`` is declined with the reason on the leave event, where
  the inviter sees it.
- A room that turns encrypted is left by every one of our users, the reason on the leave (never a
  plaintext message into an encrypted room).
- After a join, the room's current state is read and stored, so audiences and display names work from
  the first mention (the homeserver only pushes state that changes after we joined).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from appservice.matrix.delivery.homeserver import Homeserver
from appservice.matrix.dispatch import remember
from appservice.matrix.errors import MatrixError, NotLeft
from appservice.matrix.inbound.followups import (
    ATTEMPT_SECONDS,
    FIRST_TRY_SECONDS,
    KINDS,
    Decline,
    Followup,
    InvitePuppet,
    Join,
    LeaveEncrypted,
    PuppetLeaves,
    Transcribe,
)
from appservice.matrix.ours import Ours
from appservice.matrix.tables.room_actions import RoomActionTables
from appservice.matrix.tables.rooms import RoomTables
from engine.clock import Clock
from engine.content import Bot, Registry
from engine.content.strings import Strings
from engine.errors import StoreError
from engine.run.delivery import DeliveryLoop, Outcome, Refused, Sent
from engine.store import Store, Tx

if TYPE_CHECKING:
    from appservice.matrix.asking.voice import Hearing

log = logging.getLogger(__name__)

RETRY_SECONDS = 15.0  # then 60 s, 4 min, 16 min, …
MAX_ATTEMPTS = 6
RESUME_SECONDS = 30.0
# What the homeserver says when it never will (the invite was withdrawn, the room is gone).
PERMANENT = frozenset({"M_FORBIDDEN", "M_NOT_FOUND", "M_BAD_JSON", "M_INVALID_PARAM", "M_UNKNOWN_TOKEN"})


def backoff(attempts: int) -> float | None:
    """RETRY_SECONDS × 4^(attempts before this one), or None after MAX_ATTEMPTS."""
    return None if attempts >= MAX_ATTEMPTS else RETRY_SECONDS * 4 ** (attempts - 1)


@dataclass(frozen=True, slots=True)
class Remembered:
    """A remembered action taken to be carried out (``followup`` None: one this version cannot read)."""

    id: int
    followup: Followup | None
    attempts: int


def _room(item: Remembered) -> str | None:
    return item.followup.room_id if item.followup is not None else None


class _Actions:
    """The ``room_actions`` family read as a delivery queue of followups."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def claim(self, batch: int, hide_seconds: float) -> list[Remembered]:
        return [Remembered(r.id, followup_of(r.action), r.attempts)
                for r in await self.store.of(RoomActionTables).claim(batch, hide_seconds)]

    async def next_due(self) -> float | None:
        return await self.store.of(RoomActionTables).next_due()


def followup_of(action: Any) -> Followup | None:
    """A remembered action read back (None: a kind or a shape this version does not know)."""
    if not isinstance(action, dict):
        return None
    cls = KINDS.get(str(action.get("kind")))
    if cls is None:
        return None
    try:
        made: Followup = cls(**{k: v for k, v in action.items() if k != "kind"})
    except TypeError:
        return None
    return made

# Leave reasons are shown by clients on the membership event; they are the operator-facing words of the
# service itself, not a bot's (a bot's words are strings).
# Why a bot is away, declines an invite or leaves a room: the keys of the strings' ``### reasons`` (its presence
# status, the reason on its leave event). The words are the site's (the kit's by default); with none, nothing is
# said but the act.
REASONS = ("encrypted", "not_offered", "turned_encrypted", "no_provider", "no_key", "not_switched_on", "unpriced", "not_local", "not_listed")
# A room whose creation is this recent when one of our puppets has joined it was made with the bot in it.
NEW_ROOM_SECONDS = 600
# What a heartbeat's mode (``engine.providers.config.MODES``) says about why nothing can answer.
NO_PROVIDER = {"no provider: no key": "no_key", "no provider: not switched on": "not_switched_on"}


def reason_words(strings: Strings, why: str) -> str | None:
    """The words for ``why`` (a key of ``REASONS``) in the site's strings, or None."""
    return strings.get("reasons", why)


def presence_status(usable: bool, mode: str | None, strings: Strings) -> str | None:
    """A puppet's presence status: nothing when it can answer, otherwise why not."""
    if usable:
        return None
    return reason_words(strings, NO_PROVIDER.get(mode or "", "no_provider"))


class StoreEvent(Protocol):
    """One event stored in a savepoint of its own (``Dispatcher.one``): what it decided, or None when refused."""

    async def __call__(self, tx: Tx, event: Mapping[str, Any], *, what: str,
                       backfill: bool = False) -> list[Followup] | None: ...


class Rooms:
    def __init__(self, store: Store, homeserver: Homeserver, ours: Ours, registry: Callable[[], Registry],
                 clock: Clock, *, store_event: StoreEvent,
                 created: Callable[[Tx, str, Mapping[str, Any]], Awaitable[None]],
                 voice: Hearing | None = None, on_done: Callable[[Followup], Awaitable[None]] | None = None) -> None:
        """``store_event`` stores the state a join reads (as a backfill: nothing in it is news); ``created``
        wakes the bots of a room made with the bot in it (``StateHandler.created``)."""
        self.store = store
        self.homeserver = homeserver
        self._store_event = store_event
        self._created = created
        self.ours = ours
        self._registry = registry
        self.clock = clock
        self.on_done = on_done  # told of each action done, however it got done (a puppet's join: its commands)
        self.voice = voice  # hears the voice notes that summon a bot
        self._queue = _Actions(store)
        # One at a time, each held for its attempt's time: a batch held at once would run past its hold.
        self.actions: DeliveryLoop[Remembered] = DeliveryLoop(
            "room actions", self._queue, self, backoff, clock, batch=1, hide_seconds=FIRST_TRY_SECONDS,
            idle_seconds=RESUME_SECONDS)

    async def register_puppets(self) -> None:
        for bot in self._registry().bots.values():
            try:
                await self.homeserver.register(bot.user_id, bot.name)
            except MatrixError as exc:
                log.error("could not register the puppet %s: %s", bot.user_id, exc, extra={"bot": bot.slug})

    async def register_service(self, display_name: str) -> None:
        """The service's own user, with the display name the config gives it (it answers what is no bot's)."""
        try:
            await self.homeserver.register(self.ours.service_user, display_name)
        except MatrixError as exc:
            log.error("could not set the service user's profile: %s", exc)

    async def set_presence(self, usable: bool, mode: str | None = None, *, refused: Iterable[Bot] = ()) -> None:
        """Online when something can answer; otherwise unavailable, with the reason as the status (``mode``:
        what the freshest heartbeat said, e.g. that no key is configured). A bot refused at publish because its
        model has no price (``refused``) is unavailable, saying so."""
        strings = self._registry().strings
        status = presence_status(usable, mode, strings)
        shown = [(bot, usable, status) for bot in self._registry().bots.values()]
        shown += [(bot, False, reason_words(strings, "unpriced")) for bot in refused]
        for bot, online, why in shown:
            try:
                await self.homeserver.set_presence(bot.user_id, online, why)
            except MatrixError as exc:
                log.warning("could not set %s's presence: %s", bot.user_id, exc, extra={"bot": bot.slug})

    # --- remembered until done: one of the delivery queues (engine/run/delivery.py), this its sender --------

    async def carry_out_remembered(self, action_id: int, followup: Followup, attempts: int = 1) -> bool:
        """Carry out a remembered action (within ATTEMPT_SECONDS, inside the time its row is held) and
        write down how it went; True when it is done. The fast path: just remembered, its first attempt."""
        return await self.actions.deliver_one(Remembered(action_id, followup, attempts))

    async def resume_once(self, limit: int = 50) -> int:
        """Carry out what is due — remembered before a crash, or failing and due again — one at a time, each
        held for FIRST_TRY_SECONDS. How many were done."""
        done = 0
        for _ in range(limit):
            due = await self._queue.claim(1, FIRST_TRY_SECONDS)
            if not due:
                break
            done += await self.actions.deliver_one(due[0])
        return done

    async def resume(self, stop: asyncio.Event) -> None:
        await self.actions.run(stop)

    async def send(self, item: Remembered) -> Outcome:
        if item.followup is None:
            await self.store.of(RoomActionTables).failed(item.id, "an action this version cannot read", item.attempts)
            return None
        try:
            async with asyncio.timeout(ATTEMPT_SECONDS):
                why = await self.carry_out(item.followup)
        except TimeoutError:
            why = (f"the homeserver did not finish within {ATTEMPT_SECONDS:g}s", False)
        except StoreError as exc:
            why = (f"storing what it said failed ({type(exc).__name__}: {exc})", False)
        except Exception as exc:  # a bug or a shape we did not expect: counted, so it is given up in the end
            log.exception("carrying out %s failed", item.followup, extra={"room": item.followup.room_id})
            why = (f"{type(exc).__name__}: {exc}", False)
        if why is None:
            return Sent()
        error, permanent = why
        return Refused(error, retryable=not permanent)

    async def done(self, item: Remembered, sent: Sent) -> None:
        assert item.followup is not None
        await self.store.of(RoomActionTables).done(item.id, item.attempts)
        if self.on_done is not None:
            await self.on_done(item.followup)

    async def retry(self, item: Remembered, after: float, refused: Refused) -> None:
        await self.store.of(RoomActionTables).retry(item.id, after, refused.error, item.attempts)
        log.warning("%s: %s (will try again)", item.followup, refused.error, extra={"room": _room(item)})

    async def failed(self, item: Remembered, refused: Refused, *, gave_up: bool) -> None:
        await self.store.of(RoomActionTables).failed(item.id, refused.error, item.attempts)
        log.error("%s: %s (given up)", item.followup, refused.error, extra={"room": _room(item)})

    # --- carrying out ---------------------------------------------------------------------------------

    async def carry_out(self, followup: Followup) -> tuple[str, bool] | None:
        """Say it to the homeserver. None when done; else why not, and whether it never will be."""
        try:
            if isinstance(followup, Join):
                await self._join(followup)
            elif isinstance(followup, Decline):
                await self.homeserver.leave(followup.user_id, followup.room_id,
                                            reason_words(self._registry().strings, followup.why))
                log.info("declined an invite to %s for %s: %s", followup.room_id, followup.user_id, followup.why,
                         extra={"room": followup.room_id})
            elif isinstance(followup, LeaveEncrypted):
                await self._leave_all(followup.room_id, reason_words(self._registry().strings, "turned_encrypted"))
            elif isinstance(followup, InvitePuppet):
                # `!bots add`: the service's user invites; the puppet accepts like any invite where it is offered.
                await self.homeserver.invite(followup.by, followup.room_id, followup.user_id)
                log.info("%s invited to %s", followup.user_id, followup.room_id, extra={"room": followup.room_id})
            elif isinstance(followup, Transcribe):
                if self.voice is None:
                    log.warning("a voice note to hear, but voice notes are not heard here", extra={"room": followup.room_id})
                elif (later := await self.voice.hear(followup)) is not None:
                    return later, False
            elif isinstance(followup, PuppetLeaves):
                # `!bots remove`: the puppet leaves by itself (a kick would need the kick level).
                await self.homeserver.leave(followup.user_id, followup.room_id, followup.reason)
                log.info("%s left %s", followup.user_id, followup.room_id, extra={"room": followup.room_id})
        except MatrixError as exc:
            return (f"{exc.errcode}: {exc}" if exc.errcode else str(exc)), exc.errcode in PERMANENT
        return None

    async def _join(self, join: Join) -> None:
        await self.homeserver.join(join.user_id, join.room_id)
        log.info("%s joined %s", join.user_id, join.room_id, extra={"room": join.room_id})
        events = await self.homeserver.room_state(join.user_id, join.room_id)
        async with self.store.transaction("store_room_state") as tx:
            followups: list[Followup] = []
            for raw in events:
                # One bad state event never loses the rest.
                followups.extend(await self._store_event(tx, raw, what=f"state event of {join.room_id}",
                                                         backfill=True) or [])
            # A room made with the bot in it (the creation minutes old): its bots that hear room.created wake.
            create = next((e for e in events if e.get("type") == "m.room.create" and e.get("state_key") == ""), None)
            ts = create.get("origin_server_ts") if create is not None else None
            if create is not None and isinstance(ts, int) and \
                    self.clock.now().timestamp() * 1000 - ts <= NEW_ROOM_SECONDS * 1000:
                await self._created(tx, join.room_id, create)
            # We are already in; only what the state says now (it is encrypted) matters, remembered like any.
            remembered = await remember(tx, [f for f in followups if not isinstance(f, Join)])
        for action_id, f in remembered:
            await self.carry_out_remembered(action_id, f)

    async def _leave_all(self, room_id: str, reason: str | None) -> None:
        ours = [b.user_id for b in self._registry().bots.values()] + [self.ours.service_user]
        rows = await self.store.of(RoomTables).ours(room_id, ours)
        stayed = []
        for r in rows:
            try:
                await self.homeserver.leave(r.user_id, room_id, reason)
            except MatrixError as exc:
                if exc.errcode in PERMANENT:
                    continue  # not in it (any more): nothing to leave
                log.error("could not leave %s as %s: %s", room_id, r.user_id, exc, extra={"room": room_id})
                stayed.append(r.user_id)
        if stayed:
            # Raised, so the action is tried again (it is remembered) until every one of ours is out.
            raise NotLeft(f"still in the room: {', '.join(stayed)}")
        await self.store.of(RoomTables).mark_left(room_id)
        log.warning("left the encrypted room %s", room_id, extra={"room": room_id})
