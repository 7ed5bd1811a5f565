"""loop.decide: given a run, its steps and now, the one action that comes next. Pure, so a table."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from engine.core.loop import (
    Action,
    CallModel,
    CloseInterrupted,
    CloseModelCall,
    End,
    Finished,
    Limits,
    RunTool,
    RunView,
    Say,
    counted_steps,
    decide,
    spent,
)
from engine.core.messages import (
    AnswerStep,
    EndingStep,
    ModelStartedStep,
    ModelStep,
    Step,
    ToolCall,
    ToolCallStep,
    ToolResultStep,
)

STARTED = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
NOW = STARTED + timedelta(minutes=1)
ROOMY = Limits(steps=10, spend=1.0, minutes=5)

LOOKUP = ToolCall("c1", "lookup", {"q": "weather"})
SEARCH = ToolCall("c2", "search", {"q": "rain"})


def run(limits: Limits = ROOMY, *, cancel: bool = False) -> RunView:
    return RunView(id=1, limits=limits, started_at=STARTED, cancel_requested=cancel)


def asks(*calls: ToolCall, text: str = "", cost: float = 0.0) -> ModelStep:
    return ModelStep(text=text, tool_calls=calls, provider="mock", model="mock", cost_usd=cost)


def said(text: str, cost: float = 0.0) -> ModelStep:
    return ModelStep(text=text, provider="mock", model="mock", cost_usd=cost)


def ran(call: ToolCall, content: str = "ok") -> list[Step]:
    return [ToolCallStep(call), ToolResultStep(call.id, content)]


FAILED_GAVE_UP = ModelStep(provider="p", error="the request was refused", error_class="request", gave_up=True)
FAILED_RETRYING = ModelStep(provider="p", error="503 from upstream", error_class="provider")
# How the worker closes a call that was started and never reported back: at its estimate.
INTERRUPTED_CALL = ModelStep(error="interrupted", error_class="provider", cost_usd=0.02, interrupted=True)

CASES: list[tuple[str, RunView, list[Step], datetime, Action]] = [
    ("fresh run calls the model", run(), [], NOW, CallModel()),
    ("model text is said", run(), [said("It will rain.")], NOW, Say("It will rain.")),
    ("said text is stripped", run(), [said("  It will rain.\n")], NOW, Say("It will rain.")),
    ("empty text, no tools: nothing to add", run(), [said("")], NOW, End("nothing_to_add")),
    ("whitespace only: nothing to add", run(), [said(" \n\t")], NOW, End("nothing_to_add")),
    ("tool requested runs", run(), [asks(LOOKUP)], NOW, RunTool(LOOKUP)),
    ("tool requested with text still runs the tool", run(), [asks(LOOKUP, text="Let me look.")], NOW,
     RunTool(LOOKUP)),
    ("recorded call without result is closed", run(), [asks(LOOKUP), ToolCallStep(LOOKUP)], NOW,
     CloseInterrupted(LOOKUP)),
    ("tool call and result: call the model", run(), [asks(LOOKUP), *ran(LOOKUP)], NOW, CallModel()),
    ("interrupted result also counts as a result", run(),
     [asks(LOOKUP), ToolCallStep(LOOKUP), ToolResultStep("c1", "gone", is_error=True, interrupted=True)],
     NOW, CallModel()),
    ("cancel on a fresh run", run(cancel=True), [], NOW, End("cancelled")),
    ("cancel wins over an answer that is ready", run(cancel=True), [said("It will rain.")], NOW,
     End("cancelled")),
    ("cancel wins over an interrupted tool call", run(cancel=True), [asks(LOOKUP), ToolCallStep(LOOKUP)],
     NOW, End("cancelled")),
    ("answer recorded: finished", run(), [said("x"), AnswerStep("x")], NOW, Finished()),
    ("ending recorded: finished", run(), [EndingStep("out_of_time")], NOW, Finished()),
    ("finished even when cancel was asked after", run(cancel=True), [said("x"), AnswerStep("x")], NOW,
     Finished()),
    ("out of steps", run(Limits(steps=2, spend=1.0, minutes=5)), [asks(LOOKUP), *ran(LOOKUP)], NOW,
     End("out_of_steps")),
    ("out of steps before a pending tool runs", run(Limits(steps=1, spend=1.0, minutes=5)), [asks(LOOKUP)],
     NOW, End("out_of_steps")),
    ("one step left: keep going", run(Limits(steps=3, spend=1.0, minutes=5)), [asks(LOOKUP), *ran(LOOKUP)],
     NOW, CallModel()),
    ("zero steps allowed", run(Limits(steps=0, spend=1.0, minutes=5)), [], NOW, End("out_of_steps")),
    ("spend reached exactly", run(Limits(steps=10, spend=0.5, minutes=5)),
     [asks(LOOKUP, cost=0.5), *ran(LOOKUP)], NOW, End("out_of_money")),
    ("spend exceeded", run(Limits(steps=10, spend=0.5, minutes=5)),
     [asks(LOOKUP, cost=0.3), *ran(LOOKUP), asks(SEARCH, cost=0.3), *ran(SEARCH)], NOW, End("out_of_money")),
    ("spend under the limit", run(Limits(steps=10, spend=0.5, minutes=5)),
     [asks(LOOKUP, cost=0.49), *ran(LOOKUP)], NOW, CallModel()),
    ("zero budget, nothing spent: free model may run", run(Limits(steps=10, spend=0, minutes=5)), [], NOW,
     CallModel()),
    ("zero budget, something spent", run(Limits(steps=10, spend=0, minutes=5)),
     [asks(LOOKUP, cost=0.01), *ran(LOOKUP)], NOW, End("out_of_money")),
    ("out of time exactly", run(), [], STARTED + timedelta(minutes=5), End("out_of_time")),
    ("out of time, later", run(), [asks(LOOKUP), *ran(LOOKUP)], STARTED + timedelta(hours=1),
     End("out_of_time")),
    ("just inside the time", run(), [], STARTED + timedelta(minutes=5) - timedelta(seconds=1), CallModel()),
    ("model gave up: failed with its words", run(), [FAILED_GAVE_UP], NOW,
     End("failed", "the request was refused")),
    ("gave up after a tool round", run(), [asks(LOOKUP), *ran(LOOKUP), FAILED_GAVE_UP], NOW,
     End("failed", "the request was refused")),
    ("failed without giving up: call again", run(), [FAILED_RETRYING], NOW, CallModel()),
    ("failed without giving up after a tool: call again", run(), [asks(LOOKUP), *ran(LOOKUP), FAILED_RETRYING],
     NOW, CallModel()),
    ("failure then success: the success is said", run(), [FAILED_RETRYING, said("Sunny.")], NOW, Say("Sunny.")),
    ("two calls: first runs first", run(), [asks(LOOKUP, SEARCH)], NOW, RunTool(LOOKUP)),
    ("two calls: second after the first's result", run(), [asks(LOOKUP, SEARCH), *ran(LOOKUP)], NOW,
     RunTool(SEARCH)),
    ("two calls: both done, call the model", run(), [asks(LOOKUP, SEARCH), *ran(LOOKUP), *ran(SEARCH)], NOW,
     CallModel()),
    ("two calls: second recorded without result is closed", run(),
     [asks(LOOKUP, SEARCH), *ran(LOOKUP), ToolCallStep(SEARCH)], NOW, CloseInterrupted(SEARCH)),
    ("answer said although steps ran out", run(Limits(steps=1, spend=1.0, minutes=5)), [said("Done.")], NOW,
     Say("Done.")),
    ("answer said although money ran out", run(Limits(steps=10, spend=0.1, minutes=5)),
     [said("Done.", cost=0.5)], NOW, Say("Done.")),
    ("answer said although time ran out", run(), [said("Done.")], STARTED + timedelta(hours=2), Say("Done.")),
    ("answer said although every limit ran out", run(Limits(steps=0, spend=0, minutes=0)),
     [said("Done.", cost=9.0)], STARTED + timedelta(days=1), Say("Done.")),
    ("nothing to add although limits ran out", run(Limits(steps=0, spend=0, minutes=0)), [said("")],
     STARTED + timedelta(days=1), End("nothing_to_add")),
    # A model call is recorded as started (with what it may cost) before it is made.
    ("a started call that answered is not open", run(), [ModelStartedStep(0.02), said("Sunny.")], NOW,
     Say("Sunny.")),
    ("a started call never answered is closed at its estimate", run(), [ModelStartedStep(0.02)], NOW,
     CloseModelCall(0.02)),
    ("after a tool round too", run(), [ModelStartedStep(0.01), asks(LOOKUP), *ran(LOOKUP), ModelStartedStep(0.03)],
     NOW, CloseModelCall(0.03)),
    ("closed before the cancel, so the cancel's settlement counts it", run(cancel=True), [ModelStartedStep(0.02)],
     NOW, CloseModelCall(0.02)),
    ("closed even past every limit (bookkeeping buys nothing)", run(Limits(steps=0, spend=0, minutes=0)),
     [ModelStartedStep(0.02)], STARTED + timedelta(days=1), CloseModelCall(0.02)),
    ("an interrupted call closed: call the model again", run(), [ModelStartedStep(0.02), INTERRUPTED_CALL], NOW,
     CallModel()),
    ("an interrupted call counts against the money", run(Limits(steps=10, spend=0.02, minutes=5)),
     [ModelStartedStep(0.02), INTERRUPTED_CALL], NOW, End("out_of_money")),
    ("an interrupted call is not a step the run took", run(Limits(steps=1, spend=1.0, minutes=5)),
     [ModelStartedStep(0.02), INTERRUPTED_CALL], NOW, CallModel()),
    ("a failed attempt after a start closes it", run(), [ModelStartedStep(0.02), FAILED_GAVE_UP], NOW,
     End("failed", "the request was refused")),
]


@pytest.mark.parametrize(("view", "steps", "now", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_decide(view: RunView, steps: list[Step], now: datetime, expected: Action) -> None:
    assert decide(view, steps, now) == expected


def test_decide_does_not_touch_the_steps() -> None:
    steps: list[Step] = [asks(LOOKUP, SEARCH), *ran(LOOKUP)]
    before = list(steps)
    decide(run(), steps, NOW)
    assert steps == before


def test_a_run_played_out_step_by_step() -> None:
    """Carry out each action the way the worker does, and see the whole path a two-tool run takes."""
    model_turns = iter([asks(LOOKUP, SEARCH, cost=0.01), said("Rain at noon.", cost=0.01)])
    steps: list[Step] = []
    path: list[str] = []
    for _ in range(10):
        action = decide(run(), steps, NOW)
        path.append(type(action).__name__)
        if isinstance(action, CallModel):
            steps.append(next(model_turns))
        elif isinstance(action, RunTool):
            steps.extend(ran(action.call))
        elif isinstance(action, Say):
            steps.append(AnswerStep(action.text))
        else:
            break
    assert path == ["CallModel", "RunTool", "RunTool", "CallModel", "Say", "Finished"]
    assert steps[-1] == AnswerStep("Rain at noon.")


def test_counted_steps_counts_answered_model_calls_and_tool_calls_only() -> None:
    steps: list[Step] = [
        FAILED_RETRYING,
        asks(LOOKUP),
        *ran(LOOKUP),  # the call counts, its result does not
        said("x"),
        AnswerStep("x"),
    ]
    assert counted_steps(steps) == 3


def test_spent_sums_model_costs() -> None:
    steps: list[Step] = [asks(LOOKUP, cost=0.25), *ran(LOOKUP), said("x", cost=0.5)]
    assert spent(steps) == pytest.approx(0.75)
    assert spent([]) == 0


def test_words_heard_after_a_draft_answer_ask_the_model_again_within_the_limits() -> None:
    from engine.core.loop import CallModel, End
    from engine.core.messages import HeardStep

    steps: list[Step] = [said("The Air."), HeardStep("Alice: and under 1000?", 1)]
    assert decide(run(), steps, NOW) == CallModel()
    assert decide(run(Limits(steps=1, spend=1.0, minutes=10)), steps, NOW) == End("out_of_steps")
    assert decide(run(cancel=True), steps, NOW) == End("cancelled")


def test_spent_counts_a_started_call_at_its_estimate_until_it_reports_back() -> None:
    assert spent([ModelStartedStep(0.1)]) == pytest.approx(0.1)
    assert spent([ModelStartedStep(0.1), said("x", cost=0.03)]) == pytest.approx(0.03)  # the real cost, once
    assert spent([ModelStartedStep(0.1), INTERRUPTED_CALL, ModelStartedStep(0.1)]) == pytest.approx(0.12)
    assert counted_steps([ModelStartedStep(0.1), INTERRUPTED_CALL, ModelStartedStep(0.1), said("x")]) == 1


def test_a_tool_commands_run_calls_its_tool_then_says_what_it_returned_and_asks_no_model() -> None:
    from engine.core.loop import shown

    call = ToolCall("command", "search_site", {"query": "refunds"})
    view = replace(run(), direct=call)
    assert decide(view, [], NOW) == RunTool(call)
    ran = [ToolCallStep(call), ToolResultStep("command", '{"found": ["Refunds take 14 days."]}')]
    said = decide(view, ran, NOW)
    assert isinstance(said, Say) and said.text == shown(ran[1].content) and said.text.startswith("```json")
    assert decide(view, [ToolCallStep(call), ToolResultStep("command", "  ")], NOW) == End("nothing_to_add")
    assert decide(view, [ToolCallStep(call)], NOW) == CloseInterrupted(call)  # never run twice
    assert decide(replace(view, cancel_requested=True), [], NOW) == End("cancelled")
