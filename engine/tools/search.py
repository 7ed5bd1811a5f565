"""The built-in ``search_site``: full-text search, in Postgres, over what the site publishes — its docs
(``content/docs/``), its skills' bodies and its commands' hints.

The index is rebuilt whole by every publish (``index_rows`` is what a publish writes), so a page
published now is found now, and a page changed is no longer found by the words it lost. Only what
anyone may read is indexed: a skill or command with an audience is withheld from the index rather
than shown to somebody it was not for (SPEC §3: withheld, never refused).

In the site's language, never English-only: the site's strings name it (``### words`` ``language``: a name or
an ISO code — english, fr, Deutsch…), the index is built with PostgreSQL's text-search configuration for it
(its stemming: ``remboursements`` finds ``remboursement``), ``simple`` where none fits, and a question's
asking words (``### words`` ``asking``, the site's list: "what", "combien", …) are dropped before it is searched.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from engine.content import Registry
from engine.content.audience import Audience
from engine.content.strings import Strings
from engine.errors import ToolError
from engine.store import Store
from engine.tools.base import RunRef, ToolFn

log = logging.getLogger(__name__)

HITS = 5
MAX_QUERY = 300

# collection, slug, title, body
Row = tuple[str, str, str, str]


# PostgreSQL's text-search configurations (snowball stemmers), by the names and codes a site may give.
_NAMES: dict[str, tuple[str, ...]] = {
    "arabic": ("ar", "العربية"), "armenian": ("hy",), "basque": ("eu", "euskara"), "catalan": ("ca", "català"),
    "danish": ("da", "dansk"), "dutch": ("nl", "nederlands"), "english": ("en",), "finnish": ("fi", "suomi"),
    "french": ("fr", "français", "francais"), "german": ("de", "deutsch"), "greek": ("el", "ελληνικά"),
    "hindi": ("hi",), "hungarian": ("hu", "magyar"), "indonesian": ("id", "bahasa indonesia"),
    "irish": ("ga", "gaeilge"), "italian": ("it", "italiano"), "lithuanian": ("lt", "lietuvių"),
    "nepali": ("ne",), "norwegian": ("no", "nb", "nn", "norsk"), "portuguese": ("pt", "português", "portugues"),
    "romanian": ("ro", "română", "romana"), "russian": ("ru", "русский"), "serbian": ("sr", "српски"),
    "spanish": ("es", "español", "espanol"), "swedish": ("sv", "svenska"), "tamil": ("ta",),
    "turkish": ("tr", "türkçe", "turkce"), "yiddish": ("yi",),
}
CONFIGS = {name: config for config, names in _NAMES.items() for name in (config, *names)}


def text_search_config(language: str | None) -> str:
    """The text-search configuration for a site's language (``fr``, ``French``, ``pt-BR``…); ``simple`` (no
    stemming, no stop words) where none fits — still a search, in any language."""
    said = (language or "english").strip().lower()
    return CONFIGS.get(said) or CONFIGS.get(said.split("-")[0].split("_")[0]) or "simple"


def asking_words(strings: Strings) -> frozenset[str]:
    """The site's question words (``### words`` ``asking``), dropped from a question before it is searched."""
    return frozenset(w.strip().lower() for w in (strings.get("words", "asking") or "").split(",") if w.strip())


def searched(query: str, asking: frozenset[str]) -> str:
    """``query`` without its asking words ("what do memberships cost" → "memberships cost"): the words left, or
    the query as it was when nothing but asking words is in it. Quoted phrases and ``-not`` stay as written."""
    words = query.split()
    kept = [w for w in words if w.startswith(('"', "-")) or w.strip("?!.,;:¿¡'").lower() not in asking]
    return " ".join(kept) if kept else query


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


def make_search_site(store: Store, words: Callable[[], Strings] | None = None, *, hits: int = HITS) -> ToolFn:
    """The built-in ``search_site``: ``{"query": str}`` → the best few matches, each with its title,
    where it is, and a snippet with the matching words in bold; the site's asking words (``words()``) dropped."""

    async def search_site(run: RunRef, arguments: dict[str, Any]) -> str:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError('search_site needs {"query": "a few words"}')
        query = " ".join(query.split())
        if len(query) > MAX_QUERY:
            raise ToolError(f"that query is {len(query)} characters; search with a few words (at most {MAX_QUERY})")
        found = await store.search.find(searched(query, asking_words(words()) if words else frozenset()), hits)
        log.debug("search_site %r: %d hit(s)", query, len(found), extra={"run": run.id, "bot": run.bot})
        if not found:
            return f'Nothing on this site matches "{query}". Try other words, or say you could not find it.'
        lines = [f'{len(found)} result(s) for "{query}", best first:']
        for n, row in enumerate(found, 1):
            snippet = " ".join(row.snippet.split())
            lines.append(f"{n}. {row.title} — {_where(row.collection, row.slug)}\n   {snippet}")
        return "\n".join(lines)

    return search_site
