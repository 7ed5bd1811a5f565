"""Feed discovery and reading (SPEC §10) against a local feed server on loopback: RSS 2.0, Atom, a page that
links its feed, a page with none, 403, slow, HTML served as RSS, a 50 MB page, a redirect off the list."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable

import pytest

from appservice.members.charter import CharterRules
from appservice.members.feeds import Feeds, site_of
from engine.errors import ToolError
from engine.tools.fetch import FetchSettings
from engine.tools.quarantine import Quarantine
from tests.members.feedsite import FeedSite, feed_site

RULES = CharterRules(loopback_for_tests=True)


@pytest.fixture
async def site() -> AsyncIterator[FeedSite]:
    async with feed_site(slow_seconds=5.0) as s:
        yield s


Make = Callable[..., Feeds]


@pytest.fixture
def feeds(quarantine: Quarantine) -> Make:
    def make(**over: float) -> Feeds:
        settings = FetchSettings(allow_loopback_http_for_tests=True, total_timeout=over.get("timeout", 3.0),
                                 max_bytes=1024 * 1024)
        return Feeds(settings, RULES, quarantine, **{k: v for k, v in over.items() if k != "timeout"})

    return make


async def test_a_feed_named_directly_is_its_own_feed(site: FeedSite, feeds: Make) -> None:
    found, problems = await feeds().discover([site.url("/rss"), site.url("/atom")])
    assert problems == []
    assert [f.feeds for f in found] == [(site.url("/rss"),), (site.url("/atom"),)]


async def test_a_page_that_links_its_feed_gives_the_feed(site: FeedSite, feeds: Make) -> None:
    found, problems = await feeds().discover([site.url("/journal/")])
    assert problems == [] and found[0].feeds == (site.url("/journal/feed.xml"),) and found[0].page is None
    assert found[0].allow == (site.url("/journal/feed.xml"),)


async def test_a_page_with_no_feed_falls_back_to_the_page(site: FeedSite, feeds: Make) -> None:
    found, problems = await feeds().discover([site.url("/plain/")])
    assert problems == [] and found[0].feeds == () and found[0].allow == (site.url("/plain/"),)


@pytest.mark.parametrize(("path", "words"), [
    ("/forbidden/", "answered 403 Forbidden"),
    ("/fake/", "says it is a feed but is not one"),
    ("/huge/", "is larger than the 1024 KiB fetch reads"),
    ("/away/", "not on the list this bot may fetch"),
])
async def test_a_site_that_cannot_be_read_is_said_in_words(site: FeedSite, feeds: Make, path: str, words: str) -> None:
    started = time.monotonic()
    found, problems = await feeds().discover([site.url(path)])
    assert found == [] and len(problems) == 1 and words in problems[0], problems
    assert time.monotonic() - started < 2.0


async def test_a_slow_site_is_given_up_on(site: FeedSite, feeds: Make) -> None:
    found, problems = await feeds(timeout=0.5).discover([site.url("/slow/")])
    assert found == [] and "took longer than 0.5s" in problems[0]


async def test_one_bad_source_does_not_spoil_the_others(site: FeedSite, feeds: Make) -> None:
    found, problems = await feeds().discover([site.url("/forbidden/"), site.url("/atom")])
    assert [f.source for f in found] == [site.url("/atom")] and "403" in problems[0]


def test_a_site_is_a_name_or_an_address_never_a_private_one() -> None:
    assert site_of("rte.ie", CharterRules()) == "https://rte.ie/"
    assert site_of("https://www.theguardian.com/uk", CharterRules()) == "https://www.theguardian.com/uk"
    for bad, words in (("the Guardian", "give its address"), ("https://10.0.0.1/", "not a public address"),
                       ("http://example.org/", "not an https address"), ("http://127.0.0.1:1/", "not an https")):
        with pytest.raises(ToolError, match=words):
            site_of(bad, CharterRules())


async def test_a_feed_reads_as_its_entries_fenced(site: FeedSite, feeds: Make) -> None:
    text = await feeds().read(site.url("/rss"), [site.url("/rss")])
    assert "- Budget passes the Dáil" in text and "link: https://www.rte.ie/news/budget" in text
    assert "The vote was 80 to 70." in text and "<p>" not in text
    assert "untrusted" in text.lower()
    atom = await feeds().read(site.url("/atom"), [site.url("/atom")])
    assert "- Markets rally on rate hopes" in atom


async def test_a_page_reads_as_its_words(site: FeedSite, feeds: Make) -> None:
    text = await feeds().read(site.url("/plain/"), [site.url("/plain/")])
    assert "the council meets at noon" in text


async def test_reading_off_the_list_is_refused(site: FeedSite, feeds: Make) -> None:
    with pytest.raises(ToolError, match="not on the list"):
        await feeds().read(site.url("/atom"), [site.url("/rss")])
