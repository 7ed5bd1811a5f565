from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from appservice.matrix.inbound.mentions import Puppet, named_bots
from appservice.matrix.inbound.said import read_event

EVENTS = Path(__file__).parent / "events"
HELPER = Puppet("@bot_helper:localhost", "Helper")
SCRIBE = Puppet("@bot_scribe:localhost", "Scribe")
PUPPETS = [HELPER, SCRIBE]


def load(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / f"{name}.json").read_text())
    return event


def message(
    body: str, *, html: str | None = None, mentions: Any = ..., sender: str = "@alice:localhost"
) -> dict[str, Any]:
    event = load("text_plain")
    content: dict[str, Any] = {"msgtype": "m.text", "body": body}
    if html is not None:
        content |= {"format": "org.matrix.custom.html", "formatted_body": html}
    if mentions is not ...:
        content["m.mentions"] = mentions
    event["content"] = content
    event["sender"] = sender
    return event


@pytest.mark.parametrize(
    ("fixture", "named"),
    [
        ("mention_m_mentions", [HELPER.user_id]),
        # m.mentions present and empty: the sender's client meant nobody, whatever the text says.
        ("mention_empty", []),
        ("mention_pill_legacy", [SCRIBE.user_id]),
        ("mention_display_name", [HELPER.user_id]),
        # user_ids lists helper first, but the text names scribe first.
        ("mention_two_bots", [SCRIBE.user_id, HELPER.user_id]),
        # The quoted line named Helper; the reply itself names nobody.
        ("mention_reply_quoting_bot", []),
        ("text_plain", []),
        ("encrypted", []),
    ],
)
def test_fixtures(fixture: str, named: list[str]) -> None:
    assert named_bots(load(fixture), PUPPETS) == named


def test_accepts_a_line_as_well_as_an_event() -> None:
    line = read_event(load("mention_two_bots"))
    assert line is not None
    assert (
        named_bots(line, PUPPETS)
        == named_bots(load("mention_two_bots"), PUPPETS)
        == [SCRIBE.user_id, HELPER.user_id]
    )


@pytest.mark.parametrize(
    ("event", "named"),
    [
        # Without m.mentions: the display name as a whole word, any case, optional "@".
        (message("Helper, what's the time?"), [HELPER.user_id]),
        (message("@helper what's the time?"), [HELPER.user_id]),
        (message("ask HELPER."), [HELPER.user_id]),
        (message("the helpers are busy"), []),
        (message("unhelpful"), []),
        (message("email me at x@helper"), []),
        # The bare user id and a matrix.to link in the body.
        (message("@bot_scribe:localhost take notes"), [SCRIBE.user_id]),
        (message("see https://matrix.to/#/@bot_scribe:localhost please"), [SCRIBE.user_id]),
        (message("see https://matrix.to/#/%40bot_scribe%3Alocalhost please"), [SCRIBE.user_id]),
        (message("@bot_scribe:localhost.example take notes"), []),
        # A pill whose text is not the display name still names its puppet.
        (
            message(
                "the notes bot: go",
                html='<a href="https://matrix.to/#/@bot_scribe:localhost">the notes bot</a>: go',
            ),
            [SCRIBE.user_id],
        ),
        # Order of first appearance, each once.
        (message("scribe, then helper, then scribe again"), [SCRIBE.user_id, HELPER.user_id]),
        (message("helper and @bot_scribe:localhost and Helper"), [HELPER.user_id, SCRIBE.user_id]),
        # With m.mentions, only its user_ids count.
        (message("Helper, hi", mentions={"user_ids": [SCRIBE.user_id]}), [SCRIBE.user_id]),
        (message("Helper, hi", mentions={"room": True}), []),
        (message("hi", mentions={"user_ids": ["@alice:localhost", "@bot_unknown:localhost"]}), []),
        # Listed but not findable in the text: after the found ones, in user_ids order.
        (
            message("hey Helper", mentions={"user_ids": [SCRIBE.user_id, HELPER.user_id]}),
            [HELPER.user_id, SCRIBE.user_id],
        ),
        (
            message("hey all", mentions={"user_ids": [SCRIBE.user_id, HELPER.user_id, SCRIBE.user_id]}),
            [SCRIBE.user_id, HELPER.user_id],
        ),
        # A bot never names itself.
        (message("Helper here, and Scribe", sender=HELPER.user_id), [SCRIBE.user_id]),
    ],
)
def test_rules(event: dict[str, Any], named: list[str]) -> None:
    assert named_bots(event, PUPPETS) == named


def test_reply_fallback_in_body_only_is_ignored() -> None:
    event = message("> <@alice:localhost> Helper, what's the plan?\n\nno idea")
    event["content"]["m.relates_to"] = {
        "m.in_reply_to": {"event_id": "$MeNt0001aaaaBBBBccccDDDDeeeeFFFFggggHHHHiii"}
    }
    assert named_bots(event, PUPPETS) == []


def test_replying_with_a_new_mention_names_the_bot() -> None:
    event = load("mention_reply_quoting_bot")
    event["content"]["body"] = event["content"]["body"].replace("no idea, ask later", "Scribe, note this")
    event["content"]["formatted_body"] = event["content"]["formatted_body"].replace(
        "no idea, ask later", "Scribe, note this"
    )
    assert named_bots(event, PUPPETS) == [SCRIBE.user_id]


def test_display_names_with_punctuation_match_literally() -> None:
    odd = Puppet("@bot_odd:localhost", "R2-D2 (bot)")
    assert named_bots(message("hey r2-d2 (bot), beep"), [odd]) == [odd.user_id]
    assert named_bots(message("hey R2-D2, beep"), [odd]) == []


def test_no_puppets_names_nobody() -> None:
    assert named_bots(load("mention_m_mentions"), []) == []


@pytest.mark.parametrize(
    ("top_level", "named"),
    [
        # MSC3952: the edit's own m.mentions lists whom this edit (re)notifies; the full list in
        # m.new_content was already acted on when first sent.
        ({}, []),
        ({"user_ids": [HELPER.user_id]}, [HELPER.user_id]),
    ],
)
def test_an_edit_names_whom_its_top_level_mentions_list(top_level: dict[str, Any], named: list[str]) -> None:
    event = load("edit")
    event["content"]["m.mentions"] = top_level
    event["content"]["m.new_content"] |= {
        "body": "Helper, summarise",
        "m.mentions": {"user_ids": [HELPER.user_id]},
    }
    assert named_bots(event, PUPPETS) == named
