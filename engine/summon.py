"""The one door in: a surface asks for a run here, and every refusal is made here, before the run exists.

``refusal`` is pure (the rules); ``summon`` applies it and inserts the run in the caller's transaction,
so a line and the run it summoned are stored together or not at all.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Literal

import asyncpg

from engine.content import AudienceFacts, Registry, admits
from engine.store.queries import Queries

log = logging.getLogger(__name__)

Refusal = Literal["not_published", "not_on_surface", "audience", "encrypted", "duplicate"]


@dataclass(frozen=True)
class Summons:
    bot: str
    surface: str
    prompt: str
    asked_by: str | None
    facts: AudienceFacts
    room_id: str | None = None
    thread_root: str | None = None
    trigger_event: str | None = None
    subject: str | None = None
    context: dict[str, Any] = field(default_factory=dict)
    script: list[dict[str, Any]] | None = None
    encrypted: bool = False


@dataclass(frozen=True)
class Summoned:
    run_id: int


@dataclass(frozen=True)
class Refused:
    reason: Refusal


def refusal(registry: Registry, s: Summons) -> Refusal | None:
    bot = registry.get(s.bot)
    if bot is None:
        return "not_published"
    if s.surface not in bot.surfaces:
        return "not_on_surface"
    if s.encrypted:
        return "encrypted"
    if bot.audience is not None and not admits(bot.audience, s.facts):
        return "audience"
    return None


async def summon(
    conn: asyncpg.Connection, q: Queries, registry: Registry, s: Summons, *, max_attempts: int = 3,
) -> Summoned | Refused:
    why = refusal(registry, s)
    if why is not None:
        log.info("summons refused: %s", why, extra={"bot": s.bot, "room": s.room_id, "asker": s.asked_by})
        return Refused(why)
    bot = registry.get(s.bot)
    assert bot is not None
    limits = {"steps": bot.limits.steps, "spend": bot.limits.spend, "minutes": bot.limits.minutes}
    run_id = await conn.fetchval(
        q["insert_run"], bot.slug, s.surface, s.room_id, s.thread_root, s.trigger_event, s.asked_by,
        s.subject or s.asked_by, s.prompt, s.context, s.script, limits, max_attempts,
    )
    if run_id is None:
        return Refused("duplicate")
    log.info("summoned run %s", run_id, extra={"bot": bot.slug, "room": s.room_id, "run": run_id})
    return Summoned(int(run_id))


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
