"""One message cannot freeze the service (issue 12, item 1): every way a line's text and a fetched page's
HTML is read is linear in what was sent. The issue's own inputs, and a 64 KiB worst case of each
construct, each read — as ingest reads a line: the event, its mentions, whether it is a command — well
under a second. A formatted_body past 64 KiB is not read (its body is); a line's HTML is flattened once.

The bound is a generous assertion, on CPU time, for inputs that took seconds to minutes before; the
figures themselves are what `python -m tests.bench.untrusted` prints."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from appservice.matrix.inbound import said
from appservice.matrix.inbound.htmltext import HTML_LIMIT, Flat
from appservice.matrix.inbound.mentions import Puppet, named_bots
from appservice.matrix.inbound.said import Line, read_event
from engine.content import Arg, Command
from engine.content.commands import parse_args, parse_command, strip_address
from engine.tools.fenced import html_to_text as page_text
from tests.untrusted import FETCHED_PAGES, ISSUE_INPUTS, LINE_BODIES, LINE_HTML, message

SECOND = 1.0
PUPPETS = [Puppet("@bot_helper:localhost", "Helper"), Puppet("@bot_scribe:localhost", "Scribe")]
NAMES = ["@summon:localhost", "@bot_helper:localhost", "Helper", "@bot_scribe:localhost", "Scribe"]
ARGS = (Arg(name="since", kind="span", label="Since", default="1d"),
        Arg(name="who", kind="person", label="Whom", default="me"),
        Arg(name="topic", kind="text", label="About", default="everything"))
COMMAND = Command(name="summarise", prompt="go", source_path="commands/summarise.md", bot="helper", args=ARGS)


def as_ingest_reads(event: dict[str, Any]) -> Line | None:
    """What ingest does with a line's words: read it, find whom it names, see whether it is a command
    and read its arguments."""
    line = read_event(event)
    if line is None:
        return None
    named_bots(line, PUPPETS)
    words = line.text_with_ids or line.text
    parse_command(strip_address(words, NAMES))
    parse_args(COMMAND, words, people={"@alice:localhost": "Alice"}, asker="@alice:localhost")
    return line


def timed(read: Callable[[], object]) -> float:
    """The CPU time ``read`` costs this process: what the input makes it cost, whatever else the machine
    is doing (four test suites share two cores here)."""
    start = time.process_time()
    read()
    return time.process_time() - start


@pytest.mark.parametrize(("name", "html"), ISSUE_INPUTS, ids=[name for name, _ in ISSUE_INPUTS])
def test_the_issues_inputs_are_read_well_under_a_second(name: str, html: str) -> None:
    event = message("fallback words", html)
    assert timed(lambda: as_ingest_reads(event)) < SECOND
    assert timed(lambda: page_text(html)) < SECOND


def test_the_issues_inputs_read_as_a_person_would() -> None:
    spaced = read_event(message("x x", "<pre>x" + " " * 32_000 + "x</pre>"))
    assert spaced is not None and spaced.text == "x" + " " * 32_000 + "x"  # <pre> keeps its spaces
    unterminated = read_event(message("what the client showed", "<a" * 120_000))
    assert unterminated is not None and unterminated.text == "what the client showed"  # past 64 KiB: the body


@pytest.mark.parametrize(("name", "html"), LINE_HTML, ids=[name for name, _ in LINE_HTML])
def test_64_kib_of_each_construct_is_read_well_under_a_second(name: str, html: str) -> None:
    assert len(html.encode()) <= HTML_LIMIT
    event = message("fallback", html)
    assert timed(lambda: as_ingest_reads(event)) < SECOND


@pytest.mark.parametrize(("name", "body"), LINE_BODIES, ids=[name for name, _ in LINE_BODIES])
def test_64_kib_of_plain_words_is_read_well_under_a_second(name: str, body: str) -> None:
    event = message(body, None)
    assert timed(lambda: as_ingest_reads(event)) < SECOND


@pytest.mark.parametrize(("name", "html"), FETCHED_PAGES, ids=[name for name, _ in FETCHED_PAGES])
def test_a_fetched_page_of_each_construct_is_read_well_under_a_second(name: str, html: str) -> None:
    assert timed(lambda: page_text(html)) < SECOND


def test_a_page_stops_being_read_when_told() -> None:
    page = "<p>word</p>" * 10_000
    assert page_text(page, stop=lambda: True) is None
    assert page_text("<p>short</p>", stop=lambda: True) == "short"  # fewer tags than one look at stop


# --- the cap --------------------------------------------------------------------------------------------------


def test_a_formatted_body_past_64_kib_falls_back_to_body(caplog: pytest.LogCaptureFixture) -> None:
    at_cap = "<b>" + "x" * (HTML_LIMIT - 7) + "</b>"
    assert len(at_cap.encode()) == HTML_LIMIT
    line = read_event(message("plain", at_cap))
    assert line is not None and line.text == "x" * (HTML_LIMIT - 7) and line.formatted_body == at_cap
    past = read_event(message("plain words", at_cap + " "))
    assert past is not None and past.text == "plain words" and past.formatted_body is None
    assert "past the 64 KiB read; its body is read instead" in caplog.text


def test_the_cap_counts_bytes_not_characters() -> None:
    wide = "<p>" + "é" * 33_000 + "</p>"  # 33,007 characters, 66,007 bytes
    line = read_event(message("plain", wide))
    assert line is not None and line.text == "plain"


# --- flattened once -------------------------------------------------------------------------------------------


def test_a_line_is_flattened_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = said.flatten

    def counting(html: str) -> Flat:
        calls.append(html)
        return real(html)

    monkeypatch.setattr(said, "flatten", counting)
    pill = '<a href="https://matrix.to/#/@bot_helper:localhost">Helper</a>: !summarise since=2d'
    line = as_ingest_reads(message("Helper: !summarise since=2d", pill))
    assert line is not None and line.text_with_ids == "@bot_helper:localhost: !summarise since=2d"
    assert len(calls) == 1


def test_mentions_read_the_line_as_it_was_flattened() -> None:
    # Whom a line names comes from its words as read, not from reading its HTML again.
    line = Line(event_id="$e", room_id="!r:localhost", sender="@alice:localhost", ts=1,
                event_type="m.room.message", text="Scribe, hi", text_with_ids="@bot_scribe:localhost, hi",
                formatted_body='<a href="https://matrix.to/#/@bot_helper:localhost">Helper</a>, hi')
    assert named_bots(line, PUPPETS) == ["@bot_scribe:localhost"]
