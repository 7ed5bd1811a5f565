from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from appservice.matrix.inbound.said import (
    Line,
    Membership,
    apply_edits,
    html_to_text,
    read_event,
    strip_reply_fallback,
)

EVENTS = Path(__file__).parent / "events"
ROOM = "!kXgQmVPvIyQdSLRwtR:localhost"


def load(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / f"{name}.json").read_text())
    return event


def read(name: str, **kwargs: Any) -> Line:
    line = read_event(load(name), **kwargs)
    assert line is not None, name
    return line


@pytest.mark.parametrize(
    ("fixture", "text"),
    [
        ("text_plain", "Can someone summarise the meeting notes?"),
        ("notice", "Here is the summary."),
        # The sender's display name is added by the context builder.
        ("emote", "* waves at everyone"),
        ("reply_fallback", "I can, give me a minute"),
        ("image_caption", "[image: IMG_2041.jpg] the whiteboard after the meeting"),
        ("image", "[image: screenshot.png]"),
        ("file", "[file: minutes-2024-05.pdf]"),
        ("video", "[video: demo.mp4] demo of the new flow"),
        ("audio", "[audio: jingle.mp3]"),
        ("voice", "[voice note]"),
        ("voice_msc2516", "[voice note]"),
        ("location", "[location: Big Ben, London, UK geo:51.5008,0.1247;u=35]"),
        ("sticker", "[sticker: thumbs up cat]"),
        ("poll_unstable", "[poll] Lunch where?\n1. Pizza\n2. Sushi"),
        ("poll_stable", "[poll] Ship on Friday?\n1. Yes\n2. No"),
        ("edit", "Can someone summarise the board meeting notes?"),
        ("redaction_v11", ""),
        ("member_join", ""),
    ],
)
def test_what_a_person_reads(fixture: str, text: str) -> None:
    assert read(fixture).text == text


def test_a_line_carries_the_event_identity() -> None:
    line = read("text_plain")
    assert (line.event_id, line.room_id, line.sender, line.ts, line.event_type, line.msgtype) == (
        "$Jh3q9Z0pF4zYq1t2kq_xwQ7bS5mF3eL8aR6oN0cVdUs",
        ROOM,
        "@alice:localhost",
        1716400000000,
        "m.room.message",
        "m.text",
    )
    assert not line.is_notice and not line.is_state


@pytest.mark.parametrize(
    ("fixture", "is_notice"),
    [("notice", True), ("text_plain", False), ("emote", False)],
)
def test_notices_are_marked(fixture: str, is_notice: bool) -> None:
    assert read(fixture).is_notice is is_notice


def test_formatted_body_is_read_as_text_with_links_lists_and_code() -> None:
    assert read("text_html").text == (
        "Agenda\n\n- budget\n- the doc (https://example.org/doc)\n\nline one\nline two & more\n\n"
        "def f():\n    return 1"
    )


def test_reply_fallback_is_stripped_from_body_and_formatted_body() -> None:
    line = read("reply_fallback")
    assert line.reply_to == "$Jh3q9Z0pF4zYq1t2kq_xwQ7bS5mF3eL8aR6oN0cVdUs"
    assert line.formatted_body == "I can, give me a minute"
    assert "Helper" not in line.text


def test_reply_fallback_in_body_only_is_stripped() -> None:
    event = load("reply_fallback")
    del event["content"]["formatted_body"], event["content"]["format"]
    assert read_event(event) == replace(read("reply_fallback"), formatted_body=None)


def test_a_quote_that_is_not_a_reply_is_kept() -> None:
    event = load("text_plain")
    event["content"]["body"] = "> to be or not to be\n\nwho said that?"
    line = read_event(event)
    assert line is not None and line.text == "> to be or not to be\n\nwho said that?"


@pytest.mark.parametrize(
    ("body", "stripped"),
    [
        ("> <@a:x> hi\n> there\n\nanswer", "answer"),
        ("> <@a:x> hi\n>\n> more\n\nanswer\n\nsecond", "answer\n\nsecond"),
        ("> <@a:x> hi\nanswer right after", "answer right after"),
        ("no fallback", "no fallback"),
    ],
)
def test_strip_reply_fallback(body: str, stripped: str) -> None:
    assert strip_reply_fallback(body) == stripped


@pytest.mark.parametrize(
    ("fixture", "thread_root", "reply_to"),
    [
        # is_falling_back: the reply exists only for clients that don't show threads.
        ("thread_fallback", "$Jh3q9Z0pF4zYq1t2kq_xwQ7bS5mF3eL8aR6oN0cVdUs", None),
        (
            "thread_reply",
            "$Jh3q9Z0pF4zYq1t2kq_xwQ7bS5mF3eL8aR6oN0cVdUs",
            "$5vV0lH1mO8xK2qA7yR3sT9uW4zB6cD0eF1gH2iJ3kL4",
        ),
        ("reply_fallback", None, "$Jh3q9Z0pF4zYq1t2kq_xwQ7bS5mF3eL8aR6oN0cVdUs"),
        ("text_plain", None, None),
    ],
)
def test_threads_and_replies(fixture: str, thread_root: str | None, reply_to: str | None) -> None:
    line = read(fixture)
    assert (line.thread_root, line.reply_to) == (thread_root, reply_to)


