"""The decision in the middle of the loop: given a run and its steps (and ``now``), what happens next.

Pure: no I/O, no clock of its own. The worker carries the action out and records it as a step; the
next call sees that step. Its awkward cases are ordinary unit tests.

Order matters, and each rule says why:
0. a model call recorded as started but never reported back (a crash, or a lost lease, after it may have
   been paid) is closed first, at the estimate reserved for it: bookkeeping that buys nothing, so that
   every limit counts a call that may have been paid — even when the run is then cancelled;
1. cancelled wins over everything, even an answer that is ready (the person said stop);
2. a tool call recorded but never reported back is closed as interrupted, never re-run (tools run at
   most once: a ticket raised twice is worse than one that says it may not have been);
3. a finished model turn with text is said; one with neither text nor tool calls has nothing to add;
4. a model call the chain gave up on fails the run, with the provider's own words;
5. only then the limits, before anything else is bought or run: steps, money, time;
6. a requested tool runs; otherwise the model is called — with what is ``left`` of the budget, which its
   worst case must fit (the worker lowers ``max_tokens`` to fit, and ends the run out of money when even the
   call's input does not: ``engine/providers/worst.py``).

A run whose whole work is one tool call (``RunView.direct``: a command that names a tool, SPEC §3 — "runs a
tool directly") never calls the model: after rules 0-2 and the limits its call runs, and its result is what it
says.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from engine.core.limits import Limits
from engine.core.messages import (
    AnswerStep,
    Ending,
    EndingStep,
    ModelStartedStep,
    ModelStep,
    Step,
    ToolCall,
    ToolCallStep,
    ToolResultStep,
)


@dataclass(frozen=True)
class RunView:
    """What the decision needs from the run row."""

    id: int
    limits: Limits
    started_at: datetime
    cancel_requested: bool = False
    # A command that runs a tool directly: the one call the run makes, with the command's fields as its
    # arguments; no model is asked.
    direct: ToolCall | None = None


@dataclass(frozen=True)
class CallModel:
    pass


@dataclass(frozen=True)
class RunTool:
    call: ToolCall


@dataclass(frozen=True)
class CloseInterrupted:
    call: ToolCall


@dataclass(frozen=True)
class CloseModelCall:
    """A model call started and never reported back: record it as interrupted, at what it may have cost."""

    estimate_usd: float


@dataclass(frozen=True)
class Say:
    text: str


@dataclass(frozen=True)
class End:
    ending: Ending
    reason: str = ""


@dataclass(frozen=True)
class Finished:
    """The run already has its answer or ending recorded: nothing more to do."""


Action = CallModel | CloseModelCall | RunTool | CloseInterrupted | Say | End | Finished


def open_call(steps: list[Step]) -> ModelStartedStep | None:
    """The model call started last, when nothing it returned was recorded after it."""
    for step in reversed(steps):
        if isinstance(step, ModelStep):
            return None
        if isinstance(step, ModelStartedStep):
            return step
    return None


def spent(steps: list[Step]) -> float:
    """What the run's model calls cost, a call started and not (yet) reported back at its estimate."""
    started = open_call(steps)
    return sum(s.cost_usd for s in steps if isinstance(s, ModelStep)) + (started.estimate_usd if started else 0.0)


def left(run: RunView, steps: list[Step]) -> float:
    """What the run may still spend (USD): its budget less what its calls cost (an open one at its estimate).
    The next call's worst case must fit in it."""
    return max(0.0, run.limits.spend - spent(steps))


def counted_steps(steps: list[Step]) -> int:
    """Steps that count against ``limits.steps``: model calls that answered, and tool calls. A call a crash
    interrupted counts against the money (at its estimate), not the steps: crashes are bounded by the run's
    ``max_attempts``, and the run did not take that step."""
    return sum(
        1 for s in steps
        if (isinstance(s, ModelStep) and s.error is None) or isinstance(s, ToolCallStep)
    )


def decide(run: RunView, steps: list[Step], now: datetime) -> Action:
    if any(isinstance(s, AnswerStep | EndingStep) for s in steps):
        return Finished()
    started = open_call(steps)
    if started is not None:
        return CloseModelCall(started.estimate_usd)
    if run.cancel_requested:
        return End("cancelled")

    results = {s.call_id for s in steps if isinstance(s, ToolResultStep)}
    recorded = [s.call for s in steps if isinstance(s, ToolCallStep)]
    for call in recorded:
        if call.id not in results:
            return CloseInterrupted(call)

    if run.direct is not None:
        return _direct(run, run.direct, steps, now)

    last_model = next((s for s in reversed(steps) if isinstance(s, ModelStep)), None)
    if last_model is not None and last_model.error is not None and last_model.gave_up:
        return End("failed", last_model.error)

    pending: list[ToolCall] = []
    if last_model is not None and last_model.error is None:
        recorded_ids = {c.id for c in recorded}
        pending = [c for c in last_model.tool_calls if c.id not in recorded_ids]
        if not last_model.tool_calls and _last_is(steps, last_model):
            text = last_model.text.strip()
            return Say(text) if text else End("nothing_to_add")

    over = _over(run, steps, now)
    if over is not None:
        return over

    if pending:
        return RunTool(pending[0])
    return CallModel()


def _over(run: RunView, steps: list[Step], now: datetime) -> End | None:
    if counted_steps(steps) >= run.limits.steps:
        return End("out_of_steps")
    if spent(steps) >= run.limits.spend > 0 or (run.limits.spend == 0 and spent(steps) > 0):
        return End("out_of_money")
    if now - run.started_at >= timedelta(minutes=run.limits.minutes):
        return End("out_of_time")
    return None


def _direct(run: RunView, call: ToolCall, steps: list[Step], now: datetime) -> Action:
    """A tool command's run: its one call, then what the tool said is the answer (JSON shown as JSON)."""
    result = next((s for s in steps if isinstance(s, ToolResultStep) and s.call_id == call.id), None)
    if result is not None:
        return Say(shown(result.content)) if result.content.strip() else End("nothing_to_add")
    return _over(run, steps, now) or RunTool(call)


def shown(content: str) -> str:
    """A tool's result as a person reads it: structured data as a block of JSON, anything else as it is."""
    text = content.strip()
    if text[:1] in "{[":
        try:
            data = json.loads(text)
        except ValueError:
            return text
        return "```json\n" + json.dumps(data, indent=2, ensure_ascii=False) + "\n```"
    return text


def _last_is(steps: list[Step], step: Step) -> bool:
    return bool(steps) and steps[-1] is step
