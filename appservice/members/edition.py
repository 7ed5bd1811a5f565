"""What a member bot's run made of itself, read off its steps (pure): the card it composed, how many tools it
called, whether it reached any of its sources — and so whether it is an edition or a failed one (SPEC §10).

A run that errors, comes back empty, or reaches *none* of its sources (every fetch failed: the all-403 case,
where the model writes an apology that would otherwise post as an edition every time) is a failed edition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from appservice.members.card import Card, read_card
from engine.core.messages import Step, ToolCallStep, ToolResultStep


def _results(steps: Sequence[Step]) -> dict[str, ToolResultStep]:
    return {s.call_id: s for s in steps if isinstance(s, ToolResultStep)}


def calls_of(steps: Sequence[Step], name: str | None = None) -> list[tuple[ToolCallStep, ToolResultStep | None]]:
    """Every tool call of the run (of ``name``), with its result when it has one."""
    results = _results(steps)
    return [(s, results.get(s.call.id)) for s in steps
            if isinstance(s, ToolCallStep) and (name is None or s.call.name == name)]


def tool_calls(steps: Sequence[Step]) -> int:
    return sum(1 for s in steps if isinstance(s, ToolCallStep))


def card_arguments(arguments: dict[str, Any]) -> Any:
    """The card in a ``card`` call's arguments: ``{"card": {...}}``, or the card itself."""
    return arguments.get("card", arguments) if isinstance(arguments, dict) else arguments


def accepted_card(steps: Sequence[Step]) -> Card | None:
    """The card the run composed: the one ``card`` call that came back without error (one per run)."""
    for call, result in reversed(calls_of(steps, "card")):
        if result is not None and not result.is_error:
            try:
                return read_card(card_arguments(call.call.arguments))
            except ValueError:
                return None
    return None


def reached_sources(steps: Sequence[Step]) -> tuple[int, int]:
    """(fetches that came back, fetches tried)."""
    fetches = calls_of(steps, "fetch")
    return sum(1 for _, r in fetches if r is not None and not r.is_error), len(fetches)


@dataclass(frozen=True)
class Verdict:
    ok: bool
    why: str = ""  # in words, for the member (the dry run's refusal, the outage notice)


def judge(steps: Sequence[Step], answer: str | None, *, has_sources: bool, error: str | None = None) -> Verdict:
    """Whether a run is an edition. ``error``: how it ended when it did not answer."""
    if error is not None or answer is None:
        return Verdict(False, f"it did not finish: {error or 'no answer'}")
    if not answer.strip() and accepted_card(steps) is None:
        return Verdict(False, "it came back empty")
    reached, tried = reached_sources(steps)
    if has_sources and reached == 0:
        if tried == 0:
            return Verdict(False, "it did not read any of its sources")
        failures = [r.content for _, r in calls_of(steps, "fetch") if r is not None and r.is_error]
        return Verdict(False, "none of its sources could be read (" + "; ".join(dict.fromkeys(failures))[:600] + ")")
    return Verdict(True)
