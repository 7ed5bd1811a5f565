"""A ``!word`` that is no command: which one it was meant to be, if any (engine/core/typos.py)."""

from __future__ import annotations

import time

import pytest

from engine.core.typos import distance, meant

OURS = ["summarise", "triage", "help", "cancel", "bots"]


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("", "", 0), ("a", "", 1), ("", "abc", 3), ("sumarise", "summarise", 1), ("summraise", "summarise", 1),
    ("kitten", "sitting", 3), ("hlep", "help", 1), ("ab", "ba", 1), ("abc", "abc", 0),
])
def test_distance(a: str, b: str, expected: int) -> None:
    assert distance(a, b) == expected == distance(b, a)


@pytest.mark.parametrize(("given", "expected"), [
    ("sumarise", "summarise"),  # a letter left out
    ("summarize", "summarise"),  # a letter changed
    ("sumamrise", "summarise"),  # two neighbours swapped
    ("summ", "summarise"),  # the start of one
    ("SUMARISE", "summarise"),
    ("hlep", "help"),
    ("bot", "bots"),
    ("tirage", "triage"),
    ("cancle", "cancel"),
    ("hookshot", None),  # another bot's command: nobody's typo
    ("remind", None),
    ("summarise", None),  # itself: not a typo (withheld or not here, it stays silent)
    ("help", None),
    ("s", None),  # one letter is the start of too much to mean anything
    ("hi", None),  # two letters are not within two edits of every short name
    ("x" * 10_000, None),
])
def test_meant(given: str, expected: str | None) -> None:
    assert meant(given, OURS) == expected


def test_the_closest_wins_and_ties_go_alphabetically() -> None:
    assert meant("bota", ["bots", "boat"]) == "boat"  # both one edit away: alphabetical
    assert meant("triag", ["triage", "triages"]) == "triage"


def test_a_long_word_is_answered_at_once() -> None:
    start = time.process_time()
    for _ in range(100):
        meant("y" * 64, OURS * 20)
    assert time.process_time() - start < 1.0
