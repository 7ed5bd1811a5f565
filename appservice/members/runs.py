"""A member bot's runs (SPEC §10): each edition (and the dry run that gates its birth) is an ordinary run on
the ``members`` surface — steps, limits, cancel, ``summon runs`` — of the bot that hosts member bots (the
builder), with the charter as its standing context and only the charter's id on the row to find it by."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from appservice.members.book import Book
from appservice.members.charter import AtSchedule, Charter
from appservice.members.errors import CharterUnreadable
from engine.content import AudienceFacts
from engine.run.summon import Summons
from engine.store import Store
from engine.surface import Opened, Opener

log = logging.getLogger(__name__)

SURFACE = "members"
ASK = "Write this edition now."


def schedule_words(charter: Charter) -> str:
    s = charter.schedule
    if isinstance(s, AtSchedule):
        return f"every day at {s.at} ({s.tz})"
    return f"every {s.every}"


def charter_note(charter_id: str | None, charter: Charter, *, edition: bool) -> str:
    """The charter as a run's standing context: what the bot is, where it reads, what it does."""
    lines = [
        f"This is the member bot {charter.glyph} {charter.name}" + (f" (bot_id {charter_id})" if charter_id else "")
        + f", made for {charter.owner}. It posts {schedule_words(charter)}.",
        f"Its task: {charter.prompt}",
    ]
    if charter.sources:
        lines.append("Its sources, as named: " + ", ".join(charter.sources) + ".")
    if charter.fetches:
        lines.append("What it may fetch (read each of these): " + ", ".join(charter.fetches))
    if edition:
        card = "compose one card with the card tool, then " if charter.card and "card" in charter.tools else ""
        lines.append(f"You are writing one of its editions now: read its sources, {card}write the edition. At most "
                     f"{charter.max_tool_calls} tool calls.")
    return "\n".join(lines)


OPENER = "charter"


def standing(charter_id: str, *, edition: bool) -> dict[str, Any]:
    """What a run's context carries of its charter: only its id (``engine.surface.Opener``); the words are
    opened from the seal when the model's request is built, so the run row never holds them."""
    return {"by": OPENER, "id": charter_id, "edition": edition}


def charter_opener(store: Store, book: Book) -> Opener:
    """Opens a run's charter (stored, or the pending one a dry run carries sealed) into its standing note."""

    async def open_charter(context: Mapping[str, Any]) -> Opened | None:
        about = context.get("standing")
        charter_id = about.get("id") if isinstance(about, Mapping) else None
        if not isinstance(charter_id, str):
            return None
        pending = context.get("dry_run")
        try:
            kept = book.open_pending(charter_id, pending) if isinstance(pending, dict) else await book.read(store, charter_id)
        except CharterUnreadable as exc:
            log.error("member bot %s: its charter does not open for its run: %s", charter_id, exc,
                      extra={"charter": charter_id})
            return None
        if kept is None:
            log.info("member bot %s was removed; its run has no charter to read", charter_id,
                     extra={"charter": charter_id})
            return None
        edition = bool(about.get("edition")) if isinstance(about, Mapping) else False
        note = charter_note(None if isinstance(pending, dict) else kept.id, kept.charter, edition=edition)
        # An edition (or a dry run) uses its charter's tools, never all its host's; a person talking to the bot
        # in its room talks to the builder, with the builder's.
        return Opened(note, frozenset(kept.charter.tools) if edition else None)

    return open_charter


def edition_summons(kept_id: str, charter: Charter, *, host: str, local_server: str, occurrence: datetime | None,
                    dry_run: dict[str, Any] | None = None) -> Summons:
    """The summons for one edition (``occurrence``), or for the dry run (``dry_run``: the pending charter,
    sealed, for its tools to read — the charter is not stored until the dry run works)."""
    context: dict[str, Any] = {"kind": "member", "charter": kept_id, "lines": [],
                               "standing": standing(kept_id, edition=True)}
    if dry_run is not None:
        context["dry_run"] = dry_run
    trigger = f"member:{kept_id}:dry" if dry_run is not None else f"member:{kept_id}:{occurrence.isoformat() if occurrence else ''}"
    return Summons(
        bot=host, surface=SURFACE, prompt=ASK, asked_by=None, subject=charter.owner,
        facts=AudienceFacts(user_id=None, local_server=local_server), place=charter.room_id,
        trigger_event=trigger, context=context, bounded=True,
    )
