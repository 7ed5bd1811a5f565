"""The personal tools (SPEC §8): ``about_me`` and ``raise_ticket``, and — kept apart at the end — the
audience reader ``site_classes``.

A personal tool is given the run and nothing else. In one transaction the engine lets ``agent_become_v1`` set
whom the transaction answers for from the run row, then takes the tools role (``SET LOCAL ROLE
summon_tools``: it owns nothing, row security applies to it, and it may not become another run), and asks
the person's own questions, which take no argument. There is no person anywhere in this code to pass
wrongly, and a test fails if one appears.

``null`` (nobody to ask about) and empty (they have none) are different answers, and the model is told
which in the site's words (``### tools`` in strings).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from engine.content.strings import Strings
from engine.errors import ToolError
from engine.store import Families, Store, Tx
from engine.tools.base import RunRef, SideEffects, ToolFn

log = logging.getLogger(__name__)

# The site's words, read at each call (content may be republished while the service runs).
Words = Callable[[], Strings]
# Tells the staff about a raised ticket, in the ticket's own transaction (the composition root wires it to
# the Matrix outbox); raising stands or falls with the telling.
Notify = Callable[[Tx, Mapping[str, Any]], Awaitable[None]]

SUBJECT_MAX = 300
BODY_MAX = 8000


def make_about_me(store: Store, words: Words) -> ToolFn:
    async def about_me(run: RunRef, args: dict[str, Any]) -> str:
        async with store.transaction("about_me") as tx:
            await tx.people.become(run.id)  # as the engine: the tools role may not choose whom it answers for
            await tx.people.as_tools()
            facts = await tx.people.about_me()
        return phrase_facts(facts, words())

    return about_me


def make_raise_ticket(store: Store, words: Words, notify: Notify | None = None) -> ToolFn:
    async def raise_ticket(run: RunRef, args: dict[str, Any]) -> str:
        title, body = _ticket_text(args)
        said = words()
        async with store.transaction("raise_ticket") as tx:
            await tx.people.become(run.id)
            await tx.people.as_tools()
            ticket = await tx.people.raise_ticket(run.id, title, body)
            if ticket is None:
                return said.get("tools", "nobody") or "null"
            await tx.people.as_engine()
            if notify is not None:
                await notify(tx, ticket)
        log.info("ticket %s raised", ticket["id"], extra={"run": run.id, "bot": run.bot})
        raised = said.get("tools", "ticket_raised")
        return raised.format(ticket=f"#{ticket['id']}") if raised else json.dumps({"ticket": ticket["id"]})

    return SideEffects(raise_ticket)  # a call retried after an interruption returns its first ticket


def phrase_facts(facts: Mapping[str, Any] | None, said: Strings) -> str:
    """``about_me_v1()``'s answer as the model reads it: nobody at all in one sentence; otherwise each
    fact, with a missing account and an empty list each said in the site's words."""
    if facts is None:
        return said.get("tools", "nobody") or "null"
    no_account, none = said.get("tools", "no_account"), said.get("tools", "none")
    shown: dict[str, Any] = {}
    for key, value in facts.items():
        if value is None and no_account:
            shown[key] = no_account
        elif value == [] and none:
            shown[key] = none
        else:
            shown[key] = value
    return json.dumps(shown, ensure_ascii=False, default=str)


def _ticket_text(args: Mapping[str, Any]) -> tuple[str, str]:
    title, body = args.get("subject"), args.get("body")
    if not isinstance(title, str) or not title.strip():
        raise ToolError("subject: give one line saying what the ticket is about")
    if not isinstance(body, str):
        raise ToolError("body: give a few sentences saying what is needed")
    title = title.strip()
    if "\n" in title or len(title) > SUBJECT_MAX:
        raise ToolError(f"subject: one line of at most {SUBJECT_MAX} characters")
    if len(body) > BODY_MAX:
        raise ToolError(f"body: at most {BODY_MAX} characters")
    return title, body.strip()


# --- not a personal tool: the audience reader -------------------------------------------------------------
# The engine (never a bot) asks which of the site's audience classes an account holds, to decide `for:` and
# `serves:`. It runs as the engine's own role and is given an account by the caller on purpose.


async def site_classes(db: Families, user_id: str | None) -> frozenset[str]:
    """The site's classes for ``user_id`` (``customer``, ``subscribed``, ``tier:<slug>``, ``role:<name>``,
    ``bought:<product>``), read from the people tables; none for nobody."""
    if user_id is None:
        return frozenset()
    return await db.people.site_classes(user_id)
