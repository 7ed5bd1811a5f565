"""Whether a bot's answer tells the contact it is handing them to a person (pure). On the desk a bot hands over
with its ``hand_to_people`` tool, never by a sentence; one that says it does without the tool has told the contact
a person is coming, so the desk makes that true (counted apart: ``said``). The phrases are the site's
(``### desk``, ``handover_phrases``: ``|`` between them), matched in lower case, whitespace folded."""

from __future__ import annotations

import re

_SPACE = re.compile(r"\s+")
_MOST = 50  # phrases read; more are ignored (the list is the site's, the text the model's)
_LONGEST = 4_000  # characters of an answer read: a handoff is said early, and the check stays linear and short


def phrases(listed: str) -> list[str]:
    found = [_fold(p) for p in listed.split("|")]
    return [p for p in found if p][:_MOST]


def says_it_hands_over(text: str, listed: list[str]) -> bool:
    said = _fold(text[:_LONGEST])
    return any(p in said for p in listed)


def _fold(text: str) -> str:
    return _SPACE.sub(" ", text.replace("\u2019", "'")).strip().lower()
