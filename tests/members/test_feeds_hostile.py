"""A hostile site against feed discovery and reading (issue 24, items 1-2), through the real guarded client on
loopback: a body that names a local file or /dev/zero, entities, an encoding that hides markup, HTML that the
stdlib parser takes minutes over, a page advertising thousands of feeds, a charter naming hundreds of sites — and
the parse that a deadline must really stop (the child is killed, not abandoned)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from appservice.members.charter import MAX_SOURCES, CharterRules, read_charter
from appservice.members.feeds import Feeds
from engine.errors import ToolError
from engine.tools.fetch import FetchSettings
from engine.tools.quarantine import Quarantine, QuarantineLimits
from tests.members.feedsite import RSS, FeedSite, feed_site

RULES = CharterRules(loopback_for_tests=True)
RSS_TYPE = "application/rss+xml"
SLOW_HTML = '<a x="' * 43690  # the stdlib HTMLParser: ~130 s of CPU; the linear reader: well under a second


@pytest.fixture
async def site() -> AsyncIterator[FeedSite]:
    async with feed_site(slow_seconds=5.0) as s:
        yield s


Make = Callable[..., Feeds]


@pytest.fixture
def feeds(quarantine: Quarantine) -> Make:
    def make(q: Quarantine | None = None, **over: float) -> Feeds:
        settings = FetchSettings(allow_loopback_http_for_tests=True, total_timeout=3.0, max_bytes=1024 * 1024)
        return Feeds(settings, RULES, q or quarantine, **over)

    return make


async def test_a_body_naming_a_local_file_is_never_opened(site: FeedSite, feeds: Make, tmp_path: Path) -> None:
    secret = tmp_path / "local.rss"
    secret.write_text(RSS.replace("RTÉ News", "A LOCAL FILE"))
    site.served["path"] = (str(secret).encode(), RSS_TYPE)
    site.served["zero"] = (b"/dev/zero", RSS_TYPE)
    for name in ("path", "zero"):
        with pytest.raises(ToolError, match="says it is a feed but is not one") as caught:
            await feeds().read(site.url(f"/served/{name}"), [site.url("/served/")])
        assert "A LOCAL FILE" not in str(caught.value)
    found, problems = await feeds().discover([site.url("/served/path")])
    assert found == [] and "not one" in problems[0] and "A LOCAL FILE" not in problems[0]


@pytest.mark.parametrize(("body", "words"), [
    (b'<?xml version="1.0"?><!DOCTYPE rss [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>'
     b'<rss version="2.0"><channel><title>&b;&b;&b;&b;</title></channel></rss>', "declares entities"),
    (b'<?xml version="1.0"?><!doctype rss [ ]><rss version="2.0"><channel><title>x</title></channel></rss>',
     "internal subset"),
    ('<?xml version="1.0" encoding="utf-16"?><rss version="2.0"></rss>'.encode("utf-16"), "UTF-16"),
    (b'<?xml version="1.0" encoding="utf-7"?><rss version="2.0">+ADw-!ENTITY a "x"+AD4-</rss>', "utf-7"),
])
async def test_a_feed_that_declares_entities_or_hides_its_markup_is_refused(
        site: FeedSite, feeds: Make, body: bytes, words: str) -> None:
    site.served["feed"] = (body, RSS_TYPE)
    with pytest.raises(ToolError, match=words):
        await feeds().read(site.url("/served/feed"), [site.url("/served/")])


async def test_the_loose_parsers_entity_bomb_is_refused_before_it_grows(site: FeedSite, feeds: Make) -> None:
    # The shape that made 107 KiB into a 300 MB string on feedparser's loose fallback: not parsed at all now.
    defs = "".join(f'<!ENTITY e{i} "{f"&e{i - 1};" * 10}">' for i in range(1, 8))
    body = f'<?xml version="1.0"?><!DOCTYPE rss [<!ENTITY e0 "xxxxxxxxxx">{defs}]><rss><title>&e7;</title></rss>'
    site.served["bomb"] = (body.encode(), RSS_TYPE)
    started = time.process_time()
    with pytest.raises(ToolError, match="declares entities"):
        await feeds().read(site.url("/served/bomb"), [site.url("/served/")])
    assert time.process_time() - started < 1.0


async def test_discovery_reads_a_page_the_stdlib_parser_takes_minutes_over(site: FeedSite, feeds: Make) -> None:
    site.served["slow.html"] = (SLOW_HTML.encode(), "text/html")
    started = time.process_time()
    found, problems = await feeds().discover([site.url("/served/slow.html")])
    assert problems == [] and found[0].feeds == () and found[0].page == site.url("/served/slow.html")
    assert time.process_time() - started < 2.0  # this process's CPU: the reading happened in the child


async def test_hostile_parses_leave_the_event_loop_and_name_resolution_alone(site: FeedSite, feeds: Make) -> None:
    # Eight discoveries of a page that once took minutes each: name resolution (the default executor) and the
    # event loop go on as before — nothing parses in a thread of this process.
    site.served["slow.html"] = (SLOW_HTML.encode() * 4, "text/html")
    work = asyncio.gather(*(feeds(parse_seconds=30.0).discover([site.url("/served/slow.html")]) for _ in range(8)))
    await asyncio.sleep(0.2)
    started = time.monotonic()
    await asyncio.wait_for(asyncio.get_running_loop().getaddrinfo("localhost", 80), timeout=5.0)
    ticks = 0
    while time.monotonic() - started < 1.0:
        await asyncio.sleep(0.01)
        ticks += 1
    assert ticks >= 40, f"the event loop ticked {ticks} times in a second"
    for found, _problems in await work:
        assert found and found[0].feeds == ()


async def test_a_page_advertising_thousands_of_feeds_is_tried_four_times_at_most(site: FeedSite, feeds: Make) -> None:
    links = "".join(f'<link rel="alternate" type="application/rss+xml" href="/served/feed{i}">' for i in range(5000))
    site.served["many.html"] = (f"<html><head>{links}</head></html>".encode(), "text/html")
    found, problems = await feeds().discover([site.url("/served/many.html")])
    assert problems == [] and found[0].feeds == ()
    tried = [path for path in site.hits if path.startswith("/served/feed")]
    assert len(tried) == 4, tried


async def test_discovery_of_many_slow_sites_keeps_one_deadline(site: FeedSite, feeds: Make) -> None:
    started = time.monotonic()
    found, problems = await feeds(discover_seconds=1.0).discover([site.url(f"/slow/{n}") for n in range(8)])
    assert time.monotonic() - started < 3.0
    assert found == [] and len(problems) == 8
    assert all("could not be read within 1s" in p or "took longer" in p for p in problems), problems


def test_a_charter_follows_at_most_ten_sites() -> None:
    base = {"name": "Digest", "schedule": {"at": "08:00", "tz": "UTC"}, "prompt": "News.", "owner": "@a:localhost",
            "author": "@a:localhost"}
    assert len(read_charter({**base, "sources": [f"site{n}.ie" for n in range(MAX_SOURCES)]}, RULES).sources) == 10
    with pytest.raises(ValueError, match="at most 10 sites"):
        read_charter({**base, "sources": [f"site{n}.ie" for n in range(500)]}, RULES)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


async def test_a_parse_past_its_deadline_is_killed_not_abandoned() -> None:
    q = Quarantine(QuarantineLimits(children=1))
    try:
        big = (SLOW_HTML * 40).encode()  # seconds of reading: well past a 50 ms deadline
        await q.words("https://example.org/warm", "<p>warm</p>")
        pid = next(iter(q._idle)).process.pid
        with pytest.raises(ToolError, match=r"could not be read within 0.05s; gave up"):
            await q.words("https://example.org/big", big.decode(), seconds=0.05)
        await asyncio.sleep(0.1)
        assert not _alive(pid), "the child that was parsing went on after its deadline"
        assert await q.words("https://example.org/next", "<p>after</p>") == "after"  # a new child took over
    finally:
        await q.close()


async def test_a_parse_that_needs_more_memory_than_its_limit_fails_in_words() -> None:
    q = Quarantine(QuarantineLimits(children=1, memory_bytes=96 * 1024 * 1024))
    try:
        # ~40 MB of text read into words: several copies of it do not fit in 96 MB of address space.
        page = "<p>" + "word " * 8_000_000 + "</p>"
        with pytest.raises(ToolError, match="more memory than a document may use"):
            await q.words("https://example.org/huge", page, seconds=30.0)
        assert await q.words("https://example.org/next", "<p>after</p>") == "after"
    finally:
        await q.close()


async def test_the_children_have_no_environment_and_die_with_closing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUMMON_AS_TOKEN", "a-secret-the-children-never-see")
    q = Quarantine(QuarantineLimits(children=1))
    await q.words("https://example.org/warm", "<p>warm</p>")
    child = next(iter(q._idle)).process
    assert Path(f"/proc/{child.pid}/environ").read_bytes() == b""
    await q.close()
    assert child.returncode is not None
