"""The tools a member bot's run uses (SPEC §10): ``card`` (one validated card per run) and ``fetch`` given the
charter's own allow-list (the guarded client in ``engine.tools.fetch``; a charter without one has no
network), both under the charter's ``max_tool_calls``. An adapter: they read the run's steps and charter.
"""

from __future__ import annotations

import logging
from typing import Any

from appservice.members.book import Book, Kept
from appservice.members.card import read_card
from appservice.members.edition import calls_of, card_arguments, tool_calls
from appservice.members.errors import CharterUnreadable
from appservice.members.feeds import Feeds
from engine.core.messages import load_step
from engine.errors import ToolError
from engine.store import Store
from engine.tools.base import RunRef, ToolFn

log = logging.getLogger(__name__)

# A charter a run cannot find, or that will not open: the run is told, in words, and stops reaching out.
NO_CHARTER = "This run has no bot charter to work from, so it cannot use that tool."


async def charter_of(store: Store, book: Book, run: RunRef) -> Kept:
    context = await store.runs.context(run.id)
    charter_id = context.get("charter")
    if not isinstance(charter_id, str):
        raise ToolError(NO_CHARTER)
    try:
        pending = context.get("dry_run")
        kept = book.open_pending(charter_id, pending) if isinstance(pending, dict) else await book.read(store, charter_id)
    except CharterUnreadable as exc:
        log.error("run %s: %s", run.id, exc, extra={"run": run.id, "charter": charter_id})
        raise ToolError(NO_CHARTER) from None
    if kept is None:
        raise ToolError("This bot was removed; stop and say so in one line.")
    return kept


async def _within_budget(store: Store, run: RunRef, kept: Kept) -> list[Any]:
    steps = [load_step(p) for p in await store.runs.steps(run.id)]
    if tool_calls(steps) > kept.charter.max_tool_calls:
        raise ToolError(f"This run has used its {kept.charter.max_tool_calls} tool calls; write the edition now "
                        "from what you have.")
    return steps


def make_card(store: Store, book: Book) -> ToolFn:
    """``card``: ``{"card": {heading, blocks}}`` → accepted, or the mistakes, one line each, to fix."""

    async def card(run: RunRef, arguments: dict[str, Any]) -> str:
        kept = await charter_of(store, book, run)
        if not kept.charter.card or "card" not in kept.charter.tools:
            raise ToolError("This bot posts plain text only; write the edition as text.")
        steps = await _within_budget(store, run, kept)
        if any(r is not None and not r.is_error for _, r in calls_of(steps, "card")):
            raise ToolError("This run already composed its card (one card per edition); write the text now.")
        try:
            composed = read_card(card_arguments(arguments))
        except ValueError as exc:
            raise ToolError(f"That card is not valid; fix these and call card again: {exc}") from None
        return (f"Card accepted ({len(composed.blocks)} block(s) under {composed.heading!r}); it posts with your "
                "edition. Now write the edition's text: a short plain version of the same.")

    return card


def make_charter_fetch(store: Store, book: Book, feeds: Feeds) -> ToolFn:
    """``fetch`` for a member bot: the guarded client, given the charter's prefixes (and no others); a feed
    comes back as its entries."""

    async def fetch(run: RunRef, arguments: dict[str, Any]) -> str:
        kept = await charter_of(store, book, run)
        await _within_budget(store, run, kept)
        allow = kept.charter.fetches
        if not allow:
            raise ToolError("This bot reads nothing from the web (it has no sources).")
        url = arguments.get("url")
        if not isinstance(url, str) or not url.strip():
            raise ToolError('fetch needs {"url": "https://…"}, one of: ' + ", ".join(allow))
        try:
            return await feeds.read(url, allow)
        except ToolError as exc:
            log.info("member fetch failed: %s", exc, extra={"run": run.id, "charter": kept.id})
            raise

    return fetch


def on_surface(surface: str, members: ToolFn, other: ToolFn | None) -> ToolFn:
    """One tool name, two implementations: a member bot's run (on ``surface``) gets its charter's, every
    other run the deployment's (or none)."""

    async def tool(run: RunRef, arguments: dict[str, Any]) -> str:
        if run.surface == surface:
            return await members(run, arguments)
        if other is None:
            raise ToolError("That tool is not available here.")
        return await other(run, arguments)

    return tool