def test_an_edit_reads_as_its_new_content_and_names_the_original() -> None:
    line = read("edit")
    assert line.replaces == "$Jh3q9Z0pF4zYq1t2kq_xwQ7bS5mF3eL8aR6oN0cVdUs"
    assert not line.text.startswith("*")


def test_an_edit_without_new_content_is_read_as_sent() -> None:
    event = load("edit")
    del event["content"]["m.new_content"]
    line = read_event(event)
    assert line is not None
    assert line.replaces is None
    assert line.text == "* Can someone summarise the board meeting notes?"


@pytest.mark.parametrize(
    ("fixture", "redacts"),
    [
        ("redaction_v11", "$eMoTe111aaaaBBBBccccDDDDeeeeFFFFggggHHHHiii"),
        ("redaction_legacy", "$RePlY222aaaaBBBBccccDDDDeeeeFFFFggggHHHHiii"),
    ],
)
def test_redactions_name_their_target(fixture: str, redacts: str) -> None:
    line = read(fixture)
    assert (line.redacts, line.text) == (redacts, "")


@pytest.mark.parametrize(
    ("fixture", "membership"),
    [
        ("member_join", Membership("join", "@carol:localhost", previous="invite", display_name="Carol")),
        ("member_kick", Membership("leave", "@carol:localhost", previous="join", reason="off topic")),
    ],
)
def test_membership_is_kept_for_phrasing_later(fixture: str, membership: Membership) -> None:
    line = read(fixture)
    assert line.is_state
    assert line.membership == membership


def test_other_state_events_are_state_lines_without_membership() -> None:
    line = read("topic")
    assert line.is_state and line.membership is None and line.text == ""


def test_voice_note_with_a_transcript() -> None:
    line = read("voice", transcript="  let's meet at noon ")
    assert line.text == "[voice note] let's meet at noon"
    assert line.is_voice and line.media_url == "mxc://localhost/VoIcEvOiCe"


def test_plain_audio_is_not_a_voice_note() -> None:
    assert not read("audio").is_voice


@pytest.mark.parametrize(
    ("fixture", "mentions"),
    [
        ("text_plain", ()),
        ("emote", None),
        ("mention_m_mentions", ("@bot_helper:localhost",)),
        ("mention_two_bots", ("@bot_helper:localhost", "@bot_scribe:localhost")),
    ],
)
def test_mentions_are_raw_user_ids_or_none_when_absent(
    fixture: str, mentions: tuple[str, ...] | None
) -> None:
    assert read(fixture).mentions == mentions


@pytest.mark.parametrize("fixture", ["encrypted", "reaction", "redacted_message"])
def test_nothing_to_read(fixture: str) -> None:
    assert read_event(load(fixture)) is None


def _with(fixture: str, **changes: Any) -> dict[str, Any]:
    event = load(fixture)
    for key, value in changes.items():
        if value is _DELETE:
            del event[key]
        else:
            event[key] = value
    return event


_DELETE = object()


@pytest.mark.parametrize(
    "event",
    [
        _with("text_plain", content="not a dict"),
        _with("text_plain", content={"msgtype": "m.text", "body": 42}),
        _with("text_plain", content={"msgtype": "m.text"}),
        _with("text_plain", event_id=_DELETE),
        _with("text_plain", origin_server_ts="yesterday"),
        _with("text_plain", origin_server_ts=True),
        _with("text_plain", sender=None),
        _with("text_plain", type="com.example.unknown"),
        _with("redaction_legacy", redacts=_DELETE),
        _with("poll_unstable", content={"org.matrix.msc3381.poll.start": "nope"}),
        _with("member_join", state_key=7),
    ],
)
def test_malformed_events_are_not_read(event: dict[str, Any]) -> None:
    assert read_event(event) is None


@pytest.mark.parametrize(
    ("event", "text"),
    [
        (_with("text_plain", content={"msgtype": 5, "body": "still words"}), "still words"),
        (
            _with("text_plain", content={"body": "no msgtype", "m.relates_to": "x", "m.mentions": []}),
            "no msgtype",
        ),
        (
            _with(
                "text_plain",
                content={
                    "msgtype": "m.text",
                    "body": "b",
                    "format": "org.matrix.custom.html",
                    "formatted_body": 3,
                },
            ),
            "b",
        ),
        (_with("image", content={"msgtype": "m.image", "body": None, "url": 9}), "[image: image]"),
        (_with("sticker", content={"body": ["x"]}), "[sticker: sticker]"),
        (_with("member_join", content="gone"), ""),
        (_with("redaction_v11", content="gone"), ""),
    ],
)
def test_malformed_content_reads_what_it_can(event: dict[str, Any], text: str) -> None:
    line = read_event(event)
    assert line is not None and line.text == text


