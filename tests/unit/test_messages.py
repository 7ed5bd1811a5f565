"""Steps survive the jsonb column unchanged, and the conversation is derived from them in order."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from engine.core.messages import (
    ENDINGS,
    AnswerStep,
    EndingStep,
    Message,
    ModelStep,
    Step,
    ToolCall,
    ToolCallStep,
    ToolResultStep,
    conversation,
    dump_step,
    load_step,
)

LOOKUP = ToolCall("c1", "lookup", {"q": "weather", "days": 2, "nested": {"a": [1, 2]}})

EVERY_KIND: list[tuple[str, Step]] = [
    ("model_text", ModelStep(text="hello", provider="openai", model="gpt", tokens_in=10, tokens_out=3,
                             cost_usd=0.002)),
    ("model_tools", ModelStep(tool_calls=(LOOKUP, ToolCall("c2", "noargs")), provider="anthropic",
                              fallback=True)),
    ("model_failed", ModelStep(provider="openai", error="429 too many", error_class="provider")),
    ("model_gave_up", ModelStep(provider="openai", error="bad request", error_class="request", gave_up=True)),
    ("tool_call", ToolCallStep(LOOKUP)),
    ("tool_result", ToolResultStep("c1", "14°C, rain")),
    ("tool_result_interrupted", ToolResultStep("c1", "interrupted", is_error=True, interrupted=True)),
    ("answer", AnswerStep("It will rain. ☔")),
    *[(f"ending_{e}", EndingStep(e, reason="why")) for e in ENDINGS],
]


@pytest.mark.parametrize("step", [s for _, s in EVERY_KIND], ids=[i for i, _ in EVERY_KIND])
def test_round_trip(step: Step) -> None:
    dumped = dump_step(step)
    assert dumped["kind"] == step.kind
    assert json.loads(json.dumps(dumped)) == dumped  # plain JSON data, ready for the jsonb column
    loaded = load_step(dumped)
    assert type(loaded) is type(step)
    assert loaded == step
    assert load_step(json.dumps(dumped)) == step
    assert load_step(json.dumps(dumped).encode()) == step


def test_every_step_kind_is_covered() -> None:
    kinds = {s.kind for _, s in EVERY_KIND}
    assert kinds == {"model", "tool_call", "tool_result", "answer", "ending"}


def test_tool_calls_load_as_a_tuple_of_tool_calls() -> None:
    loaded = load_step(dump_step(ModelStep(tool_calls=(LOOKUP,))))
    assert isinstance(loaded, ModelStep)
    assert loaded.tool_calls == (LOOKUP,)
    assert isinstance(loaded.tool_calls, tuple)
    assert isinstance(loaded.tool_calls[0], ToolCall)


@pytest.mark.parametrize(
    "payload",
    [
        {"kind": "nonsense"},
        {"text": "no kind"},
        {"kind": "ending", "ending": "bored"},
        {"kind": "answer"},
        {"kind": "model", "error_class": "cosmic_rays"},
    ],
    ids=["unknown_kind", "no_kind", "unknown_ending", "answer_without_text", "unknown_error_class"],
)
def test_load_refuses_what_is_not_a_step(payload: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        load_step(payload)


OPENING = (Message(role="user", text="What is the weather?"),)


def test_conversation_of_no_steps_is_the_opening() -> None:
    assert conversation(OPENING, []) == OPENING


def test_conversation_order_skips_failed_calls_and_keeps_tool_results() -> None:
    steps: list[Step] = [
        ModelStep(provider="a", error="503", error_class="provider"),
        ModelStep(text="Let me look.", tool_calls=(LOOKUP,), provider="b", fallback=True),
        ToolCallStep(LOOKUP),
        ToolResultStep("c1", "14°C, rain"),
        ModelStep(tool_calls=(ToolCall("c2", "search"),)),
        ToolCallStep(ToolCall("c2", "search")),
        ToolResultStep("c2", "interrupted", is_error=True, interrupted=True),
        ModelStep(provider="a", error="bad", error_class="request", gave_up=True),
        ModelStep(text="It will rain."),
        AnswerStep("It will rain."),
        EndingStep("cancelled"),
    ]
    assert conversation(OPENING, steps) == (
        OPENING[0],
        Message(role="assistant", text="Let me look.", tool_calls=(LOOKUP,)),
        Message(role="tool", text="14°C, rain", call_id="c1"),
        Message(role="assistant", tool_calls=(ToolCall("c2", "search"),)),
        Message(role="tool", text="interrupted", call_id="c2", is_error=True),
        Message(role="assistant", text="It will rain."),
    )


def test_conversation_keeps_a_multi_message_opening_first() -> None:
    opening = (Message(role="user", text="a"), Message(role="assistant", text="b"), Message(role="user", text="c"))
    out = conversation(opening, [ModelStep(text="d")])
    assert [m.text for m in out] == ["a", "b", "c", "d"]
    assert out[-1].role == "assistant"


def test_a_withheld_tools_arguments_are_stored_without_the_charter() -> None:
    from engine.core.messages import WITHHELD, ModelStep, ToolCall, ToolCallStep, withheld

    made = ToolCall("c1", "create_bot", {"name": "News", "prompt": "secret task", "sources": ["rte.ie"]})
    changed = ToolCall("c2", "create_bot", {"bot_id": "mb_1", "prompt": "another task"})
    other = ToolCall("c3", "search_site", {"query": "refunds"})
    step = withheld(ModelStep(text="", tool_calls=(made, changed, other)), frozenset({"create_bot"}))
    assert isinstance(step, ModelStep)
    assert [set(c.arguments) for c in step.tool_calls] == [{WITHHELD}, {"bot_id", WITHHELD}, {"query"}]
    assert "secret" not in repr(step) and "another" not in repr(step) and step.tool_calls[2] == other
    call = withheld(ToolCallStep(made), frozenset({"create_bot"}))
    assert isinstance(call, ToolCallStep) and "secret" not in repr(call) and call.call.id == "c1"
    assert withheld(ToolCallStep(other), frozenset({"create_bot"})) == ToolCallStep(other)
