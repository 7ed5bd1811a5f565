"""Waking on an event (SPEC §6): a member joined or left a room, or a site posted ``site.<name>`` to its
webhook. Each bot whose ``hears:`` names the event is summoned through the one door (``summon``), with
the event's ``ask:`` as its prompt and the event's facts riding on the run as its context.

A run nobody asked for has no asker, so ``serves:`` (checked against the event's subject) is the whole
gate — ``for:`` says who may *ask*, and nobody did. And there is one run per bot per conversation at a
time: a second event while the first run is still queued or running is refused ``busy``, by a query
first and by a unique index when two events race.

``hearers`` is pure and reads only the registry, so an event nobody declared a bot for costs nothing in
the database.
"""

from __future__ import annotations

import logging
import types
from collections.abc import Mapping
from typing import Any

from engine.content import Bot, EventTrigger, Registry, admits
from engine.errors import Conflict
from engine.run.refusals import Refused
from engine.run.summon import Summoned, Summons, summon
from engine.store import Tx
from engine.surface import SurfaceFacts

log = logging.getLogger(__name__)

Hearing = tuple[tuple[Bot, EventTrigger], ...]


def index(registry: Registry) -> Mapping[str, Hearing]:
    """Event name → the bots that hear it, each with its first trigger for that event (one run per bot
    per event: a second ``- event:`` of the same name in one file would only be a duplicate)."""
    found: dict[str, dict[str, tuple[Bot, EventTrigger]]] = {}
    for bot in registry.bots.values():
        for trigger in bot.hears:
            if isinstance(trigger, EventTrigger):
                found.setdefault(trigger.event, {}).setdefault(bot.slug, (bot, trigger))
    return types.MappingProxyType({name: tuple(by_bot.values()) for name, by_bot in found.items()})


def hearers(registry: Registry, event_name: str) -> list[tuple[Bot, EventTrigger]]:
    """The published bots that hear ``event_name``, in slug order."""
    return list(index(registry).get(event_name, ()))


async def wake(
    tx: Tx,
    registry: Registry,
    event_name: str,
    *,
    surface: SurfaceFacts,
    occurrence: str,
    place: str | None,
    subject: str | None,
    facts: dict[str, Any],
    conversation: str,
    only: str | None = None,
) -> list[Summoned | Refused]:
    """Summon every bot that hears ``event_name``, in the caller's transaction; one result per bot that
    hears it and may speak there (in ``place``, when given: only bots whose user is joined), on ``surface``.

    ``occurrence`` is what happened once — the Matrix event id, or the webhook's delivery id — so the
    same event delivered twice summons nothing twice. ``facts`` go on the run untouched. ``only``: the one bot
    (by its user) the event is about — a reaction wakes the bot whose line it was, not every bot that hears one."""
    hearing = [(bot, t) for bot, t in hearers(registry, event_name) if only is None or bot.user_id == only]
    if not hearing:
        return []
    if place is not None:
        # For now a bot is enabled in a room by being in it (its puppet joined, as room_members says).
        joined = await tx.places.present(tx, place, [bot.user_id for bot, _ in hearing])
        hearing = [(bot, trigger) for bot, trigger in hearing if bot.user_id in joined]
        if not hearing:
            return []
    sealed = await tx.places.sealed(tx, place) if place is not None else False
    about = await surface.facts(tx, place, subject)
    results: list[Summoned | Refused] = []
    for bot, trigger in hearing:
        extra = {"bot": bot.slug, "room": place, "event": event_name}
        if not admits(bot.serves, about):
            log.info("event %s not for %s's serves:", event_name, bot.slug, extra=extra)
            results.append(Refused("audience"))
            continue
        if await tx.runs.conversation_busy(bot.slug, conversation):
            log.info("event %s: %s is busy in %s", event_name, bot.slug, conversation, extra=extra)
            results.append(Refused("busy"))
            continue
        summons = Summons(
            bot=bot.slug, surface=surface.name, prompt=trigger.ask, asked_by=None, subject=subject, facts=about,
            place=place, trigger_event=f"event:{event_name}:{occurrence}:{bot.slug}",
            context={"kind": "event", "event": event_name, "facts": facts, "lines": []},
            encrypted=sealed,
        )
        try:
            async with tx.savepoint():  # a lost race undoes its run, not the caller's work
                result = await summon(tx, registry, summons)
                if isinstance(result, Summoned):
                    await tx.runs.mark_conversation(result.run_id, conversation)
        except Conflict:
            log.info("event %s: %s became busy in %s", event_name, bot.slug, conversation, extra=extra)
            result = Refused("busy")
        results.append(result)
    return results