def test_malformed_mentions_name_nobody() -> None:
    event = load("mention_m_mentions")
    event["content"]["m.mentions"] = {"user_ids": "@bot_helper:localhost"}
    line = read_event(event)
    assert line is not None and line.mentions == ()


def test_not_a_mapping_is_not_read() -> None:
    assert read_event([]) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("html", "text"),
    [
        ("a<br>b<br/><br>c", "a\nb\n\nc"),
        ('<a href="https://matrix.to/#/@bot_x:localhost">Helper</a> hi', "Helper hi"),
        ('<a href="https://example.org">https://example.org</a>', "https://example.org"),
        ('<ol start="3"><li>c</li><li>d</li></ol>', "3. c\n4. d"),
        ('<img src="mxc://x/y" alt=":party:"> yes', ":party: yes"),
        ("<mx-reply><blockquote>old</blockquote></mx-reply>new", "new"),
        ("<p>unclosed <b>bold", "unclosed bold"),
        ("&lt;script&gt; &amp;", "<script> &"),
    ],
)
def test_html_to_text(html: str, text: str) -> None:
    assert html_to_text(html) == text


def test_pills_as_ids() -> None:
    html = '<a href="https://matrix.to/#/%40bot_x%3Alocalhost">Helper</a>, hi'
    assert html_to_text(html, pills_as_ids=True) == "@bot_x:localhost, hi"


# --- apply_edits ---------------------------------------------------------------


def _line(event_id: str, ts: int, text: str, **fields: Any) -> Line:
    base = Line(
        event_id=event_id,
        room_id=ROOM,
        sender="@alice:localhost",
        ts=ts,
        event_type="m.room.message",
        text=text,
    )
    return replace(base, **fields)


def test_apply_edits_on_fixtures() -> None:
    lines = [
        read(name)
        for name in ("text_plain", "emote", "reply_fallback", "edit", "redaction_v11", "redaction_legacy")
    ]
    result = apply_edits(lines)
    assert [(line.event_id, line.text) for line in result] == [
        ("$Jh3q9Z0pF4zYq1t2kq_xwQ7bS5mF3eL8aR6oN0cVdUs", "Can someone summarise the board meeting notes?")
    ]


def test_latest_edit_wins_by_ts_then_larger_event_id() -> None:
    original = _line("$a", 1, "first", thread_root="$root")
    lines = [
        original,
        _line("$e1", 5, "by ts", replaces="$a"),
        _line("$e3", 9, "latest, smaller id", replaces="$a"),
        _line("$e4", 9, "latest, larger id", replaces="$a"),
        _line("$e2", 7, "middle", replaces="$a"),
    ]
    assert apply_edits(lines) == [replace(original, text="latest, larger id")]


def test_edits_by_someone_else_are_ignored() -> None:
    lines = [_line("$a", 1, "mine"), _line("$e", 2, "hijacked", replaces="$a", sender="@mallory:localhost")]
    assert [line.text for line in apply_edits(lines)] == ["mine"]


def test_an_edit_of_an_edit_is_ignored() -> None:
    lines = [
        _line("$a", 1, "orig"),
        _line("$e1", 2, "edit", replaces="$a"),
        _line("$e2", 3, "edit²", replaces="$e1"),
    ]
    assert [line.text for line in apply_edits(lines)] == ["edit"]


def test_a_redacted_edit_falls_back_to_the_previous_one() -> None:
    lines = [
        _line("$a", 1, "orig"),
        _line("$e1", 2, "kept edit", replaces="$a"),
        _line("$e2", 3, "regretted edit", replaces="$a"),
        _line("$r", 4, "", redacts="$e2"),
    ]
    assert [line.text for line in apply_edits(lines)] == ["kept edit"]


def test_redacted_lines_and_redactions_are_dropped_order_kept() -> None:
    lines = [
        _line("$a", 1, "one"),
        _line("$b", 2, "two"),
        _line("$c", 3, "three"),
        _line("$r", 4, "", redacts="$b"),
        _line("$d", 5, "four", replaces="$c"),
    ]
    assert [(line.event_id, line.text) for line in apply_edits(lines)] == [("$a", "one"), ("$c", "four")]


def test_an_edit_whose_original_is_missing_is_dropped() -> None:
    assert apply_edits([_line("$e", 2, "orphan", replaces="$gone")]) == []
