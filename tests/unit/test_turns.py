"""Turn-taking as a pure state machine: listening → thinking → speaking, barge-in at any point, the echo bar
learnt from the leak (the seed's figures: a 0.35 leak settles the bar near 0.48, a 0.55 leak near 0.76, on
headphones it stays at its floor), and the assistant never answering its own voice. ``now`` is each event's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engine.core.turns import (
    FLOOR,
    Answer,
    Cancel,
    Conversation,
    EchoBar,
    Effect,
    Event,
    Heard,
    Level,
    Speak,
    Spoken,
    Stop,
    Submit,
    Typed,
    step,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TICK = timedelta(milliseconds=20)  # a level reading every 20 ms (50 a second)
ANSWER = "Sure, I can help. The museum opens at ten and closes at six. Tickets are twelve euro."


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def run(state: Conversation, *events: Event) -> tuple[Conversation, list[Effect]]:
    effects: list[Effect] = []
    for event in events:
        state, done = step(state, event)
        effects.extend(done)
    return state, effects


def levels(level: float, start: float, seconds: float) -> list[Level]:
    n = round(seconds / TICK.total_seconds())
    return [Level(level, at(start) + TICK * i) for i in range(n)]


def speaking(start: float = 0.0, *, final: bool = False) -> Conversation:
    """A conversation whose assistant has started saying its answer (still streaming in, unless ``final``)."""
    state, effects = run(Conversation(), Heard("When is the museum open?", at(start)),
                         Answer(1, ANSWER, at(start + 0.5), final=final))
    assert state.phase == "speaking" and effects[-1] == Speak(1, "Sure, I can help.")
    return state


# --- the turn ------------------------------------------------------------------------------------------------

def test_a_turn_goes_round_listening_thinking_speaking_listening() -> None:
    state, effects = run(Conversation(), Heard("When is the museum open?", at(0)))
    assert state.phase == "thinking" and effects == [Submit(1, "When is the museum open?")]
    state, effects = run(state, Answer(1, ANSWER, at(1)))
    # The first piece is cut for a fast first word; the rest is packed.
    assert state.phase == "speaking" and effects == [Speak(1, "Sure, I can help.")]
    state, effects = run(state, Spoken(1, at(2)))
    assert effects == [Speak(2, "The museum opens at ten and closes at six. Tickets are twelve euro.")]
    state, effects = run(state, Spoken(2, at(5)))
    assert state.phase == "listening" and effects == []


def test_an_answer_that_streams_in_is_said_as_it_comes() -> None:
    state, _ = run(Conversation(), Heard("Hello?", at(0)))
    state, effects = run(state, Answer(1, "Hello there.", at(1), final=False))
    assert effects == [Speak(1, "Hello there.")]
    state, effects = run(state, Spoken(1, at(2)))
    assert state.phase == "speaking" and effects == []  # more is coming
    state, effects = run(state, Answer(1, "How can I help?", at(2.1)))
    assert effects == [Speak(2, "How can I help?")]  # it had said all it had: at once
    state, effects = run(state, Spoken(1, at(2.2)))  # a stale report changes nothing
    assert effects == [] and state.phase == "speaking"
    state, effects = run(state, Spoken(2, at(3)))
    assert state.phase == "listening"


# --- barge-in ------------------------------------------------------------------------------------------------

def test_speech_while_it_thinks_drops_the_answer_being_waited_for() -> None:
    state, _ = run(Conversation(), Heard("Book me a table.", at(0)))
    state, effects = run(state, *levels(0.3, 0.5, 0.4))
    assert state.phase == "listening" and effects == [Cancel(1)]
    # The answer that arrives after it was interrupted is thrown away, never spoken over.
    state, effects = run(state, Answer(1, "Booked for eight.", at(2)))
    assert state.phase == "listening" and effects == []


def test_a_new_sentence_while_it_thinks_replaces_the_turn() -> None:
    state, _ = run(Conversation(), Heard("Book me a table.", at(0)))
    state, effects = run(state, Heard("Actually, for two people.", at(1)))
    assert effects == [Cancel(1), Submit(2, "Actually, for two people.")]
    state, effects = run(state, Answer(1, "Booked for one.", at(2)), Answer(2, "Booked for two.", at(3)))
    assert effects == [Speak(1, "Booked for two.")]


def test_speech_over_the_bar_while_it_talks_stops_it_and_returns_the_turn() -> None:
    state = speaking()
    state, effects = run(state, *levels(0.02, 1.0, 2.0))  # headphones: almost no leak
    assert effects == [] and state.echo.bar == FLOOR
    state, effects = run(state, *levels(0.2, 3.0, 0.4))  # a quiet word
    assert effects == [Stop(1), Cancel(1)]
    assert state.phase == "listening"


def test_a_click_is_not_a_person() -> None:
    state = speaking()
    state, _ = run(state, *levels(0.02, 1.0, 2.0))
    state, effects = run(state, *levels(0.9, 3.0, 0.1), *levels(0.02, 3.1, 1.0))
    assert effects == [] and state.phase == "speaking"


def test_a_barge_in_after_the_answer_is_all_in_cancels_nothing_at_the_door() -> None:
    state = speaking(final=True)  # the whole answer has arrived: its run is over
    state, effects = run(state, Typed("Stop, thanks.", at(1)))
    assert effects == [Stop(1), Submit(2, "Stop, thanks.")]


# --- the echo bar, learnt from the leak --------------------------------------------------------------------

@pytest.mark.parametrize(("leak", "bar"), [(0.35, 0.48), (0.55, 0.76), (0.02, FLOOR), (0.0, FLOOR)])
def test_the_bar_settles_over_the_leak(leak: float, bar: float) -> None:
    state = speaking()
    state, effects = run(state, *levels(leak, 1.0, 5.0))
    assert state.echo.bar == pytest.approx(bar, abs=0.01)
    assert effects == [] and state.phase == "speaking"  # the leak alone never interrupts


@pytest.mark.parametrize("leak", [0.35, 0.55, 0.8])
def test_the_leak_does_not_interrupt_even_while_the_bar_is_being_learnt(leak: float) -> None:
    state = speaking()
    state, effects = run(state, *levels(leak, 1.0, 0.3), *levels(leak * 0.6, 1.3, 0.2), *levels(leak, 1.5, 3.0))
    assert effects == []


def test_a_person_clearly_over_the_leak_interrupts_and_does_not_teach_it() -> None:
    state = speaking()
    state, _ = run(state, *levels(0.35, 1.0, 5.0))
    before = state.echo.bar
    state, effects = run(state, *levels(0.8, 6.0, 0.5))
    assert effects == [Stop(1), Cancel(1)]
    assert state.echo.bar < 0.55 and state.echo.bar - before < 0.05
    # Level with the leak is not clearly over it.
    state = speaking()
    state, _ = run(state, *levels(0.35, 1.0, 5.0))
    state, effects = run(state, *levels(0.42, 6.0, 1.0))
    assert effects == []


def test_the_bar_is_the_envelope_times_the_ratio_above_its_floor() -> None:
    assert EchoBar(0.0).bar == FLOOR
    assert EchoBar(0.5).bar == pytest.approx(0.69)


# --- the assistant's own voice -------------------------------------------------------------------------------

@pytest.mark.parametrize("heard", [
    "sure I can help",
    "the museum opens at ten and closes at six",  # a later piece, heard while it speaks
    "Sure, I can help. The museum opens",
])
def test_a_sentence_matching_what_it_just_said_is_the_assistant(heard: str) -> None:
    state = speaking()
    state, _ = run(state, Spoken(1, at(1)))  # the second piece is being said now
    state, effects = run(state, Heard(heard, at(1.5)))
    assert effects == [] and state.phase == "speaking"


def test_its_own_words_heard_just_after_it_stopped_are_still_its_own() -> None:
    state = speaking(final=True)
    state, _ = run(state, Spoken(1, at(1)), Spoken(2, at(4)))
    assert state.phase == "listening"
    state, effects = run(state, Heard("tickets are twelve euro", at(5)))
    assert effects == []
    state, effects = run(state, Heard("tickets are twelve euro", at(8)))  # long after: the person said it
    assert effects == [Submit(2, "tickets are twelve euro")]


def test_a_turn_whose_answer_is_empty_returns_the_turn() -> None:
    state, _ = run(Conversation(), Heard("Hm.", at(0)))
    state, effects = run(state, Answer(1, "", at(1)))
    assert state.phase == "listening" and effects == []


@pytest.mark.parametrize("heard", ["Stop", "No, I meant the other museum", "What about Sundays?"])
def test_what_it_did_not_say_is_the_person(heard: str) -> None:
    state = speaking()
    state, effects = run(state, Heard(heard, at(1)))
    assert effects == [Stop(1), Cancel(1), Submit(2, heard)]
    assert state.phase == "thinking"


def test_typed_words_are_never_an_echo() -> None:
    state = speaking()
    state, effects = run(state, Typed("Sure, I can help.", at(1)))
    assert effects == [Stop(1), Cancel(1), Submit(2, "Sure, I can help.")]
