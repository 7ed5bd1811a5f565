"""The scripted model: replays the turns a run carries, and stands in when nothing may be bought.

A script is a list of turns, each ``{"text": …}``, ``{"tool_calls": [{"id", "name", "arguments"}]}``,
``{"error": "…", "error_class": "provider"|"request"}`` and optionally ``"delay": seconds`` (and ``"echo":
true``: the text says what the last tool result said). Turn *n*
answers the run's *n*-th model call; past the end of the script the model has nothing to add. A run
that carries a script is never bought, whatever keys exist.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.clock import Clock
from engine.core.messages import ModelRequest, ModelStep, ToolCall

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
    """Validate a script before a run carries it (a bad one is refused when asked, not mid-run)."""
    if not isinstance(raw, list):
        raise ValueError("a script is a list of turns")
    return [ScriptedTurn.model_validate(t) for t in raw]


class MockModel:
    name = "mock"

    def __init__(self, clock: Clock, *, reason: StandIn = "no_key", standing_in: str | None = None) -> None:
        self._clock = clock
        self.reason = reason
        self._standing_in = STANDING_IN_FOR[reason] if standing_in is None else standing_in

    def estimate(self, request: ModelRequest, *, script: list[dict[str, Any]] | None, turn: int,
                 allowance: float | None = None) -> float | None:
        """What the scripted turn says it costs; the stand-in's own answer is free. A script is a trusted
        test's or the demo's, never bought: it costs what it says, whatever ``allowance`` is left."""
        if script is None:
            return 0.0
        turns = parse_script(script)
        return turns[turn].cost_usd if turn < len(turns) else 0.0

    async def answer(
        self, request: ModelRequest, *, script: list[dict[str, Any]] | None, turn: int,
        allowance: float | None = None, run_id: int | None = None,
    ) -> list[ModelStep]:
        if script is None:
            return [ModelStep(text=self._standing_in, provider=self.name, model="mock")]
        turns = parse_script(script)
        if turn >= len(turns):
            return [ModelStep(text="", provider=self.name, model="mock")]
        t = turns[turn]
        if t.delay:
            await self._clock.sleep(t.delay)
        if t.error is not None:
            return [ModelStep(
                provider=self.name, model="mock", error=t.error, error_class=t.error_class, gave_up=True,
            )]
        text = t.text
        if t.echo:
            said = next((m.text for m in reversed(request.messages) if m.role == "tool"), "")
            text = f"{text} {said}".strip()
        return [ModelStep(
            text=text,
            tool_calls=tuple(ToolCall(c.id, c.name, dict(c.arguments)) for c in t.tool_calls),
            provider=self.name, model="mock", cost_usd=t.cost_usd,
            tokens_in=t.tokens_in, tokens_out=t.tokens_out,
        )]
