"""The built-in ``search_site``: full-text search, in Postgres, over what the site publishes — its docs
(``content/docs/``), its skills' bodies and its commands' hints.

The index is rebuilt whole by every publish (``index_rows`` is what a publish writes), so a page
published now is found now, and a page changed is no longer found by the words it lost. Only what
anyone may read is indexed: a skill or command with an audience is withheld from the index rather
than shown to somebody it was not for (SPEC §3: withheld, never refused).
"""

from __future__ import annotations

import logging
from typing import Any

from engine.content import Registry
from engine.content.audience import Audience
from engine.errors import ToolError
from engine.store import Store
from engine.tools.base import RunRef, ToolFn

log = logging.getLogger(__name__)

HITS = 5
MAX_QUERY = 300

# collection, slug, title, body
Row = tuple[str, str, str, str]


def _for_anyone(audience: Audience | None) -> bool:
    return audience is None or any(term.kind == "anyone" for term in audience.terms)


def index_rows(registry: Registry) -> list[Row]:
    """What a publish of ``registry`` puts in the search index."""
    rows: list[Row] = [("docs", doc.path, doc.title, doc.body) for doc in registry.docs.values()]
    for skill in registry.skills.values():
        if _for_anyone(skill.audience):
            rows.append(("skills", skill.name, skill.name.replace("-", " "), f"{skill.description}\n\n{skill.text}"))
    for command in registry.commands.values():
        if _for_anyone(command.audience):
            args = "; ".join(
                f"{arg.name}: {arg.label}" + (f" ({', '.join(arg.choices)})" if arg.choices else "")
                for arg in command.args
            )
            body = "\n".join(part for part in (command.hint or "", args and f"Arguments — {args}") if part)
            rows.append(("commands", command.name, f"!{command.name}", body))
    return rows


def _where(collection: str, slug: str) -> str:
    if collection == "skills":
        return f'one of the skills: open it with open_skill("{slug}")'
    if collection == "commands":
        return f"a command: !{slug}"
    return f"the site's docs: {slug}"


def make_search_site(store: Store, *, hits: int = HITS) -> ToolFn:
    """The built-in ``search_site``: ``{"query": str}`` → the best few matches, each with its title,
    where it is, and a snippet with the matching words in bold."""

    async def search_site(run: RunRef, arguments: dict[str, Any]) -> str:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError('search_site needs {"query": "a few words"}')
        query = " ".join(query.split())
        if len(query) > MAX_QUERY:
            raise ToolError(f"that query is {len(query)} characters; search with a few words (at most {MAX_QUERY})")
        found = await store.search.find(query, hits)
        log.debug("search_site %r: %d hit(s)", query, len(found), extra={"run": run.id, "bot": run.bot})
        if not found:
            return f'Nothing on this site matches "{query}". Try other words, or say you could not find it.'
        lines = [f'{len(found)} result(s) for "{query}", best first:']
        for n, row in enumerate(found, 1):
            snippet = " ".join(row.snippet.split())
            lines.append(f"{n}. {row.title} — {_where(row.collection, row.slug)}\n   {snippet}")
        return "\n".join(lines)

    return search_site
