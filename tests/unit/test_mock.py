"""The stand-in model: stands in with its own words, replays its book's script turn by turn, never sleeps."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from engine.clock import FakeClock
from engine.core.messages import Message, ModelRequest, ModelStep, ToolCall
from engine.providers.mock import STANDING_IN, MockModel, StandInModel, asked, first_of, parse_script

REQUEST = ModelRequest(system="Be brief.", messages=(Message(role="user", text="Weather?"),))

SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"id": "c1", "name": "lookup", "arguments": {"q": "weather"}}, {"id": "c2", "name": "now"}],
     "cost_usd": 0.01, "tokens_in": 12, "tokens_out": 4},
    {"text": "It will rain."},
    {"error": "the provider is down"},
    {"error": "the request is too long", "error_class": "request"},
]


async def answer(script: list[dict[str, Any]] | None, turn: int, clock: FakeClock | None = None) -> list[ModelStep]:
    clock = clock or FakeClock()
    return await StandInModel(lambda _: script, MockModel(clock), clock).answer(REQUEST, turn=turn)


async def test_without_a_script_it_stands_in() -> None:
    steps = await answer(None, 0)
    assert steps == [ModelStep(text=STANDING_IN, provider="mock", model="mock")]
    assert "no provider key" in STANDING_IN


async def test_its_standing_in_words_can_be_given() -> None:
    steps = await MockModel(FakeClock(), standing_in="Stand-in.").answer(REQUEST, turn=3)
    assert [s.text for s in steps] == ["Stand-in."]


async def test_turn_n_answers_the_nth_call() -> None:
    first, second = await answer(SCRIPT, 0), await answer(SCRIPT, 1)
    assert len(first) == 1 and len(second) == 1
    assert first[0].tool_calls and not first[0].text
    assert second[0] == ModelStep(text="It will rain.", provider="mock", model="mock")


async def test_tool_calls_are_parsed() -> None:
    [step] = await answer(SCRIPT, 0)
    assert step.tool_calls == (ToolCall("c1", "lookup", {"q": "weather"}), ToolCall("c2", "now", {}))
    assert step.error is None and not step.gave_up
    assert (step.cost_usd, step.tokens_in, step.tokens_out) == (0.01, 12, 4)


@pytest.mark.parametrize(
    ("turn", "error", "error_class"),
    [(2, "the provider is down", "provider"), (3, "the request is too long", "request")],
    ids=["provider_by_default", "request"],
)
async def test_an_error_turn_gives_up(turn: int, error: str, error_class: str) -> None:
    [step] = await answer(SCRIPT, turn)
    assert step.error == error
    assert step.error_class == error_class
    assert step.gave_up is True
    assert step.text == "" and step.tool_calls == ()


@pytest.mark.parametrize("turn", [4, 5, 100])
async def test_beyond_the_script_it_has_nothing_to_add(turn: int) -> None:
    assert await answer(SCRIPT, turn) == [ModelStep(text="", provider="mock", model="mock")]


async def test_an_empty_script_has_nothing_to_add_rather_than_standing_in() -> None:
    [step] = await answer([], 0)
    assert step.text == ""


@pytest.mark.parametrize("turn", [0, 1], ids=["text_turn", "error_turn"])
async def test_delay_advances_the_fake_clock_instead_of_sleeping(turn: int) -> None:
    clock = FakeClock()
    start, mono = clock.now(), clock.monotonic()
    script = [{"text": "slow", "delay": 600}, {"error": "slow failure", "delay": 2.5}]
    wall = time.monotonic()
    [step] = await answer(script, turn, clock)
    assert time.monotonic() - wall < 5
    seconds = script[turn]["delay"]
    assert clock.now() - start == timedelta(seconds=seconds)
    assert clock.monotonic() - mono == seconds
    assert step.text == "slow" or step.error == "slow failure"


async def test_no_delay_leaves_the_clock_alone() -> None:
    clock = FakeClock()
    start = clock.now()
    await answer([{"text": "quick"}], 0, clock)
    assert clock.now() == start


def test_parse_script_accepts_every_documented_key() -> None:
    [turn] = parse_script([{"text": "t", "tool_calls": [], "error": None, "error_class": "provider", "delay": 1,
                            "cost_usd": 0.1, "tokens_in": 1, "tokens_out": 2}])
    assert (turn.text, turn.delay, turn.cost_usd) == ("t", 1, 0.1)


@pytest.mark.parametrize(
    "raw",
    [
        [{"txt": "typo"}],
        [{"tool_calls": [{"id": "c1", "name": "x", "args": {}}]}],
        [{"tool_calls": [{"name": "no id"}]}],
        [{"delay": -1}],
        [{"delay": 601}],
        [{"cost_usd": -0.5}],
        ["just a string"],
    ],
    ids=["unknown_turn_key", "unknown_call_key", "call_without_id", "negative_delay", "delay_too_long",
         "negative_cost", "turn_not_a_mapping"],
)
def test_parse_script_refuses_a_bad_turn(raw: Any) -> None:
    with pytest.raises(ValidationError):
        parse_script(raw)


def test_parse_script_names_the_unknown_key() -> None:
    with pytest.raises(ValidationError, match="txt"):
        parse_script([{"text": "ok"}, {"txt": "typo"}])


@pytest.mark.parametrize("raw", [{"text": "a turn, not a list"}, "text", None, 3], ids=["dict", "str", "none", "int"])
def test_parse_script_refuses_a_non_list(raw: Any) -> None:
    with pytest.raises(ValueError, match="a script is a list of turns"):
        parse_script(raw)


def test_parse_script_refuses_an_unknown_error_class() -> None:
    # The docstring allows "provider"|"request"; a typo must be refused when the script is handed in,
    # not silently turned into a provider failure (which a chain would answer by falling back).
    with pytest.raises(ValidationError):
        parse_script([{"error": "boom", "error_class": "requests"}])


async def test_a_bad_script_is_refused_when_answered() -> None:
    with pytest.raises(ValidationError):
        await answer([{"txt": "typo"}], 0)


class Otherwise:
    """What the stand-in stands in front of (a provider chain, say): it answers what the book has no turns for."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def estimate(self, request: ModelRequest, *, turn: int, allowance: float | None = None) -> float | None:
        return 0.5

    async def answer(self, request: ModelRequest, *, turn: int, allowance: float | None = None,
                     run_id: int | None = None, watch: object = None) -> list[ModelStep]:
        self.asked.append(asked(request))
        return [ModelStep(text="bought", provider="p", model="m")]


async def test_the_book_chooses_by_what_was_asked_and_anything_else_goes_on() -> None:
    chain = Otherwise()
    book = first_of(lambda r: [{"text": "scripted", "cost_usd": 0.02}] if asked(r) == "Weather?" else None,
                    lambda r: None)
    model = StandInModel(book, chain, FakeClock())
    assert [s.text for s in await model.answer(REQUEST, turn=0)] == ["scripted"]
    assert model.estimate(REQUEST, turn=0, allowance=0.01) == 0.02  # a script costs what it says, never bought
    other = ModelRequest(system="", messages=(Message(role="user", text="Other?"),))
    assert [s.text for s in await model.answer(other, turn=0)] == ["bought"]
    assert model.estimate(other, turn=0) == 0.5
    assert chain.asked == ["Other?"]


def test_what_was_asked_is_the_first_user_turn_every_call_of_a_run_begins_with() -> None:
    later = ModelRequest(system="s", messages=(Message(role="user", text="opening"), Message(role="assistant", text="a"),
                                               Message(role="user", text="said since")))
    assert asked(later) == "opening"
    assert asked(ModelRequest(system="s", messages=())) == ""
