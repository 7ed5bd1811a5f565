"""What a member bot follows (SPEC §10): its feeds found from the sites the member named, and read.

**Discovery.** The member names sites or publications ("rte.ie", "theguardian.com") — never feed addresses.
Each site's front page is fetched with the guarded client (``engine.tools.fetch``: https only, public
addresses only, every redirect re-checked against the site itself, bytes capped) and the feeds it
advertises are read out of its HTML (``<link rel="alternate" type="application/rss+xml|atom+xml">``). Each
is fetched and must parse as a feed (``feedparser``): HTML served as RSS is refused. A site that advertises
none falls back to the page itself; the dry run judges whether that reads.

**Reading.** A feed comes back to the model as its entries (title, link, date, a short summary), capped and
fenced as data; a page as its words. Parsing (HTML and feeds) runs in a quarantined child process
(``engine.tools.quarantine``: an address-space limit, killed at its deadline), never in this process. Discovery
reads a few sites at once under one deadline for them all, and tries at most four advertised feeds a site.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from appservice.members.charter import CharterRules, allow_entry_refusal
from engine.errors import ToolError
from engine.tools.fenced import fence
from engine.tools.fetch import FetchSettings, Page, Resolve, decoded, make_get, page_text, system_resolve
from engine.tools.quarantine import Quarantine

log = logging.getLogger(__name__)

FEED_TYPES = frozenset({"application/rss+xml", "application/atom+xml", "application/rdf+xml",
                        "application/feed+json", "application/xml", "text/xml"})
MAX_FEEDS_PER_SITE = 2
# Sites looked at together, and how long finding every source's feeds may take in all: a charter's ten sources,
# each a page and up to four advertised feeds, would otherwise be 50 fetches one after another.
DISCOVER_AT_ONCE = 4
DISCOVER_SECONDS = 60.0
SUMMARY_CHARS = 400
_SITE = re.compile(r"^[a-z0-9-]+(\.[a-z0-9-]+)+$", re.IGNORECASE)
_TAGS = re.compile(r"<[^>]*>")


@dataclass(frozen=True)
class Found:
    """One site the member named: the feeds it advertises (or its page, when it has none)."""

    source: str
    site: str
    feeds: tuple[str, ...]
    page: str | None  # the page itself, when there is no feed

    @property
    def allow(self) -> tuple[str, ...]:
        return self.feeds or ((self.page,) if self.page else ())


def site_of(source: str, rules: CharterRules) -> str:
    """The front page of what the member named: ``rte.ie`` → ``https://rte.ie/``. Raises ToolError in words."""
    text = source.strip()
    if "://" not in text:
        host = text.lower()
        if not _SITE.fullmatch(host.rstrip("/")):
            raise ToolError(f"{source!r} is not a site I can find; give its address, like theguardian.com")
        text = f"https://{host.rstrip('/')}/"
    why = allow_entry_refusal(text, rules)
    if why is not None:
        raise ToolError(why)
    parts = urlsplit(text)
    return f"{parts.scheme}://{parts.netloc}{parts.path or '/'}"


def looks_like_feed(page: Page) -> bool:
    head = page.body[:512].lstrip().lower()
    return page.kind in FEED_TYPES or head.startswith((b"<?xml", b"<rss", b"<feed", b"<rdf"))


def feed_text(feed: dict[str, Any]) -> str:
    """A feed as the model reads it: its title, then each entry's title, date, link and a short summary."""
    lines = [f"Feed: {feed['title']}".strip()]
    for entry in feed["entries"]:
        summary = _TAGS.sub(" ", str(entry.get("summary", "")))
        summary = " ".join(summary.split())[:SUMMARY_CHARS]
        lines.append(f"- {entry.get('title', '(untitled)')}")
        for key in ("published", "updated"):
            if entry.get(key):
                lines.append(f"  {key}: {entry[key]}")
                break
        if entry.get("link"):
            lines.append(f"  link: {entry['link']}")
        if summary:
            lines.append(f"  {summary}")
    return "\n".join(lines)


