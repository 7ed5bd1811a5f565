"""Steps and messages: small tagged dataclasses, and one TypeAdapter as the only (de)serialiser for
the ``agent_steps.payload`` jsonb column.

A run's steps are its whole history: every model call (recorded as started, with what it may cost,
*before* it is made; then what came back, with the provider that answered, tokens and cost), every tool
call (recorded *before* it runs) and its result, the saying of the answer, or the ending. The model's message list is derived from them (``conversation``), so a run resumed on another
worker knows everything the first one did.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

# The ways a run ends without an answer. Their words are strings (### endings), never in the engine.
Ending = Literal["cancelled", "out_of_money", "out_of_steps", "out_of_time", "nothing_to_add", "failed"]
ENDINGS: tuple[Ending, ...] = (
    "cancelled", "out_of_money", "out_of_steps", "out_of_time", "nothing_to_add", "failed",
)


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelStep:
    """One model call: what came back, who answered, what it cost. ``error`` set = the call failed."""

    kind: Literal["model"] = "model"
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    provider: str = ""
    model: str = ""
    fallback: bool = False
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    error: str | None = None
    # "provider": the provider's own failure (the chain may try the next); "request": the request's
    # fault (the run fails). Only meaningful with ``error``.
    error_class: Literal["provider", "request"] | None = None
    # True on the attempt after which the chain gave up (the request's fault, or no provider left):
    # the run fails with this step's words. A failed attempt without it was followed by another.
    gave_up: bool = False
    # True when no price was known for (provider, model): ``cost_usd`` is 0 because nobody knows the
    # price, not because the call was free. Only a call with no spend limit is ever made so (issue 19).
    unpriced: bool = False
    # The failure's class (``classify``: no_credit, rate_limited, unreachable, …), with ``error``.
    reason: str | None = None
    # True when this closes a call that was started (``ModelStartedStep``) and never reported back — a
    # crash or a lost lease after it may have been paid: ``cost_usd`` is the estimate reserved for it.
    interrupted: bool = False


@dataclass(frozen=True)
class ModelStartedStep:
    """A model call about to be made, recorded (fenced, and only when not cancelled) before it is, with the
    most it may cost: a call paid for whose answer was never recorded is still counted, at this estimate,
    by the run's own spend limit, the person's ceilings and the deployment's cap — and never silently
    paid for again."""

    estimate_usd: float = 0.0
    kind: Literal["model_started"] = "model_started"


@dataclass(frozen=True)
class ToolCallStep:
    """A tool call the model asked for, recorded before it runs (and only run if not cancelled)."""

    call: ToolCall
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True)
class ToolResultStep:
    call_id: str
    content: str
    is_error: bool = False
    # True when the worker recorded this for a call that never reported back (crash, cancel):
    # tools run at most once, and the history stays valid for either provider.
    interrupted: bool = False
    kind: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True)
class AnswerStep:
    text: str
    kind: Literal["answer"] = "answer"


@dataclass(frozen=True)
class EndingStep:
    ending: Ending
    reason: str = ""
    kind: Literal["ending"] = "ending"


@dataclass(frozen=True)
class HeardStep:
    """Words the asker added while the run worked (a second mention joins the live run): ``text`` is
    what the model is shown, ``count`` how many of the context's ``later`` lines it brings in. An answer
    not yet said when they arrive is a draft: the model is asked again with everything."""

    text: str
    count: int
    kind: Literal["heard"] = "heard"


@dataclass(frozen=True)
class UndeliveredStep:
    """The run's answer (or ending) could not be delivered where it was asked: the surface refused it for good, or
    gave up after retrying. Recorded by the delivery, after the run ended, with the surface's own reason — so
    "why didn't it answer?" has an answer on the run itself."""

    reason: str
    kind: Literal["undelivered"] = "undelivered"


Step = Annotated[
    ModelStep | ModelStartedStep | ToolCallStep | ToolResultStep | AnswerStep | EndingStep | HeardStep
    | UndeliveredStep,
    Field(discriminator="kind"),
]
STEP = TypeAdapter[Step](Step)


def dump_step(step: Step) -> dict[str, Any]:
    """The step as plain JSON data, for the jsonb column."""
    data: dict[str, Any] = STEP.dump_python(step, mode="json")
    return data


# What a withheld tool call's arguments are stored as (``withheld``).
WITHHELD = "withheld"


def withheld(step: Step, names: frozenset[str], *, kept: frozenset[str] = frozenset({"bot_id"})) -> Step:
    """``step`` as it is stored when the tools in ``names`` take what must not be stored as given (a member
    bot's charter, which is sealed): their calls keep only the ``kept`` arguments and a marker. The run that
    made the call still has it whole in memory, and a call recorded but never reported back is never run again
    (it is closed as interrupted), so nothing needs the arguments back from the row."""

    def scrubbed(call: ToolCall) -> ToolCall:
        if call.name not in names:
            return call
        return ToolCall(call.id, call.name, {**{k: v for k, v in call.arguments.items() if k in kept},
                                             WITHHELD: "sealed with what it made; not stored"})

    if isinstance(step, ModelStep) and any(call.name in names for call in step.tool_calls):
        return replace(step, tool_calls=tuple(scrubbed(call) for call in step.tool_calls))
    if isinstance(step, ToolCallStep) and step.call.name in names:
        return ToolCallStep(scrubbed(step.call))
    return step


def load_step(payload: str | bytes | dict[str, Any]) -> Step:
    if isinstance(payload, dict):
        return STEP.validate_python(payload)
    return STEP.validate_json(payload)


# --- the model's view -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Message:
    """One message in the provider-neutral conversation the providers translate from."""

    role: Literal["user", "assistant", "tool"]
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    call_id: str | None = None  # for role="tool"
    is_error: bool = False


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model is offered it: its name, what it is for, and a JSON Schema of its arguments."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True)
class ModelRequest:
    system: str
    messages: tuple[Message, ...]
    model: str | dict[str, str] | None = None
    max_tokens: int = 4096
    tools: tuple[ToolSpec, ...] = ()


def conversation(opening: tuple[Message, ...], steps: list[Step]) -> tuple[Message, ...]:
    """The message list for the next model call: the opening (context + what was asked), then every
    successful model turn and tool result, in order."""
    out = list(opening)
    for n, step in enumerate(steps):
        if isinstance(step, ModelStep) and step.error is None:
            if not step.tool_calls and n + 1 < len(steps) and isinstance(steps[n + 1], HeardStep):
                continue  # a draft answer the asker's later words overtook: asked again with everything
            out.append(Message(role="assistant", text=step.text, tool_calls=step.tool_calls))
        elif isinstance(step, ToolResultStep):
            out.append(Message(role="tool", text=step.content, call_id=step.call_id, is_error=step.is_error))
        elif isinstance(step, HeardStep):
            out.append(Message(role="user", text=step.text))
    return tuple(out)


def heard(steps: list[Step]) -> int:
    """How many of the context's ``later`` lines the run's steps have brought in."""
    return sum(s.count for s in steps if isinstance(s, HeardStep))


# About four characters a token: the same rough measure the surfaces budget a context by.
CHARS_PER_TOKEN = 4
