"""The stand-in model: its own answer, said when nothing may be bought, and the scripted answerer.

``StandInModel`` is an ``Answerer`` chosen at the root (as pydantic-ai's ``FunctionModel`` is), only by the tests
and the demo (``summon dev``), never by ``summon serve``: it is handed a script book, which reads each model
call's request (what was asked, the tools offered) and gives the turns that run is answered by, or None — and
then the answerer it stands in front of answers. A scripted run is never bought, whatever keys exist. Nothing a
run carries chooses a script: a room event, a desk message or a run row cannot make the stand-in call a tool.

A script is a list of turns, each ``{"text": …}``, ``{"tool_calls": [{"id", "name", "arguments"}]}``,
``{"error": "…", "error_class": "provider"|"request"}`` and optionally ``"delay": seconds`` (and ``"echo":
true``: the text says what the last tool result said). Turn *n* answers the run's *n*-th model call; past the
end of the script the model has nothing to add.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.clock import Clock
from engine.core.messages import ModelRequest, ModelStep, ToolCall
from engine.providers.base import STOPPED, Answerer, Watch

# What the mock says when it stands in for a provider because none is configured. (The words a run
# ends with are strings; this is the mock's own answer, and says plainly what it is.)
STANDING_IN = (
    "I'm summon's stand-in model: no provider key is configured, so nothing was sent to a real model. "
    "An operator can add one (see the README) and switch it on with AGENTS_LIVE=1."
)
# Why the mock is there (the provider layer decides): the operator chose it (SUMMON_AGENT_MOCK=1: the demo,
# the tests) — the only case in which bots answer through it —, or there is no key at all, or a key that
# buying has not been switched on for (AGENTS_LIVE unset). In the last two no bot is offered anywhere (no
# provider, no bots); the mock still answers a run that was queued before, and says why.
NO_KEY = STANDING_IN
NOT_SWITCHED_ON = (
    "I'm summon's stand-in model: a provider key is configured, but buying is not switched on, so "
    "nothing was sent to a real model. An operator can switch it on with AGENTS_LIVE=1."
)
CHOSEN = (
    "I'm summon's stand-in model, standing in for a real one because the operator chose it "
    "(SUMMON_AGENT_MOCK=1): nothing was sent to a real model."
)
StandIn = Literal["chosen", "no_key", "not_switched_on"]
STANDING_IN_FOR: dict[StandIn, str] = {"chosen": CHOSEN, "no_key": NO_KEY, "not_switched_on": NOT_SWITCHED_ON}


class ScriptedCall(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ScriptedTurn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    text: str = ""
    tool_calls: list[ScriptedCall] = Field(default_factory=list)
    error: str | None = None
    error_class: Literal["provider", "request"] = "provider"
    delay: float = Field(default=0.0, ge=0, le=600)
    cost_usd: float = Field(default=0.0, ge=0)
    tokens_in: int = Field(default=0, ge=0)
    tokens_out: int = Field(default=0, ge=0)
    # Say what the last tool result said, after ``text`` (a demo's script relaying a tool it drove).
    echo: bool = False


def parse_script(raw: Any) -> list[ScriptedTurn]:
    """Validate a script (a book checks its own when it is built: the demo's shipped ones as ``summon dev`` starts)."""
    if not isinstance(raw, list):
        raise ValueError("a script is a list of turns")
    return [ScriptedTurn.model_validate(t) for t in raw]


# What a book gives for one model call: the turns its run is answered by, or None (not scripted). It reads only
# the request — the same for every call of one run (``asked``) — so a run answered again by another worker after
# a crash is answered by the same script.
StandInBook = Callable[[ModelRequest], Sequence[Mapping[str, Any]] | None]


def asked(request: ModelRequest) -> str:
    """The words a run was opened with (its first user turn: the context and what was asked), which every model
    call of the run begins with."""
    return next((m.text for m in request.messages if m.role == "user"), "")


def first_of(*books: StandInBook) -> StandInBook:
    """One book reading several in order: the first that has turns for a call gives them."""
    def turns(request: ModelRequest) -> Sequence[Mapping[str, Any]] | None:
        for book in books:
            found = book(request)
            if found is not None:
                return found
        return None

    return turns


class MockModel:
    name = "mock"

    def __init__(self, clock: Clock, *, reason: StandIn = "no_key", standing_in: str | None = None) -> None:
        self._clock = clock
        self.reason = reason
        self._standing_in = STANDING_IN_FOR[reason] if standing_in is None else standing_in

    def estimate(self, request: ModelRequest, *, turn: int, allowance: float | None = None) -> float | None:
        """The stand-in's own answer is free."""
        return 0.0

    async def answer(
        self, request: ModelRequest, *, turn: int, allowance: float | None = None, run_id: int | None = None,
        watch: Watch | None = None,
    ) -> list[ModelStep]:
        if watch is not None and watch.said is not None:
            watch.said(self._standing_in)
        return [ModelStep(text=self._standing_in, provider=self.name, model="mock")]


class StandInModel:
    """The ``Answerer`` the tests and the demo choose at the root: a call its ``book`` has turns for is answered
    by them, never bought; any other by ``otherwise`` (the answerer the process chose: the stand-in's own
    answer, or a provider chain)."""

    name = "mock"

    def __init__(self, book: StandInBook, otherwise: Answerer, clock: Clock) -> None:
        self.book = book
        self.otherwise = otherwise
        self._clock = clock

    def _turns(self, request: ModelRequest) -> list[ScriptedTurn] | None:
        found = self.book(request)
        return None if found is None else parse_script(list(found))

    def estimate(self, request: ModelRequest, *, turn: int, allowance: float | None = None) -> float | None:
        """What the scripted turn says it costs. A script is a trusted test's or the demo's, never bought: it
        costs what it says, whatever ``allowance`` is left."""
        turns = self._turns(request)
        if turns is None:
            return self.otherwise.estimate(request, turn=turn, allowance=allowance)
        return turns[turn].cost_usd if turn < len(turns) else 0.0

    async def answer(
        self, request: ModelRequest, *, turn: int, allowance: float | None = None, run_id: int | None = None,
        watch: Watch | None = None,
    ) -> list[ModelStep]:
        """A scripted turn, said to the watch's listener when it is answered (in one piece); a stop during its
        ``delay`` ends it as a stopped call does."""
        turns = self._turns(request)
        if turns is None:
            return await self.otherwise.answer(request, turn=turn, allowance=allowance, run_id=run_id, watch=watch)
        if turn >= len(turns):
            return [ModelStep(text="", provider=self.name, model="mock")]
        t = turns[turn]
        if t.delay:
            if watch is None:
                await self._clock.sleep(t.delay)
            elif await self._clock.wait(watch.stop, t.delay):
                return [ModelStep(provider=self.name, model="mock", error=STOPPED, error_class="provider",
                                  gave_up=True, interrupted=True, cost_usd=t.cost_usd)]
        if t.error is not None:
            return [ModelStep(
                provider=self.name, model="mock", error=t.error, error_class=t.error_class, gave_up=True,
            )]
        text = t.text
        if t.echo:
            said = next((m.text for m in reversed(request.messages) if m.role == "tool"), "")
            text = f"{text} {said}".strip()
        if text and watch is not None and watch.said is not None:
            watch.said(text)
        return [ModelStep(
            text=text,
            tool_calls=tuple(ToolCall(c.id, c.name, dict(c.arguments)) for c in t.tool_calls),
            provider=self.name, model="mock", cost_usd=t.cost_usd,
            tokens_in=t.tokens_in, tokens_out=t.tokens_out,
        )]