class Feeds:
    """Finding and reading what a charter follows, with the guarded client."""

    def __init__(self, settings: FetchSettings, rules: CharterRules, quarantine: Quarantine, *,
                 resolve: Resolve = system_resolve, parse_seconds: float = 5.0,
                 discover_seconds: float = DISCOVER_SECONDS) -> None:
        self.settings = settings
        self.rules = rules
        self.quarantine = quarantine
        self.resolve = resolve
        self.parse_seconds = parse_seconds
        self.discover_seconds = discover_seconds

    async def _parsed(self, url: str, body: bytes) -> dict[str, Any]:
        feed = await self.quarantine.feed(url, body, seconds=self.parse_seconds)
        if not feed["version"] or (feed["bozo"] and not feed["entries"]):
            raise ToolError(f"{url} says it is a feed but is not one (it reads as a web page, not RSS or Atom)")
        return feed

    async def discover(self, sources: Sequence[str], *, seconds: float | None = None) -> tuple[list[Found], list[str]]:
        """Each source's feeds (or page); and, in words, the sources that could not be reached at all. A few
        sites at once, all within ``seconds`` (``discover_seconds``): one still being read then is a problem."""
        limit = self.discover_seconds if seconds is None else seconds
        at_once = asyncio.Semaphore(DISCOVER_AT_ONCE)

        async def one(source: str) -> Found | str:
            try:
                async with at_once:
                    return await self._discover_one(source)
            except ToolError as exc:
                log.info("feed discovery: %s: %s", source, exc)
                return f"{source}: {exc}"

        tasks = [asyncio.ensure_future(one(source)) for source in sources]
        done, pending = await asyncio.wait(tasks, timeout=limit) if tasks else (set(), set())
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        found: list[Found] = []
        problems: list[str] = []
        for source, task in zip(sources, tasks, strict=True):
            if task in done:
                result = task.result()
                if isinstance(result, str):
                    problems.append(result)
                else:
                    found.append(result)
            else:
                log.info("feed discovery: %s not read within %gs", source, limit)
                problems.append(f"{source}: could not be read within {limit:.3g}s")
        return found, problems

    async def _discover_one(self, source: str) -> Found:
        site = site_of(source, self.rules)
        origin = "{0.scheme}://{0.netloc}/".format(urlsplit(site))
        get = make_get(replace(self.settings, allow=(origin,)), resolve=self.resolve)
        page = await get(site)
        if looks_like_feed(page):
            await self._parsed(str(page.url), page.body)
            return Found(source, site, (str(page.url),), None)
        links = await self.quarantine.links(str(page.url), decoded(page)[: self.settings.max_html_chars],
                                            seconds=self.parse_seconds)
        feeds: list[str] = []
        for link in links:
            if allow_entry_refusal(link, self.rules) is not None:
                continue
            try:
                # A feed may live on another host of the same publication (feeds.example.com): fetched with it
                # alone allowed, and checked like any address.
                feed_get = make_get(replace(self.settings, allow=(link,)), resolve=self.resolve)
                feed_page = await feed_get(link)
                await self._parsed(link, feed_page.body)
            except ToolError as exc:
                log.info("feed discovery: %s advertises %s, which does not read: %s", site, link, exc)
                continue
            feeds.append(link)
            if len(feeds) == MAX_FEEDS_PER_SITE:
                break
        return Found(source, site, tuple(feeds), None if feeds else str(page.url))

    async def read(self, url: str, allow: Sequence[str]) -> str:
        """One of a charter's sources for the model: a feed as its entries, a page as its words; fenced."""
        get = make_get(replace(self.settings, allow=tuple(allow)), resolve=self.resolve)
        page = await get(url)
        if looks_like_feed(page):
            feed = await self._parsed(str(page.url), page.body)
            text = feed_text(feed)[: self.settings.max_chars]
            return fence(str(page.url), page.kind, text, note=f"a feed, {len(feed['entries'])} entries")
        return await page_text(page, self.settings, self.quarantine)
