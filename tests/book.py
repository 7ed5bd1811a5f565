"""The tests' stand-in book (``engine.providers.mock.StandInModel``): what the stand-in model says, by what a run
was asked. The stand-in reads it at each model call; nothing a run carries chooses it.

Two ways in:

- ``BOOK.say(words, turns)``: a run whose opening ends with ``words`` (what was asked: a line's body, a desk
  message, a voice note's transcript, a command's prompt) is answered by ``turns``. The last said for the same
  words counts, and ``turns=None`` says "not scripted" (the stand-in's own answer): the tests' helpers say it for
  every line they send, so a line sent without a script never meets an earlier test's.
- ``told(words, turns)``: the words with the turns written into them, for a run a test inserts itself: the book
  reads the last such mark in the run's opening. It needs no shared state, so a ``summon worker`` process the
  tests fork reads it too.

A service the tests start reads the member bots' book (``appservice.stand_in``) after this one, as the demo does
(``SERVICE_BOOK``, in ``tests.matrix``): this module imports nothing of ``appservice``, so a surface proven to
know no Matrix (``tests/surfaces/seam.py``) can use it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from engine.clock import Clock
from engine.core.messages import ModelRequest
from engine.providers.base import Answerer
from engine.providers.mock import MockModel, StandIn, StandInModel, asked

Turns = Sequence[Mapping[str, Any]]
MARK, END = "⟦turns ", "⟧"
# Where a test writes a line's turns in the content it sends (``tests.matrix.people.Person.send``), which takes
# them off before the line is sent and says them to the book under the line's body: no line the service sees
# carries them.
SCRIPT_KEY = "org.summon.script"


def told(words: str, turns: Turns | None) -> str:
    """``words`` with ``turns`` written in (``words`` alone for None)."""
    return words if turns is None else f"{words} {MARK}{json.dumps(list(turns), ensure_ascii=False)}{END}"


def _told(request: ModelRequest) -> Turns | None:
    opening = asked(request)
    start = opening.rfind(MARK)
    if start < 0:
        return None
    end = opening.find(END, start)
    turns = json.loads(opening[start + len(MARK):end])
    assert isinstance(turns, list), turns
    return turns


class TestsBook:
    """The tests' book: ``told`` marks, then what was ``say``-d."""

    __test__ = False

    def __init__(self) -> None:
        self._said: list[tuple[str, bool, Turns | None]] = []

    def say(self, words: str, turns: Turns | None, *, anywhere: bool = False) -> None:
        """``anywhere``: the opening need only have ``words`` (a command's line, before the command's own words)."""
        self._said.append((words.strip(), anywhere, None if turns is None else list(turns)))

    def clear(self) -> None:
        self._said.clear()

    def __call__(self, request: ModelRequest) -> Turns | None:
        marked = _told(request)
        if marked is not None:
            return marked
        opening = asked(request).rstrip()
        for words, anywhere, turns in reversed(self._said):
            if words and (words in opening if anywhere else opening.endswith(words)):
                return turns
        return None


BOOK = TestsBook()


def stand_in(clock: Clock, *, reason: StandIn = "no_key", otherwise: Answerer | None = None) -> StandInModel:
    """The stand-in model with the tests' book, before ``otherwise`` (the stand-in's own answer by default)."""
    return StandInModel(BOOK, otherwise if otherwise is not None else MockModel(clock, reason=reason), clock)
