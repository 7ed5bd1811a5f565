"""An edition's card (SPEC §10): validated, rendered to Matrix HTML inside the spec's allowed tags (what the
Matrix sanitiser keeps unchanged), always with a plain body; a malformed card comes back as mistakes, one
line each, naming where. And whether a run is an edition at all, read off its steps. Pure."""

from __future__ import annotations

import time
from typing import Any

import pytest

from appservice.matrix.delivery.render import sanitize
from appservice.members.card import card_html, card_text, read_card
from appservice.members.edition import accepted_card, judge
from engine.core.messages import AnswerStep, ToolCall, ToolCallStep, ToolResultStep

CARD: dict[str, Any] = {
    "heading": "Morning News — 1 December",
    "blocks": [
        {"type": "text", "text": "Three stories this morning."},
        {"type": "item", "title": "Budget passed", "text": "The Dáil voted 80 to 70.", "link": "https://www.rte.ie/news/1"},
        {"type": "list", "items": ["Rain later", "Markets up"]},
        {"type": "kv", "pairs": [{"key": "Weather", "value": "Rain, 9°C"}]},
        {"type": "divider"},
        {"type": "section", "title": "Sport", "blocks": [{"type": "item", "title": "Cup final on Sunday"}]},
        {"type": "links", "links": [{"label": "RTÉ", "url": "https://www.rte.ie/"},
                                    {"label": "Guardian", "url": "https://www.theguardian.com/"}]},
    ],
}


def test_a_card_renders_within_the_allowed_tags_and_the_sanitiser_changes_nothing() -> None:
    html = card_html(read_card(CARD))
    assert sanitize(html) == html
    assert html.startswith("<h3>Morning News — 1 December</h3>")
    assert '<a href="https://www.rte.ie/news/1">Budget passed</a>' in html
    assert "<table><tbody><tr><th>Weather</th><td>Rain, 9°C</td></tr></tbody></table>" in html
    assert "<hr>" in html and "<h4>Sport</h4>" in html


def test_the_plain_body_says_everything_the_card_does() -> None:
    text = card_text(read_card(CARD))
    for words in ("Morning News — 1 December", "Budget passed — https://www.rte.ie/news/1", "- Rain later",
                  "Weather: Rain, 9°C", "SPORT", "RTÉ: https://www.rte.ie/"):
        assert words in text
    assert "<" not in text


def test_words_that_look_like_markup_are_words() -> None:
    html = card_html(read_card({"heading": "<script>alert(1)</script>",
                                "blocks": [{"type": "text", "text": '<img src=x onerror="y">'}]}))
    assert "<script>" not in html and "<img" not in html and "&lt;script&gt;" in html
    assert sanitize(html) == html


@pytest.mark.parametrize(("card", "words"), [
    ({"blocks": [{"type": "text", "text": "x"}]}, "heading: is missing"),
    ({"heading": "H", "blocks": []}, "blocks: List should have at least 1 item"),
    ({"heading": "H", "blocks": [{"type": "video", "url": "x"}]}, "blocks.0: type must be one of"),
    ({"heading": "H", "blocks": [{"text": "no type"}]}, "each block needs a type"),
    ({"heading": "H", "blocks": [{"type": "item", "title": "t", "link": "http://x.org/"}]},
     "blocks.0.item.link: 'http://x.org/' is not an https:// address"),
    ({"heading": "H", "blocks": [{"type": "links", "links": [{"label": "x", "url": "javascript:alert(1)"}]}]},
     "is not an https:// address"),
    ({"heading": "H", "blocks": [{"type": "section", "title": "S", "blocks": [
        {"type": "section", "title": "deeper", "blocks": [{"type": "divider"}]}]}]}, "a section holds no section"),
    ({"heading": "H", "blocks": [{"type": "text", "text": "x", "colour": "red"}]}, "colour: is not part of a card"),
])
def test_a_malformed_card_is_refused_naming_each_mistake(card: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError) as caught:
        read_card(card)
    assert words in str(caught.value)


def test_a_huge_card_is_refused_quickly() -> None:
    started = time.monotonic()
    with pytest.raises(ValueError, match="at most 40 items"):
        read_card({"heading": "H", "blocks": [{"type": "text", "text": "x" * 100}] * 10_000})
    assert time.monotonic() - started < 1.0


def _run(*steps: Any) -> list[Any]:
    return list(steps)


def fetched(n: int, ok: bool) -> list[Any]:
    call = ToolCall(f"f{n}", "fetch", {"url": f"https://example.org/{n}"})
    return [ToolCallStep(call), ToolResultStep(f"f{n}", "page" if ok else "answered 403 Forbidden", is_error=not ok)]


def test_an_edition_that_read_a_source_is_an_edition() -> None:
    steps = [*fetched(1, False), *fetched(2, True), AnswerStep("Today: …")]
    assert judge(steps, "Today: …", has_sources=True).ok


def test_a_run_that_reached_none_of_its_sources_failed_and_says_why() -> None:
    steps = [*fetched(1, False), *fetched(2, False)]
    verdict = judge(steps, "Sorry, I could not read anything today.", has_sources=True)
    assert not verdict.ok and "none of its sources could be read" in verdict.why and "403" in verdict.why


def test_an_empty_or_failed_run_failed() -> None:
    assert not judge([*fetched(1, True)], "  ", has_sources=True).ok
    assert "did not finish: the model is down" in judge([], None, has_sources=False, error="the model is down").why
    assert "did not read any" in judge([], "words", has_sources=True).why


def test_the_accepted_card_is_the_one_that_came_back_without_error() -> None:
    bad = ToolCall("c1", "card", {"card": {"heading": "H"}})
    good = ToolCall("c2", "card", {"card": CARD})
    steps = [ToolCallStep(bad), ToolResultStep("c1", "not valid", is_error=True), ToolCallStep(good),
             ToolResultStep("c2", "accepted")]
    card = accepted_card(steps)
    assert card is not None and card.heading == CARD["heading"]
    assert accepted_card(steps[:2]) is None
