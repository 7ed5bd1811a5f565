"""Turn-taking in a spoken conversation: a pure state machine (``listening → thinking → speaking``), for a
front end to drive and for our own tests. No I/O and no clock: every event carries its moment (``at``), and
``step`` returns the new state and what the front end must do (``Submit``, ``Cancel``, ``Speak``, ``Stop``).

Barge-in is not an error path. Speech from the person at any point — while it is thinking, while it is talking —
cancels what is being said, drops the answer being waited for (the run is cancelled through the door) and
returns the turn; an answer that arrives for a turn that was interrupted is thrown away, never spoken over.

An assistant must not answer itself. On speakers the microphone hears the reply, and the echo is loud — on a
laptop it clears any fixed threshold worth having. So the bar a person must clear while the assistant is audible
is learnt from the leak: whatever the microphone reads then is tracked as a slow envelope, and a person has to be
clearly over it (``RATIO`` times it, for ``HOLD_SECONDS``). A 0.35 leak settles the bar near 0.48 and a 0.55 leak
near 0.76, while on headphones the bar stays at its floor and a quiet word interrupts. The envelope learns slowly
from anything over the bar, so somebody talking over the top does not teach it that interruptions are normal.
A last line needs no microphone: a sentence that matches what the assistant just said is the assistant,
whatever any level claims. Typed words are never an echo.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from difflib import SequenceMatcher
from typing import Literal

from engine.core.chunk import pack, pieces

Phase = Literal["listening", "thinking", "speaking"]

# The bar's floor: with no leak (headphones, or nothing audible) a quiet word still interrupts.
FLOOR = 0.10
# How far over the leak's envelope a person must be: clearly over, not level with it.
RATIO = 1.38
# Over the bar for this long is a person (a click or a cough is not).
HOLD_SECONDS = 0.25
# The first moments of the assistant's voice in a session teach the envelope fast, and count for nothing else:
# until it has heard the room, any leak would be over the floor.
WARMUP_SECONDS = 0.6
TAU_WARMUP = 0.2
TAU_RISE = 0.5  # seconds: how fast the envelope follows a louder leak
TAU_FALL = 3.0  # …a quieter one (slow: the pauses between words are not the room going quiet)
TAU_OVER = 4.0  # …anything over the bar (a person talking over the top barely moves it)
# The longest gap between two level readings that is learnt from as one (a front end that paused).
MAX_STEP_SECONDS = 0.2
# How long after the assistant stops that what is heard may still be its own words (a recogniser lags).
ECHO_SECONDS = 2.0
# What the assistant said that the echo line remembers (characters, the newest kept).
SAID_CHARS = 2000
# How much of a heard sentence must match what was said for it to be the assistant's own.
ECHO_MATCH = 0.8


@dataclass(frozen=True)
class EchoBar:
    """The leak's envelope and how long it has listened to the assistant."""

    envelope: float = 0.0
    heard_seconds: float = 0.0

    @property
    def warm(self) -> bool:
        return self.heard_seconds >= WARMUP_SECONDS

    @property
    def bar(self) -> float:
        return max(FLOOR, self.envelope * RATIO)

    def learn(self, level: float, seconds: float) -> EchoBar:
        """The envelope after ``seconds`` of the microphone reading ``level`` while the assistant is audible."""
        if not self.warm:
            tau = TAU_WARMUP
        elif level > self.bar:
            tau = TAU_OVER
        elif level > self.envelope:
            tau = TAU_RISE
        else:
            tau = TAU_FALL
        moved = self.envelope + (level - self.envelope) * (1.0 - math.exp(-seconds / tau))
        return EchoBar(moved, self.heard_seconds + seconds)


# --- what happens -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Level:
    """The microphone's level (0-1, the echo-cancelled stream's envelope), read every few tens of ms."""

    level: float
    at: datetime


@dataclass(frozen=True)
class Heard:
    """The recogniser's words for a sentence the person finished."""

    text: str
    at: datetime


@dataclass(frozen=True)
class Typed:
    """Words typed instead of said: they go where a spoken sentence goes, and are never an echo."""

    text: str
    at: datetime


@dataclass(frozen=True)
class Answer:
    """Words of the answer to ``turn`` arrived (``final``: that is all of it)."""

    turn: int
    text: str
    at: datetime
    final: bool = True


@dataclass(frozen=True)
class Spoken:
    """The voice finished saying piece ``utterance``."""

    utterance: int
    at: datetime


Event = Level | Heard | Typed | Answer | Spoken


# --- what the front end does --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Submit:
    """Ask the door: a new turn (a new request; the previous one's stream is closed by ``Cancel``)."""

    turn: int
    text: str


@dataclass(frozen=True)
class Cancel:
    """Drop the answer to ``turn``: close its stream, which cancels its run."""

    turn: int


@dataclass(frozen=True)
class Speak:
    utterance: int
    text: str


@dataclass(frozen=True)
class Stop:
    """Stop saying ``utterance`` now."""

    utterance: int


Effect = Submit | Cancel | Speak | Stop


@dataclass(frozen=True)
class Conversation:
    phase: Phase = "listening"
    turn: int = 0  # the latest turn submitted
    utterance: int = 0  # the latest piece handed to the voice
    queue: tuple[str, ...] = ()  # pieces of the answer still to say
    playing: bool = False  # the voice is saying a piece now
    answered: bool = False  # the latest turn's answer is all in
    said: str = ""  # what the assistant said lately (the echo line)
    quiet_since: datetime | None = None  # when the assistant last stopped being audible
    echo: EchoBar = field(default_factory=EchoBar)
    level_at: datetime | None = None
    over_since: datetime | None = None


