"""Fuzz: the event normaliser — what a person's event becomes as ingest reads it (``said``: HTML flattening,
reply fallbacks, media and polls, edits; ``mentions``; whether it is a command). Whatever a client or a
federated server sends: no exception, every case within 100 ms, and what comes out is well formed."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from appservice.matrix.inbound.htmltext import flatten, person_link, strip_mx_reply, strip_reply_fallback
from appservice.matrix.inbound.mentions import Puppet, named_bots
from appservice.matrix.inbound.said import Line, apply_edits, read_event
from engine.content.commands import parse_command, strip_address
from tests.fuzz.budget import FUZZ, outcome, within_budget
from tests.untrusted import LINE_HTML

PUPPETS = [Puppet("@bot_helper:localhost", "Helper"), Puppet("@bot_scribe:localhost", "Scribe")]
NAMES = ["@summon:localhost", "@bot_helper:localhost", "Helper", "@bot_scribe:localhost", "Scribe"]
PILL = '<a href="https://matrix.to/#/@bot_helper:localhost">Helper</a>'

# Pieces HTML is made of, good and broken, so generated text reaches every state of the reader.
_PIECES = st.sampled_from([
    "<", ">", "</", "/>", "<!--", "-->", "<!", "<?", "=", "'", '"', "&", "&amp;", "&#", "&#x", ";", "#", " ", "\n",
    "\t", "\x00", "\x01", "\x02", "p", "a", "br", "pre", "li", "ol", "ul", "mx-reply", "script", "style", "td",
    "img", "href=", "alt=", "start=", "https://matrix.to/#/", "@bot_helper:localhost", "%40bot_scribe%3Alocalhost",
    "Helper", "Scribe", "!summarise", "since=2d", "\u201c", "é", "\U0001f600", "x", "0", "9" * 12, PILL,
    "> quoted\n", "\n\n",
])
HTML = st.one_of(
    st.lists(_PIECES, max_size=60).map("".join),
    st.text(max_size=300),
    st.sampled_from([html[:2000] for _, html in LINE_HTML]),
)
WORDS = st.one_of(st.text(min_size=1, max_size=200), st.lists(_PIECES, min_size=1, max_size=30).map("".join))
# A value of the wrong shape where a field is expected (cheap to draw, so the slice stays fast).
JUNK = st.sampled_from([None, True, 0, -1, 2**70, 1.5, "", "x", [], ["x"], {}, {"a": 1}, {"body": 3}, [{}]])


@st.composite
def mostly(draw: st.DrawFn, valid: st.SearchStrategy[Any]) -> Any:
    """``valid`` 15 times in 16, else a value of the wrong shape: most events get far enough to be read."""
    return draw(JUNK) if draw(st.integers(0, 15)) == 11 else draw(valid)  # not 0: the simplest integer comes often


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=6,
)
MSGTYPES = st.sampled_from(["m.text", "m.notice", "m.emote", "m.image", "m.file", "m.video", "m.audio",
                            "m.location", "m.key.verification.request", "x"]) | JUNK


@st.composite
def contents(draw: st.DrawFn) -> dict[str, Any]:
    content: dict[str, Any] = {"msgtype": draw(mostly(MSGTYPES)), "body": draw(mostly(WORDS))}
    if draw(st.booleans()):
        content["format"] = draw(st.sampled_from(["org.matrix.custom.html", "text/plain"]) | JUNK)
        content["formatted_body"] = draw(HTML | JUNK)
    if draw(st.booleans()):
        content["m.mentions"] = draw(st.fixed_dictionaries({"user_ids": st.lists(
            st.sampled_from([p.user_id for p in PUPPETS] + ["@alice:localhost"]) | JUNK, max_size=3)}) | JUNK)
    if draw(st.booleans()):
        relation = draw(st.sampled_from(["m.thread", "m.replace", "m.annotation", None]))
        relates: dict[str, Any] = {"rel_type": relation, "event_id": draw(mostly(st.sampled_from(["$root", "$x", ""])))}
        if draw(st.booleans()):
            relates["m.in_reply_to"] = draw(st.fixed_dictionaries({"event_id": st.just("$replied")}) | JUNK)
            relates["is_falling_back"] = draw(st.booleans() | JUNK)
        content["m.relates_to"] = draw(st.just(relates) | JUNK)
        if relation == "m.replace":
            content["m.new_content"] = draw(st.deferred(contents) | JUNK)
    for key in draw(st.lists(st.sampled_from(["url", "filename", "file", "geo_uri", "org.matrix.msc3245.voice",
                                              "m.poll", "org.matrix.msc3381.poll.start", "m.text"]), max_size=3)):
        content[key] = draw(WORDS | JUNK | st.fixed_dictionaries({
            "question": st.fixed_dictionaries({"m.text": WORDS | st.lists(st.fixed_dictionaries(
                {"mimetype": st.sampled_from(["text/plain", "text/html"]), "body": HTML}), max_size=2)}),
            "answers": st.lists(st.fixed_dictionaries({"m.text": WORDS}), max_size=3)}))
    return content


@st.composite
def events(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 19)) == 13:
        return draw(JSON)  # not even an event
    event: dict[str, Any] = {
        "type": draw(mostly(st.sampled_from(["m.room.message", "m.room.message", "m.room.message", "m.sticker",
                                             "m.room.redaction", "m.room.member", "m.poll.start",
                                             "org.matrix.msc3381.poll.start", "m.room.encrypted", "m.reaction"]))),
        "event_id": draw(mostly(st.sampled_from(["$e1", "$e2", "$root"]))),
        "room_id": draw(mostly(st.just("!room:localhost"))),
        "sender": draw(mostly(st.sampled_from(["@alice:localhost", "@bot_helper:localhost"]))),
        "origin_server_ts": draw(mostly(st.integers(-(2**63), 2**63))),
        "content": draw(mostly(contents())),
    }
    if draw(st.integers(0, 4)) == 3:
        event["state_key"] = draw(mostly(st.just("@alice:localhost")))
    if draw(st.integers(0, 4)) == 3:
        event["unsigned"] = draw(JUNK | st.fixed_dictionaries({}, optional={"prev_content": st.fixed_dictionaries(
            {"membership": st.sampled_from(["join", "leave", "invite"]) | JUNK}) | JUNK, "redacted_because": JUNK}))
    if draw(st.integers(0, 4)) == 3:
        event["redacts"] = draw(mostly(st.just("$e1")))
    return event


def _as_ingest_reads(event: Any, transcript: str | None) -> Line | None:
    line = read_event(event, transcript=transcript)
    if line is None:
        return None
    named_bots(line, PUPPETS)
    parse_command(strip_address(line.text_with_ids or line.text, NAMES))
    return line


@FUZZ
@given(events(), st.none() | WORDS)
def test_any_event_is_read_without_a_crash_in_time(event: Any, transcript: str | None) -> None:
    size = len(repr(event))
    line = within_budget("event normaliser", lambda: _as_ingest_reads(event, transcript), size)
    outcome("event normaliser", "not read (no line)" if line is None else "read as a line")
    if line is None:
        return
    assert isinstance(line.text, str) and isinstance(line.event_id, str) and line.event_id
    assert line.text_with_ids is None or (isinstance(line.text_with_ids, str) and line.text_with_ids != line.text)
    assert all(isinstance(uid, str) for uid in line.mentions or ())
    named = named_bots(line, PUPPETS)
    assert set(named) <= {p.user_id for p in PUPPETS} and len(named) == len(set(named))
    assert line.sender not in named
    assert apply_edits([line, line]) is not None


@FUZZ
@given(HTML)
def test_any_html_is_flattened_without_a_crash_in_time(html: str) -> None:
    flat = within_budget("HTML flattening", lambda: flatten(html), len(html))
    assert isinstance(flat.text, str) and isinstance(flat.with_ids, str)
    for words in (flat.text, flat.with_ids):
        assert words == words.rstrip()
        assert not any(marker in words for marker in "\x00\x01\x02")
        assert "\n\n\n" not in words or "<pre" in html.lower()
    assert isinstance(strip_mx_reply(html), str)


@FUZZ
@given(WORDS)
def test_any_reply_fallback_is_stripped_without_a_crash_in_time(body: str) -> None:
    stripped = within_budget("reply fallbacks", lambda: strip_reply_fallback(body), len(body))
    assert body.endswith(stripped)
    assert person_link(body) is None or person_link(body).startswith("@")  # type: ignore[union-attr]
