"""A local feed server on loopback for member-bot tests: the sites a member names, each behaving as one does
out there — RSS 2.0, Atom, a site whose page links its feed, one with no feed, one that answers 403, a slow
one, HTML served as RSS, a 50 MB page, a redirect off to somewhere else — and whatever a test serves under
/served/ (a hostile site's documents)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp import web

RSS = """<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0"><channel><title>RTÉ News</title><link>https://www.rte.ie/news/</link>
<description>Headlines</description>
<item><title>Budget passes the Dáil</title><link>https://www.rte.ie/news/budget</link>
<pubDate>Tue, 01 Dec 2026 07:00:00 GMT</pubDate><description>&lt;p&gt;The vote was 80 to 70.&lt;/p&gt;</description></item>
<item><title>Storm warning for the west</title><link>https://www.rte.ie/news/storm</link>
<description>Met Éireann issued an orange warning.</description></item>
</channel></rss>"""

ATOM = """<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>The Guardian</title><id>urn:g</id>
<updated>2026-12-01T07:00:00Z</updated>
<entry><title>Markets rally on rate hopes</title><link href="https://www.theguardian.com/business/rally"/>
<id>urn:g:1</id><updated>2026-12-01T06:30:00Z</updated><summary>Shares rose sharply.</summary></entry>
</feed>"""

LINKING = """<!doctype html><html><head><title>The Journal</title>
<link rel="alternate" type="application/rss+xml" title="News" href="/journal/feed.xml">
<link rel="stylesheet" href="/style.css"></head><body><h1>The Journal</h1></body></html>"""

NO_FEED = """<!doctype html><html><head><title>Plain Site</title></head>
<body><h1>Plain Site</h1><p>Today: the council meets at noon.</p></body></html>"""

PRETENDING = """<!doctype html><html><head><title>Not a feed</title></head><body><p>Sorry</p></body></html>"""


@dataclass
class FeedSite:
    base: str
    hits: dict[str, int] = field(default_factory=dict)
    # What /rss answers right now: 200 (the feed) or an error status.
    rss_status: int = 200
    # Non-zero: every page answers this status (an outage of the whole site).
    down: int = 0
    # /served/<name>: whatever a test puts here, as (body, content type) — a hostile site's documents.
    served: dict[str, tuple[bytes, str]] = field(default_factory=dict)

    def url(self, path: str) -> str:
        return f"{self.base}{path}"


@asynccontextmanager
async def feed_site(*, slow_seconds: float = 30.0) -> AsyncIterator[FeedSite]:
    site = FeedSite(base="")

    def counted(path: str) -> None:
        site.hits[path] = site.hits.get(path, 0) + 1

    async def rss(request: web.Request) -> web.Response:
        counted("/rss")
        if site.rss_status != 200:
            return web.Response(status=site.rss_status, text="no")
        return web.Response(text=RSS, content_type="application/rss+xml")

    async def atom(request: web.Request) -> web.Response:
        counted("/atom")
        return web.Response(text=ATOM, content_type="application/atom+xml")

    async def linking(request: web.Request) -> web.Response:
        counted("/journal/")
        return web.Response(text=LINKING, content_type="text/html")

    async def journal_feed(request: web.Request) -> web.Response:
        counted("/journal/feed.xml")
        return web.Response(text=RSS.replace("RTÉ News", "The Journal"), content_type="application/rss+xml")

    async def plain(request: web.Request) -> web.Response:
        counted("/plain/")
        return web.Response(text=NO_FEED, content_type="text/html")

    async def forbidden(request: web.Request) -> web.Response:
        counted("/forbidden/")
        return web.Response(status=403, text="Forbidden")

    async def slow(request: web.Request) -> web.Response:
        counted("/slow/")
        await asyncio.sleep(slow_seconds)
        return web.Response(text=RSS, content_type="application/rss+xml")

    async def pretending(request: web.Request) -> web.Response:
        counted("/fake/")
        return web.Response(text=PRETENDING, content_type="application/rss+xml")

    async def huge(request: web.Request) -> web.StreamResponse:
        counted("/huge/")
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        await response.prepare(request)
        chunk = b"<p>" + b"x" * (1024 * 1024 - 7) + b"</p>\n"
        try:
            for _ in range(50):
                await response.write(chunk)
        except (ConnectionError, RuntimeError):
            pass  # the reader stopped at its cap, as it should
        return response

    async def flaky(request: web.Request) -> web.Response:
        # Reads once (for discovery: a page with no feed), then refuses every reader after.
        counted("/flaky/")
        if site.hits["/flaky/"] > 1:
            return web.Response(status=403, text="Forbidden")
        return web.Response(text=NO_FEED, content_type="text/html")

    async def away(request: web.Request) -> web.Response:
        counted("/away/")
        raise web.HTTPFound("http://localhost:9/elsewhere")

    async def served(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        counted(f"/served/{name}")
        if name not in site.served:
            return web.Response(status=404, text="no such document")
        body, kind = site.served[name]
        return web.Response(body=body, content_type=kind)

    @web.middleware
    async def outage(request: web.Request, handler: web.RequestHandler) -> web.StreamResponse:
        if site.down:
            counted("down")
            return web.Response(status=site.down, text="down for maintenance")
        return await handler(request)

    app = web.Application(middlewares=[outage])
    app.router.add_get("/rss", rss)
    app.router.add_get("/atom", atom)
    app.router.add_get("/journal/", linking)
    app.router.add_get("/journal/feed.xml", journal_feed)
    app.router.add_get("/plain/", plain)
    app.router.add_get("/forbidden/", forbidden)
    app.router.add_get("/slow/", slow)
    app.router.add_get("/slow/{n}", slow)
    app.router.add_get("/fake/", pretending)
    app.router.add_get("/huge/", huge)
    app.router.add_get("/away/", away)
    app.router.add_get("/flaky/", flaky)
    app.router.add_get("/served/{name}", served)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    port = tcp._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    site.base = f"http://127.0.0.1:{port}"
    try:
        yield site
    finally:
        await runner.cleanup()
