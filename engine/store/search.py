"""search_site: the index a publish rebuilds and the tool reads (``sql/queries/search.sql``)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.store.base import Family, rows


@dataclass(frozen=True, slots=True)
class Hit:
    collection: str
    slug: str
    title: str
    snippet: str


class Search(Family):
    __slots__ = ()

    async def rebuild(self, entries: list[tuple[str, str, str, str]], *, language: str = "english") -> str:
        """The index, written again whole from (collection, slug, title, body) entries, in the text-search
        configuration ``language`` — or 'simple' where this database has none by that name; the one used."""
        used = str(await self._value("text_search_config", language))
        await self._run("clear_site_search")
        await self._run("insert_site_search", *([entry[i] for entry in entries] for i in range(4)), used)
        return used

    async def find(self, query: str, hits: int) -> list[Hit]:
        """The best ``hits`` entries for ``query`` (web-search syntax), each with a snippet."""
        return rows(Hit, await self._all("search_site", query, hits))
