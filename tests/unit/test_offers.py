"""How an offer reads in Matrix (appservice/matrix/delivery/offers.py): pure, no services."""

from __future__ import annotations

import pytest

from appservice.matrix.delivery.offers import (
    KEYCAPS,
    bare_number,
    keycap_number,
    offer_markdown,
    poll_question,
    spent_markdown,
    style_of,
    voted,
)
from appservice.matrix.delivery.render import render
from engine.core.choices import Choice, Link, cut

CHOICES = (Choice("The paperback"), Choice("The hardcover", "signed\nfirst edition"))
LINKS = (Link("Read the delivery policy", "https://example.org/refunds"),)


@pytest.mark.parametrize(("key", "n"), [
    (KEYCAPS[0], 1), (KEYCAPS[5], 6), ("3\u20e3", 3), ("7\ufe0f\u20e3", None), ("👍", None), ("1", None), (None, None),
])
def test_keycap_number(key: object, n: int | None) -> None:
    assert keycap_number(key) == n


@pytest.mark.parametrize(("text", "n"), [("2", 2), (" 2. ", 2), ("6", 6), ("7", None), ("0", None),
                                         ("2 please", None), ("12", None), ("", None)])
def test_bare_number(text: str, n: int | None) -> None:
    assert bare_number(text) == n


def test_an_offer_reads_as_the_words_then_numbered_choices_then_links() -> None:
    text = offer_markdown("Which copy is it?", CHOICES, LINKS)
    assert text == ("Which copy is it?\n\n1. The paperback\n2. The hardcover\n   - signed\n   - first edition\n\n"
                    "- [Read the delivery policy](https://example.org/refunds)")
    html = render(text).formatted_body
    assert html is not None and "<ol>" in html and 'href="https://example.org/refunds"' in html


def test_a_cut_answer_renders_back_to_its_choices() -> None:
    c = cut("Which copy is it?\n\n- The paperback\n- The hardcover\n- Policy -> https://example.org/p")
    assert offer_markdown(c.words, c.choices, c.links).startswith("Which copy is it?\n\n1. The paperback\n")


def test_a_spent_set_marks_the_one_taken_and_strikes_the_rest() -> None:
    text = spent_markdown("Which copy is it?", CHOICES, (), 2, "✅ 2. The hardcover — taken by Bob")
    assert text == "Which copy is it?\n\n~~1. The paperback~~  \n✅ 2. The hardcover — taken by Bob"
    html = render(text).formatted_body
    assert html is not None and "<s>1. The paperback</s><br" in html and "<ol>" not in html


def test_the_poll_asks_the_line_the_choices_sit_under() -> None:
    assert poll_question("Thanks for asking.\n\n## Which copy is it?") == "Which copy is it?"
    assert len(poll_question("x" * 500)) == 200


def test_a_room_chooses_polls_in_its_settings() -> None:
    assert style_of({"choices": "poll"}) == "poll"
    assert style_of({}) == style_of(None) == style_of({"choices": "reactions"}) == "reactions"


def test_votes_are_read_under_both_prefixes() -> None:
    rel = {"rel_type": "m.reference", "event_id": "$poll"}
    assert voted({"m.relates_to": rel, "org.matrix.msc3381.poll.response": {"answers": ["2"]}}) == ("$poll", ["2"])
    assert voted({"m.relates_to": rel, "m.selections": ["1"]}) == ("$poll", ["1"])
    assert voted({"m.relates_to": rel, "m.selections": []}) == ("$poll", [])  # a vote taken back
    assert voted({"m.relates_to": {"rel_type": "m.annotation", "event_id": "$poll"}, "m.selections": ["1"]}) is None
    assert voted({"m.relates_to": rel}) is None