def step(state: Conversation, event: Event) -> tuple[Conversation, tuple[Effect, ...]]:
    """The conversation after ``event``, and what to do about it."""
    if isinstance(event, Level):
        return _level(state, event)
    if isinstance(event, Heard):
        if _is_echo(state, event.text, event.at):
            return state, ()  # the assistant hearing itself
        return _new_turn(state, event.text, event.at)
    if isinstance(event, Typed):
        return _new_turn(state, event.text, event.at)
    if isinstance(event, Answer):
        return _answer(state, event)
    return _spoken(state, event)


def _level(state: Conversation, event: Level) -> tuple[Conversation, tuple[Effect, ...]]:
    seconds = 0.0
    if state.level_at is not None:
        seconds = min(MAX_STEP_SECONDS, max(0.0, (event.at - state.level_at).total_seconds()))
    echo = state.echo
    if state.phase == "speaking":
        echo = echo.learn(event.level, seconds)
        # Until the envelope has heard the room, the leak could be anything: nothing is taken for a person.
        threshold = echo.bar if echo.warm else math.inf
    elif state.phase == "thinking":
        threshold = FLOOR  # nothing is audible: a quiet word is a person
    else:
        return replace(state, echo=echo, level_at=event.at, over_since=None), ()
    if event.level <= threshold:
        return replace(state, echo=echo, level_at=event.at, over_since=None), ()
    over_since = state.over_since or event.at
    state = replace(state, echo=echo, level_at=event.at, over_since=over_since)
    if event.at - over_since >= timedelta(seconds=HOLD_SECONDS):
        return _barge_in(state, event.at)
    return state, ()


def _barge_in(state: Conversation, at: datetime) -> tuple[Conversation, tuple[Effect, ...]]:
    """The person spoke: stop what is being said, drop the answer being waited for, return the turn."""
    effects: list[Effect] = []
    if state.phase == "speaking":
        effects.append(Stop(state.utterance))
    if state.phase in ("thinking", "speaking") and not state.answered:
        effects.append(Cancel(state.turn))
    quiet = at if state.phase == "speaking" else state.quiet_since
    return (replace(state, phase="listening", queue=(), answered=True, playing=False, over_since=None,
                    quiet_since=quiet), tuple(effects))


def _new_turn(state: Conversation, text: str, at: datetime) -> tuple[Conversation, tuple[Effect, ...]]:
    text = text.strip()
    if not text:
        return state, ()
    state, effects = _barge_in(state, at) if state.phase != "listening" else (state, ())
    turn = state.turn + 1
    return (replace(state, phase="thinking", turn=turn, queue=(), answered=False),
            (*effects, Submit(turn, text)))


def _answer(state: Conversation, event: Answer) -> tuple[Conversation, tuple[Effect, ...]]:
    if event.turn != state.turn or state.phase == "listening" or state.answered:
        return state, ()  # an answer to a turn that was interrupted is thrown away, never spoken over
    if state.phase == "thinking":
        said = pieces(event.text)
        if not said:
            return (replace(state, answered=event.final, phase="listening" if event.final else "thinking"), ())
        state = replace(state, phase="speaking", queue=tuple(said), answered=event.final)
        return _say_next(state)
    state = replace(state, queue=(*state.queue, *pack(event.text)), answered=event.final)
    if not state.playing and state.queue:
        return _say_next(state)  # it had said all it had: the new words go at once
    if not state.playing and state.answered:
        return replace(state, phase="listening", quiet_since=event.at), ()
    return state, ()


def _say_next(state: Conversation) -> tuple[Conversation, tuple[Effect, ...]]:
    utterance = state.utterance + 1
    piece = state.queue[0]
    return (replace(state, utterance=utterance, queue=state.queue[1:], playing=True, said=_remember(state.said, piece)),
            (Speak(utterance, piece),))


def _spoken(state: Conversation, event: Spoken) -> tuple[Conversation, tuple[Effect, ...]]:
    if event.utterance != state.utterance or state.phase != "speaking" or not state.playing:
        return state, ()
    if state.queue:
        return _say_next(state)
    if state.answered:
        return replace(state, phase="listening", playing=False, quiet_since=event.at, over_since=None), ()
    return replace(state, playing=False, quiet_since=event.at), ()  # more is coming


def _remember(said: str, piece: str) -> str:
    return f"{said} {piece}".strip()[-SAID_CHARS:]


_WORD = re.compile(r"[\w']+")


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _is_echo(state: Conversation, heard: str, at: datetime) -> bool:
    """Whether a heard sentence is the assistant's own voice: heard while it speaks (or just after), and made
    mostly of what it just said, in order. One word is not a sentence ("stop" is the person's)."""
    audible = state.phase == "speaking" or (
        state.quiet_since is not None and at - state.quiet_since <= timedelta(seconds=ECHO_SECONDS))
    words = _words(heard)
    if not audible or len(words) < 2 or not state.said:
        return False
    matcher = SequenceMatcher(None, words, _words(state.said), autojunk=False)
    matched = sum(block.size for block in matcher.get_matching_blocks())
    return matched / len(words) >= ECHO_MATCH
