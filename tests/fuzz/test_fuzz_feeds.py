"""Fuzz: what a member bot's sources serve — a feed's bytes (``engine.tools.parsers.read_feed``, as the quarantined
child runs it) and a page's HTML read for its feed links (``feed_links``, discovery). Whatever a site serves: no
exception, every case within 100 ms, nothing opened as a path, the output bounded and well formed."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from engine.tools.parsers import FIELD_CHARS, MAX_ALTERNATES, MAX_ENTRIES, TITLE_CHARS, feed_links, read_feed
from tests.fuzz.budget import FUZZ, outcome, within_budget

# Pieces feeds are made of, good and broken: declarations, entities, encodings, namespaces, CDATA, paths.
_FEED_PIECES = st.sampled_from([
    '<?xml version="1.0"?>', '<?xml version="1.0" encoding="utf-8"?>', '<?xml version="1.0" encoding="utf-7"?>',
    '<?xml version="1.0" encoding="iso-8859-1"?>', '<?xml version="1.0" encoding="bogus"?>', "<!DOCTYPE rss>",
    "<!DOCTYPE rss [", "]>", '<!ENTITY a "x">', "&a;", "&amp;", "&#x41;", "&#99999999;", "&lt;p&gt;",
    '<rss version="2.0">', "</rss>", "<channel>", "</channel>", "<item>", "</item>", "<title>", "</title>",
    "<link>", "</link>", "<description>", "</description>", "<pubDate>", "Tue, 01 Dec 2026 07:00:00 GMT",
    '<feed xmlns="http://www.w3.org/2005/Atom">', "</feed>", "<entry>", "</entry>", '<link href="https://x/1"/>',
    "<summary>", "</summary>", "<![CDATA[", "]]>", "<!--", "-->", "<", ">", "/", '"', "'", "=", " ", "\n", "\x00",
    "/dev/zero", "/etc/passwd", "file:///etc/passwd", "https://example.org/feed", "é", "\U0001f600", "x" * 40,
    "<script>", "<img src=x onerror=1>", "<rdf:RDF>", "<?xml-stylesheet?>",
])
# A feed that reads, with generated pieces inside its item: most cases get past the refusals and into the parser.
_TEMPLATE = ('<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>T</title><item><title>{0}'
             "</title><link>https://example.org/{1}</link><description>{2}</description></item></channel></rss>")
FEEDS = st.one_of(
    st.tuples(*[st.lists(_FEED_PIECES, max_size=12).map("".join)] * 3).map(
        lambda parts: _TEMPLATE.format(*parts).encode("utf-8", "surrogatepass")),
    st.lists(_FEED_PIECES, max_size=80).map(lambda parts: "".join(parts).encode("utf-8", "surrogatepass")),
    st.binary(max_size=400),
    st.lists(_FEED_PIECES, max_size=40).map(lambda parts: "".join(parts).encode("utf-16")),
)
_HTML_PIECES = st.sampled_from([
    "<link", " rel=alternate", ' rel="alternate stylesheet"', " type=application/rss+xml",
    ' type="application/atom+xml; charset=utf-8"', " type=text/html", ' href="/feed"', " href=https://e.org/a",
    ' href="//["', ' href="http://a:99999999/"', " href=", ">", "/>", "<", "</", "<a x=\"", '"', "'", "=", " ",
    "<!--", "-->", "<script>", "</script>", "<head>", "&amp;", "&#", "x", "\n",
])
_LINK = st.tuples(st.sampled_from(["alternate", "ALTERNATE home", "stylesheet", ""]),
                  st.sampled_from(["application/rss+xml", "application/atom+xml; q=1", "text/css", ""]),
                  st.sampled_from(["/feed", "feed.xml", "https://feeds.example.org/all", "//[", "", "?x", "#y"]),
                  ).map(lambda t: f'<link rel="{t[0]}" type="{t[1]}" href="{t[2]}">')
PAGES = st.one_of(st.lists(_HTML_PIECES | _LINK, max_size=120).map("".join), st.text(max_size=400))
BASES = st.sampled_from(["https://www.rte.ie/", "https://example.org/a/b?c", "http://127.0.0.1:8080/"])


def _well_formed(feed: dict[str, Any]) -> None:
    assert set(feed) == {"version", "title", "entries", "bozo"}
    assert isinstance(feed["version"], str) and isinstance(feed["bozo"], bool)
    assert isinstance(feed["title"], str) and len(feed["title"]) <= TITLE_CHARS
    assert len(feed["entries"]) <= MAX_ENTRIES
    for entry in feed["entries"]:
        assert all(isinstance(v, str) and len(v) <= FIELD_CHARS for v in entry.values())


@FUZZ
@given(FEEDS)
def test_any_feed_is_read_or_refused_without_a_crash_in_time(body: bytes) -> None:
    read = within_budget("feed parsing", lambda: read_feed(body), len(body))
    if isinstance(read, str):
        outcome("feed parsing", "refused")
        assert read.strip() and "\n" not in read
        return
    outcome("feed parsing", "a feed" if read["version"] else "not a feed")
    _well_formed(read)


@FUZZ
@given(PAGES, BASES)
def test_any_page_gives_its_feed_links_without_a_crash_in_time(html: str, base: str) -> None:
    links = within_budget("feed discovery", lambda: feed_links(html, base), len(html))
    outcome("feed discovery", f"{len(links)} link(s)")
    assert len(links) <= MAX_ALTERNATES and len(set(links)) == len(links)
    assert all(isinstance(link, str) and link for link in links)
