from __future__ import annotations

import pytest

from engine.core.choices import Choice, Cut, Link, cut


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param("Which one?\n\n- Tea\n- Coffee", Cut("Which one?", (Choice("Tea"), Choice("Coffee"))),
                     id="a-list-under-text-ends-in-choices"),
        pytest.param("Pick:\n* Red\n* Blue\n", Cut("Pick:", (Choice("Red"), Choice("Blue"))), id="star-bullets"),
        pytest.param("- Tea\n- Coffee", Cut("- Tea\n- Coffee"), id="nothing-above-stays-a-list"),
        pytest.param("Pick:\n" + "\n".join(f"- {n}" for n in range(7)),
                     Cut("Pick:\n" + "\n".join(f"- {n}" for n in range(7))), id="seven-items-stay-a-list"),
        pytest.param("Pick:\n" + "\n".join(f"- {n}" for n in range(6)),
                     Cut("Pick:", tuple(Choice(str(n)) for n in range(6))), id="six-items-are-choices"),
        pytest.param("Pick:\n- " + "x" * 71 + "\n- short", Cut("Pick:\n- " + "x" * 71 + "\n- short"),
                     id="an-item-over-70-chars-stays-a-list"),
        pytest.param("Pick:\n- " + "x" * 70, Cut("Pick:", (Choice("x" * 70),)), id="exactly-70-is-a-choice"),
        pytest.param("Pick:\n- a\n  - b\n    - c", Cut("Pick:", (Choice("a", "b\nc"),)), id="nesting-three-deep"),
        pytest.param("Pick:\n- a\n  - b\n    - c\n      - d", Cut("Pick:\n- a\n  - b\n    - c\n      - d"),
                     id="nesting-four-deep-stays-a-list"),
        pytest.param("Read more:\n- The docs -> https://example.org/docs\n- Ask a person",
                     Cut("Read more:", (Choice("Ask a person"),), (Link("The docs", "https://example.org/docs"),)),
                     id="a-link-item-is-a-link-not-a-choice"),
        pytest.param("Links:\n- A -> https://a.example\n- B -> https://b.example",
                     Cut("Links:\n- A -> https://a.example\n- B -> https://b.example"), id="only-links-stay-a-list"),
        pytest.param("Steps:\n- one\n- two\n\nThen tell me how it went.",
                     Cut("Steps:\n- one\n- two\n\nThen tell me how it went."), id="a-list-not-at-the-end-stays"),
        pytest.param("Plain words.", Cut("Plain words."), id="no-list"),
        pytest.param("Which?\n- Tea  \n- Coffee\n\n\n", Cut("Which?", (Choice("Tea"), Choice("Coffee"))),
                     id="trailing-space-and-blank-lines"),
    ],
)
def test_cut(answer: str, expected: Cut) -> None:
    assert cut(answer) == expected


def test_offers_says_whether_there_is_anything_to_press() -> None:
    assert cut("Which?\n- a\n- b").offers
    assert not cut("- a\n- b").offers
