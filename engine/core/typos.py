"""Which command a ``!word`` that is none was likely meant to be: close in spelling (an edit distance of at
most 2, counting a swap of neighbours as one) or the start of one. Rooms hold other bots with ``!`` commands
of their own (``!hookshot help``), so anything further off is nobody's typo and is left alone."""

from __future__ import annotations

from collections.abc import Iterable

MAX_DISTANCE = 2
LONGEST = 64  # a word longer than any command name plus the distance is nobody's typo of one


def distance(a: str, b: str) -> int:
    """The optimal-string-alignment distance: insertions, deletions, substitutions and swaps of neighbours."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                current[j] = min(current[j], previous2[j - 2] + 1)
        previous2, previous = previous, current
    return previous[len(b)]


def meant(given: str, names: Iterable[str]) -> str | None:
    """The name ``given`` was most likely meant to be, or None. Close means within ``MAX_DISTANCE`` edits
    (fewer than the word's own length, so a two-letter word is not a typo of every short name) or a start of
    the name at least two letters long. A name itself is no typo; the closest wins, ties alphabetically."""
    given = given.lower()
    if not given or len(given) > LONGEST:
        return None
    best: tuple[int, str] | None = None
    for name in names:
        if name == given:
            return None
        start = len(given) >= 2 and name.startswith(given)
        if not start and abs(len(name) - len(given)) > MAX_DISTANCE:
            continue  # more letters apart than edits allowed: not worth counting
        d = distance(given, name)
        close = start or d <= min(MAX_DISTANCE, len(given) - 1)
        if close and (best is None or (d, name) < best):
            best = (d, name)
    return best[1] if best is not None else None
