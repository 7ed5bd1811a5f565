"""The tick that wakes scheduled bots (SPEC §6): every minute (configurable) it asks each live bot's
schedules what is owed, and summons the bot for it through the one door in (``engine.run.summon``).

The clock is kept on the bot (``bot_clock``), not worked out from runs:

- a schedule the tick has never seen starts its clock at now and fires nothing (never for the past);
- only the **last** occurrence between the last firing and now fires, so a service down for a week says
  good morning once;
- the clock is advanced *before* the summons, in the same transaction, so a refused, cancelled or
  failed run still counts as fired; the row is locked ``FOR UPDATE SKIP LOCKED``, so two services
  ticking at once fire it once, and the run's ``trigger_event`` names the occurrence, so even a
  rebuilt clock cannot start the same occurrence twice.

Schedules people made where they ask, which a surface keeps (a room's ``!bots schedule``), are fired the same
way, on their maker's behalf: the surface hands the tick what it keeps (``made``), each with the key its clock
is kept under in ``bot_clock`` (started when it was made).

When nothing is owed the tick writes nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from engine.clock import Clock
from engine.content import AudienceFacts, Registry, Schedule, ScheduleTrigger
from engine.content.audience import admits
from engine.content.schedule import last_between
from engine.errors import StoreError
from engine.run.refusals import Refused
from engine.run.summon import Summoned, Summons, summon
from engine.store import Store, Tx
from engine.surface import SurfaceFacts

log = logging.getLogger(__name__)

ResolveRoom = Callable[[str], Awaitable[str | None]]
SummonFn = Callable[[Tx, Registry, Summons], Awaitable[Summoned | Refused]]


@dataclass(frozen=True)
class MadeSchedule:
    """A schedule a person made where they ask, kept by a surface: it speaks where it was made (``in_``), on its
    maker's behalf (their standing gates it, their ceilings count it); its clock is kept under ``key``."""

    bot: str
    key: str
    schedule: Schedule
    in_: str
    ask: str
    made_by: str


# What a surface keeps of schedules people made, read at each tick.
MadeSchedules = Callable[[Store], Awaitable[Sequence[MadeSchedule]]]

# An alias lookup holds the clock's row lock while it waits: never for longer than this.
RESOLVE_SECONDS = 10.0


