"""What reaches the model is bounded, and what a call may cost is known before it is made (issue 12, item 11):
lines that join a live run and each tool result get the context's token budget; a call's estimate is the
request's size at the dearest price it may be bought at. Pure."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from engine.clock import FakeClock
from engine.core.messages import CHARS_PER_TOKEN, Message, ModelRequest, ToolSpec
from engine.core.prompt import CONTEXT_TOKENS, capped, said_since
from engine.providers.chain import Chain
from engine.providers.mock import MockModel, StandInModel
from engine.providers.prices import parse_prices
from engine.providers.translate import Reply, openai_request
from engine.providers.worst import input_bound

BUDGET = CONTEXT_TOKENS * CHARS_PER_TOKEN


def test_a_short_text_is_left_as_it_is() -> None:
    assert capped("ok") == "ok"
    assert capped("x" * BUDGET) == "x" * BUDGET


def test_a_huge_tool_result_is_cut_to_the_budget_and_says_so() -> None:
    text = "".join(f"row {n}\n" for n in range(100_000))
    cut = capped(text)
    assert len(cut) <= BUDGET
    assert cut.startswith("row 0\nrow 1\n")
    assert cut.endswith("more characters not shown]")
    shown = cut.rsplit("\n[…", 1)[0]
    assert f"{len(text) - len(shown)} more characters" in cut


def later(n: int, said: str) -> dict[str, str]:
    return {"name": "alice", "sender": "@alice:x", "said": said}


def test_a_flood_of_joining_lines_reaches_the_model_within_the_budget_newest_kept() -> None:
    context = {"later_header": "Said since:", "later": [later(n, f"line {n} " + "y" * 990) for n in range(500)]}
    text, count = said_since(context, 0)
    assert count == 500  # every line is heard (none is brought in again), the oldest just not shown
    assert len(text) <= BUDGET
    assert text.startswith("Said since:\n")
    assert "line 499 " in text and "line 0 " not in text
    # Only what is new since the last step: the ones already heard are not counted again.
    text, count = said_since(context, 498)
    assert count == 2 and "line 498 " in text and "line 497 " not in text


def test_one_huge_joining_line_is_shortened_not_dropped() -> None:
    text, count = said_since({"later": [later(0, "z" * 200_000)]}, 0)
    assert count == 1 and text.startswith("alice: zzz") and len(text) <= BUDGET


def test_the_joining_lines_within_the_budget_are_all_there() -> None:
    text, _ = said_since({"later_header": "Said since:", "later": [later(0, "one"), later(1, "two")]}, 0)
    assert text == "Said since:\nalice: one\nalice: two"


REQUEST = ModelRequest(system="s" * 400, messages=(Message("user", "u" * 3600),), model="gpt-test", max_tokens=1000,
                       tools=(ToolSpec("lookup", "d" * 40),))


@dataclass
class Priced:
    name: str
    kind: str = "openai"
    default_model: str | None = "gpt-test"

    async def complete(self, model: str, request: ModelRequest, *, timeout: float | None = None) -> Reply:
        raise AssertionError("an estimate buys nothing")

    async def aclose(self) -> None:
        return None


def test_a_calls_estimate_is_its_size_at_the_dearest_price_it_may_be_bought_at() -> None:
    prices = parse_prices({"prices": {"cheap": {"gpt-test": {"input": 0.000001, "output": 0.000002}},
                                      "dear": {"gpt-test": {"input": 0.00001, "output": 0.00003}}}})
    chain = Chain([Priced("cheap"), Priced("dear"), Priced("unpriced")], prices, FakeClock())
    # The request's input bounded from above (engine/providers/worst.py; tests/unit/test_worst.py), not guessed.
    tokens = input_bound(openai_request("gpt-test", REQUEST))
    assert tokens >= len(REQUEST.system) + len(REQUEST.messages[0].text)
    assert chain.estimate(REQUEST, turn=0) == pytest.approx(tokens * 0.00001 + 1000 * 0.00003)
    # A scripted run is never bought, whatever chain the stand-in stands in front of: its turn says what it costs.
    assert StandInModel(lambda _: [{"text": "x", "cost_usd": 0.5}], chain, FakeClock()).estimate(REQUEST, turn=0) == 0.5
    assert MockModel(FakeClock()).estimate(REQUEST, turn=0) == 0.0
