"""What a member bot follows (SPEC §10): its feeds found from the sites the member named, and read.

**Discovery.** The member names sites or publications ("rte.ie", "theguardian.com") — never feed addresses.
Each site's front page is fetched with the guarded client (``engine.tools.fetch``: https only, public
addresses only, every redirect re-checked against the site itself, bytes capped) and the feeds it
advertises are read out of its HTML (``<link rel="alternate" type="application/rss+xml|atom+xml">``). Each
is fetched and must parse as a feed (``feedparser``): HTML served as RSS is refused. A site that advertises
none falls back to the page itself; the dry run judges whether that reads.

**Reading.** A feed comes back to the model as its entries (title, link, date, a short summary), capped and
fenced as data; a page as its words. Parsing (HTML and feeds) runs off the event loop, under a deadline.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin, urlsplit

import feedparser

from engine.errors import ToolError
from engine.members.charter import CharterRules, allow_entry_refusal
from engine.tools.fenced import fence
from engine.tools.fetch import FetchSettings, Page, Resolve, decoded, make_get, page_text, system_resolve

log = logging.getLogger(__name__)

FEED_TYPES = frozenset({"application/rss+xml", "application/atom+xml", "application/rdf+xml",
                        "application/feed+json", "application/xml", "text/xml"})
_LINK_TYPES = frozenset({"application/rss+xml", "application/atom+xml"})
MAX_FEEDS_PER_SITE = 2
MAX_ENTRIES = 20
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


class _Alternates(HTMLParser):
    """The feed links in a page's HTML (stdlib parser: linear in the page, no network, no entities resolved
    beyond attributes)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "link":
            return
        a = {k.lower(): (v or "") for k, v in attrs}
        rels = a.get("rel", "").lower().split()
        if "alternate" in rels and a.get("type", "").lower().split(";")[0].strip() in _LINK_TYPES and a.get("href"):
            self.links.append(a["href"].strip())


def alternates(html: str, base: str) -> list[str]:
    """The feeds a page advertises, as absolute addresses, in its order."""
    parser = _Alternates()
    parser.feed(html)
    parser.close()
    return list(dict.fromkeys(urljoin(base, href) for href in parser.links))


def looks_like_feed(page: Page) -> bool:
    head = page.body[:512].lstrip().lower()
    return page.kind in FEED_TYPES or head.startswith((b"<?xml", b"<rss", b"<feed", b"<rdf"))


def parse_feed(body: bytes) -> dict[str, Any]:
    """The feed, parsed by feedparser from bytes (never a url: it fetches nothing itself)."""
    parsed = feedparser.parse(body)
    return {"version": parsed.get("version") or "", "title": parsed.feed.get("title", ""),
            "entries": [dict(e) for e in parsed.entries[:MAX_ENTRIES]], "bozo": bool(parsed.bozo)}


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

    def __init__(self, settings: FetchSettings, rules: CharterRules, *, resolve: Resolve = system_resolve,
                 parse_seconds: float = 5.0) -> None:
        self.settings = settings
        self.rules = rules
        self.resolve = resolve
        self.parse_seconds = parse_seconds

    async def _parsed(self, url: str, body: bytes) -> dict[str, Any]:
        try:
            async with asyncio.timeout(self.parse_seconds):
                feed = await asyncio.to_thread(parse_feed, body)
        except TimeoutError:
            raise ToolError(f"{url} could not be read as a feed within {self.parse_seconds:g}s") from None
        if not feed["version"] or (feed["bozo"] and not feed["entries"]):
            raise ToolError(f"{url} says it is a feed but is not one (it reads as a web page, not RSS or Atom)")
        return feed

    async def discover(self, sources: Sequence[str]) -> tuple[list[Found], list[str]]:
        """Each source's feeds (or page); and, in words, the sources that could not be reached at all."""
        found: list[Found] = []
        problems: list[str] = []
        for source in sources:
            try:
                found.append(await self._discover_one(source))
            except ToolError as exc:
                log.info("feed discovery: %s: %s", source, exc)
                problems.append(f"{source}: {exc}")
        return found, problems

    async def _discover_one(self, source: str) -> Found:
        site = site_of(source, self.rules)
        origin = "{0.scheme}://{0.netloc}/".format(urlsplit(site))
        get = make_get(replace(self.settings, allow=(origin,)), resolve=self.resolve)
        page = await get(site)
        if looks_like_feed(page):
            await self._parsed(str(page.url), page.body)
            return Found(source, site, (str(page.url),), None)
        try:
            async with asyncio.timeout(self.parse_seconds):
                links = await asyncio.to_thread(alternates, decoded(page)[: self.settings.max_html_chars], str(page.url))
        except TimeoutError:
            raise ToolError(f"{page.url} could not be read within {self.parse_seconds:g}s") from None
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
        return await page_text(page, self.settings)