def trigger_key(trigger: ScheduleTrigger) -> str:
    """A stable key for one schedule: a hash of what it says (when, where, what to ask), not its place in
    the list, so reordering ``hears:`` keeps every clock, and an edited schedule starts a clock of its own
    (at now: it never fires for the past). Defaults are left out, so a field content adds later with a
    default does not restart every clock."""
    said = trigger.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    digest = hashlib.sha256(json.dumps(said, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return digest[:16]


async def schedule_tick(
    store: Store,
    registry: Registry,
    now: datetime,
    *,
    surface: SurfaceFacts,
    resolve_room: ResolveRoom,
    made: Sequence[MadeSchedules] = (),
    summon_fn: SummonFn = summon,
) -> list[int]:
    """Fire what is owed at ``now`` (the database's time); returns the ids of the runs it started, on
    ``surface``. ``resolve_room`` is the surface's: a schedule's ``in:`` as the place's id now (None when
    it cannot be found); ``made`` reads the schedules people made that the surface keeps."""
    started: list[int] = []
    owed: list[tuple[str, str, ScheduleTrigger | MadeSchedule]] = [
        (bot.slug, trigger_key(trigger), trigger)
        for bot in registry for trigger in bot.hears if isinstance(trigger, ScheduleTrigger)
    ]
    for kept in made:
        # A withdrawn bot's wake again when it is published again.
        owed += [(one.bot, one.key, one) for one in await kept(store) if registry.get(one.bot) is not None]
    # Each schedule in its own transaction: one that fails never holds back the others.
    for slug, key, trigger in owed:
        try:
            run_id = await _fire(store, registry, slug, key, trigger, now, surface, resolve_room, summon_fn)
        except StoreError:
            # Its own transaction rolled back, clock and all: the next tick tries it again.
            log.exception("schedule %s of %s failed; will try again", key, slug, extra={"bot": slug})
            continue
        if run_id is not None:
            started.append(run_id)
    return started


async def _fire(
    store: Store,
    registry: Registry,
    bot: str,
    key: str,
    trigger: ScheduleTrigger | MadeSchedule,
    now: datetime,
    surface: SurfaceFacts,
    resolve_room: ResolveRoom,
    summon_fn: SummonFn,
) -> int | None:
    async with store.transaction("schedule_tick") as tx:
        clock = await tx.schedules.clock_for_update(bot, key)
        if clock is None:
            # Absent (start it) or held by another tick (which fires it, not us).
            if await tx.schedules.start_clock(bot, key, now):
                log.info("schedule %s of %s starts its clock", key, bot, extra={"bot": bot})
            return None
        occurrence = last_between(trigger.schedule, clock.last_fired_at, now)
        if occurrence is None:
            return None
        await tx.schedules.advance_clock(bot, key, occurrence)
        when = occurrence.isoformat()
        place = await _room(trigger.in_, resolve_room, bot)
        if place is None:
            log.error(
                "schedule %s of %s owed %s, but room %s cannot be found; it counts as fired",
                key, bot, when, trigger.in_, extra={"bot": bot, "room": trigger.in_},
            )
            return None
        sealed = await tx.places.sealed(tx, place)
        facts = AudienceFacts(user_id=None, local_server=registry.server_name, is_member=False)
        subject = None
        if isinstance(trigger, MadeSchedule):
            # On its maker's behalf, as they stand now: a maker the bot no longer admits wakes nothing.
            subject = trigger.made_by
            facts = await surface.facts(tx, place, trigger.made_by)
            found = registry.get(bot)
            if found is None or not admits(found.audience, facts):
                log.warning("schedule %s of %s: its maker %s may no longer ask %s; it counts as fired",
                            key, bot, trigger.made_by, bot, extra={"bot": bot, "room": place})
                return None
        summons = Summons(
            bot=bot,
            surface=surface.name,
            prompt=trigger.ask,
            asked_by=None,
            subject=subject,
            facts=facts,
            place=place,
            trigger_event=f"schedule:{bot}:{key}:{when}",
            context={"kind": "schedule", "occurrence": when, "lines": []},
            encrypted=sealed,
        )
        outcome = await summon_fn(tx, registry, summons)
    if isinstance(outcome, Refused):
        log.warning(
            "schedule %s of %s owed %s, refused: %s; it counts as fired", key, bot, when, outcome.reason,
            extra={"bot": bot, "room": place},
        )
        return None
    log.info("schedule %s of %s woke run %s for %s", key, bot, outcome.run_id, when,
             extra={"bot": bot, "room": place, "run": outcome.run_id})
    return outcome.run_id


async def _room(room: str, resolve_room: ResolveRoom, bot: str) -> str | None:
    try:
        return await asyncio.wait_for(resolve_room(room), RESOLVE_SECONDS)
    except Exception:
        # Whatever the Matrix side raised (or a lookup that hung): the room is unknown for this tick.
        log.exception("could not resolve %s", room, extra={"bot": bot, "room": room})
        return None


# How long what only grows is kept.
KEEP_HOOK_DELIVERIES = 86_400.0
KEEP_REFUSALS = 30 * 86_400.0
# What a surface forgets of its own with each tick (its old rows), handed in by the root: how many rows went.
Prune = Callable[[Store], Awaitable[int]]


async def prune(store: Store, *, deliveries: float = KEEP_HOOK_DELIVERIES, refusals: float = KEEP_REFUSALS,
                theirs: Sequence[Prune] = ()) -> int:
    """Forget old hook deliveries and refused summonses, and whatever ``theirs`` forget (finished room actions,
    expired door sessions); how many rows went."""
    gone = await store.hooks.prune(deliveries)
    gone += await store.refusals.prune(refusals)
    for forget in theirs:
        gone += await forget(store)
    if gone:
        log.info("pruned %d old row(s)", gone)
    return gone


async def run_ticks(
    store: Store,
    registry_fn: Callable[[], Registry],
    clock: Clock,
    stop: asyncio.Event,
    *,
    every: float = 60,
    surface: SurfaceFacts,
    resolve_room: ResolveRoom,
    made: Sequence[MadeSchedules] = (),
    prunes: Sequence[Prune] = (),
) -> None:
    """Tick every ``every`` seconds (by ``clock``) until ``stop`` is set, against the registry published at
    the time and the database's time, the schedules the surfaces keep (``made``) too; each tick prunes, the
    surfaces' ``prunes`` too."""
    while not stop.is_set():
        try:
            now = await store.schedules.now()
            await schedule_tick(store, registry_fn(), now, surface=surface, resolve_room=resolve_room, made=made)
        except StoreError:
            log.exception("schedule tick failed; will try again")
        try:
            await prune(store, theirs=prunes)
        except StoreError:
            log.exception("pruning failed; will try again")
        await clock.wait(stop, every)
