"""The ordered fallback loop over real adapters, real SDKs and two local fake providers: every attempt
is a step; a provider's own failure moves on, the request's fault stops; a provider with no model for
the bot is never called; cost counts against what answered."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from engine.clock import FakeClock
from engine.core.messages import (
    Message,
    ModelRequest,
    ModelStep,
    ToolCall,
    ToolResultStep,
    ToolSpec,
    conversation,
)
from engine.errors import ProviderFailure, RetryableFailure
from engine.providers.anthropic import AnthropicAdapter
from engine.providers.chain import NO_MODEL, Adapter, Chain, RetryPolicy, model_for
from engine.providers.config import ProviderConfig
from engine.providers.mock import StandInModel
from engine.providers.openai import OpenAIAdapter
from engine.providers.prices import Price, PriceTable
from engine.providers.translate import Reply, anthropic_request, openai_request
from engine.providers.worst import clamp, input_bound
from tests.providers.fake_provider import (
    ANTHROPIC_INVALID,
    ANTHROPIC_MODEL_NOT_FOUND,
    ANTHROPIC_NO_CREDIT,
    ANTHROPIC_OVERLOADED,
    ANTHROPIC_RATE_LIMITED,
    OPENAI_INSUFFICIENT_QUOTA,
    OPENAI_INVALID,
    OPENAI_MODEL_NOT_FOUND,
    OPENAI_RATE_LIMITED,
    OPENROUTER_ERROR_IN_200,
    OPENROUTER_NO_CREDIT,
    Canned,
    FakeProvider,
    anthropic_text,
    anthropic_tools,
    closed_port,
    openai_text,
)

MODELS = {"openrouter": "openai/gpt-4o-mini", "anthropic": "claude-haiku-4-5"}
PRICES = PriceTable({
    ("openrouter", "openai/gpt-4o-mini"): Price(input=1e-6, output=2e-6, cache_read=5e-7),
    ("anthropic", "claude-haiku-4-5"): Price(input=1e-6, output=5e-6, cache_read=1e-7, cache_write=1.25e-6),
})


def ask(model: str | dict[str, str] | None = None, **kw: Any) -> ModelRequest:
    return ModelRequest(system="Be brief.", messages=(Message("user", "Weather in Rome?"),),
                        model=MODELS if model is None else model, **kw)


class Setup:
    def __init__(self, openrouter: FakeProvider, anthropic: FakeProvider, *, first: str = "openrouter",
                 retry: RetryPolicy | None = None, prices: PriceTable = PRICES, openrouter_url: str | None = None) -> None:
        self.clock = FakeClock()
        self.openrouter = openrouter
        self.anthropic = anthropic
        a = OpenAIAdapter(ProviderConfig("openrouter", "openai", url=openrouter_url or openrouter.openai_url,
                                         key="sk-or"), self.clock)
        b = AnthropicAdapter(ProviderConfig("anthropic", "anthropic", url=anthropic.anthropic_url,
                                            key="sk-ant"), self.clock)
        order: list[Adapter] = [a, b] if first == "openrouter" else [b, a]
        self.chain = Chain(order, prices, self.clock, retry=retry)


@pytest.fixture
async def setup(fake: FakeProvider, fake2: FakeProvider) -> AsyncIterator[Setup]:
    s = Setup(fake, fake2)
    try:
        yield s
    finally:
        await s.chain.aclose()


async def answer(s: Setup, request: ModelRequest | None = None) -> list[ModelStep]:
    return await s.chain.answer(request or ask(), turn=0)


async def test_the_first_provider_answers_and_nothing_else_is_called(setup: Setup) -> None:
    setup.openrouter.queue("openai", openai_text("Sunny.", prompt=1000, cached=600, completion=10))
    [step] = await answer(setup)
    assert step == ModelStep(text="Sunny.", provider="openrouter", model="openai/gpt-4o-mini", fallback=False,
                             tokens_in=1000, tokens_out=10, cost_usd=step.cost_usd)
    assert step.cost_usd == pytest.approx(400e-6 + 600 * 5e-7 + 10 * 2e-6)
    assert setup.anthropic.received() == []


@pytest.mark.parametrize(
    "failure",
    [OPENAI_INSUFFICIENT_QUOTA, OPENROUTER_NO_CREDIT, OPENAI_MODEL_NOT_FOUND, OPENROUTER_ERROR_IN_200,
     Canned(status=401, body={"error": {"code": 401, "message": "No auth credentials found"}}),
     Canned(status=403, body={"error": {"code": 403, "message": "Key disabled"}})],
    ids=["429_insufficient_quota", "402", "404_model", "200_error_body", "401", "403"],
)
async def test_the_providers_own_failure_falls_back_at_once(setup: Setup, failure: Canned) -> None:
    setup.openrouter.queue("openai", failure)
    setup.anthropic.queue("anthropic", anthropic_text("Sunny.", input=100, cache_read=1000, cache_write=200, output=20))
    first, second = await answer(setup)
    assert (first.provider, first.error_class, first.gave_up, first.fallback) == ("openrouter", "provider", False, False)
    assert first.error and first.text == "" and first.cost_usd == 0
    assert second.error is None and second.text == "Sunny."
    assert (second.provider, second.model, second.fallback) == ("anthropic", "claude-haiku-4-5", True)
    assert (second.tokens_in, second.tokens_out) == (1300, 20)
    assert second.cost_usd == pytest.approx(100e-6 + 1000 * 1e-7 + 200 * 1.25e-6 + 20 * 5e-6)
    assert len(setup.openrouter.received()) == 1  # no same-provider retry
    assert setup.anthropic.received()[0].body["model"] == "claude-haiku-4-5"  # its own model, not the first's
    assert setup.openrouter.received()[0].body["model"] == "openai/gpt-4o-mini"


@pytest.mark.parametrize("failure", [ANTHROPIC_NO_CREDIT, ANTHROPIC_MODEL_NOT_FOUND],
                         ids=["400_credit_too_low", "404_model"])
async def test_anthropic_out_of_credit_falls_back_to_the_next(fake: FakeProvider, fake2: FakeProvider,
                                                              failure: Canned) -> None:
    s = Setup(fake, fake2, first="anthropic")
    try:
        s.anthropic.queue("anthropic", failure)
        s.openrouter.queue("openai", openai_text("Sunny."))
        first, second = await answer(s)
    finally:
        await s.chain.aclose()
    assert first.provider == "anthropic" and first.error_class == "provider" and not first.gave_up
    assert second.provider == "openrouter" and second.fallback and second.text == "Sunny."
    assert "credit balance" in (first.error or "") or "model: claude-nope" in (first.error or "")


@pytest.mark.parametrize("first_name", ["openrouter", "anthropic"])
async def test_the_requests_fault_fails_the_run_and_the_next_is_never_called(
    fake: FakeProvider, fake2: FakeProvider, first_name: str,
) -> None:
    s = Setup(fake, fake2, first=first_name)
    try:
        s.openrouter.queue("openai", OPENAI_INVALID)
        s.anthropic.queue("anthropic", ANTHROPIC_INVALID)
        [step] = await answer(s)
    finally:
        await s.chain.aclose()
    assert (step.provider, step.error_class, step.gave_up) == (first_name, "request", True)
    other = s.anthropic if first_name == "openrouter" else s.openrouter
    assert other.received() == []
    assert "tool" in (step.error or "")  # the provider's own sentence is what the asker hears


async def test_overloaded_is_retried_once_then_falls_back(fake: FakeProvider, fake2: FakeProvider) -> None:
    s = Setup(fake, fake2, first="anthropic")
    try:
        s.anthropic.queue("anthropic", ANTHROPIC_OVERLOADED, ANTHROPIC_OVERLOADED)
        s.openrouter.queue("openai", openai_text("Sunny."))
        steps = await answer(s)
    finally:
        await s.chain.aclose()
    assert [(x.provider, x.error_class, x.gave_up, x.fallback) for x in steps] == [
        ("anthropic", "provider", False, False), ("anthropic", "provider", False, False),
        ("openrouter", None, False, True)]
    assert len(s.anthropic.received()) == 2
    assert s.clock.monotonic() == pytest.approx(0.5)  # the short wait counts against the run's time


async def test_a_rate_limit_is_retried_after_its_retry_after(setup: Setup) -> None:
    setup.openrouter.queue("openai", OPENAI_RATE_LIMITED, openai_text("Sunny."))
    failed, answered = await answer(setup)
    assert failed.error_class == "provider" and not failed.gave_up
    assert answered.provider == "openrouter" and answered.text == "Sunny." and not answered.fallback
    assert setup.clock.monotonic() == pytest.approx(1.0)  # retry-after: 1
    assert setup.anthropic.received() == []


async def test_a_long_retry_after_moves_on_instead_of_waiting(fake: FakeProvider, fake2: FakeProvider) -> None:
    s = Setup(fake, fake2, first="anthropic")
    try:
        s.anthropic.queue("anthropic", ANTHROPIC_RATE_LIMITED)  # retry-after: 30
        s.openrouter.queue("openai", openai_text("Sunny."))
        first, second = await answer(s)
    finally:
        await s.chain.aclose()
    assert first.provider == "anthropic" and second.provider == "openrouter" and second.fallback
    assert s.clock.monotonic() == 0
    assert len(s.anthropic.received()) == 1


async def test_no_retry_when_the_policy_says_none(fake: FakeProvider, fake2: FakeProvider) -> None:
    s = Setup(fake, fake2, retry=RetryPolicy(retries=0))
    try:
        s.openrouter.queue("openai", OPENAI_RATE_LIMITED)
        s.anthropic.queue("anthropic", anthropic_text("Sunny."))
        _, second = await answer(s)
    finally:
        await s.chain.aclose()
    assert len(s.openrouter.received()) == 1 and second.fallback


async def test_connection_refused_falls_back(fake: FakeProvider, fake2: FakeProvider) -> None:
    s = Setup(fake, fake2, openrouter_url=f"http://127.0.0.1:{closed_port()}/v1")
    try:
        s.anthropic.queue("anthropic", anthropic_text("Sunny."))
        first, second = await answer(s)
    finally:
        await s.chain.aclose()
    assert first.provider == "openrouter" and first.error_class == "provider" and not first.gave_up
    assert "could not reach" in (first.error or "")
    assert second.provider == "anthropic" and second.fallback and second.text == "Sunny."


async def test_when_every_provider_fails_the_last_attempt_gives_up(setup: Setup) -> None:
    setup.openrouter.queue("openai", OPENROUTER_NO_CREDIT)
    setup.anthropic.queue("anthropic", ANTHROPIC_NO_CREDIT)
    first, second = await answer(setup)
    assert not first.gave_up
    assert second.gave_up and second.error_class == "provider" and second.fallback
    assert second.error == ANTHROPIC_NO_CREDIT.body["error"]["message"]


async def test_a_provider_without_a_model_for_the_bot_is_skipped(setup: Setup) -> None:
    setup.anthropic.queue("anthropic", anthropic_text("Sunny."))
    [step] = await answer(setup, ask({"anthropic": "claude-haiku-4-5"}))
    assert setup.openrouter.received() == []  # never sent a foreign model name
    assert step.provider == "anthropic" and step.text == "Sunny."
    assert step.fallback is False  # the first provider tried for this bot


async def test_no_provider_with_a_model_gives_up_without_a_request(setup: Setup) -> None:
    [step] = await answer(setup, ask({"groq": "llama-3.3-70b"}))
    assert step.error == NO_MODEL and step.gave_up
    assert setup.openrouter.received() == [] and setup.anthropic.received() == []


async def test_one_model_name_goes_to_every_provider(setup: Setup) -> None:
    setup.openrouter.queue("openai", OPENROUTER_NO_CREDIT)
    setup.anthropic.queue("anthropic", anthropic_text("ok"))
    await answer(setup, ask("shared-model"))
    assert setup.openrouter.received()[0].body["model"] == "shared-model"
    assert setup.anthropic.received()[0].body["model"] == "shared-model"


async def test_an_unpriced_model_costs_zero_is_marked_and_warned_once(
    fake: FakeProvider, fake2: FakeProvider, caplog: pytest.LogCaptureFixture,
) -> None:
    s = Setup(fake, fake2, prices=PriceTable({}))
    try:
        s.openrouter.queue("openai", openai_text("a"), openai_text("b"))
        with caplog.at_level(logging.WARNING, logger="engine.providers.chain"):
            [one] = await answer(s)
            [two] = await answer(s)
    finally:
        await s.chain.aclose()
    assert (one.cost_usd, one.unpriced, two.unpriced) == (0.0, True, True)
    assert one.tokens_in == 120  # tokens are still recorded
    warned = [r for r in caplog.records if "no price for model" in r.getMessage()]
    assert len(warned) == 1 and "openai/gpt-4o-mini" in warned[0].getMessage()


async def test_a_history_begun_on_one_provider_is_replayed_on_the_other(setup: Setup) -> None:
    tools = (ToolSpec("lookup", "Look up.", {"type": "object", "properties": {"q": {"type": "string"}}}),)
    opening = (Message("user", "Weather in Rome and Oslo?"),)
    # Turn 1: openrouter is out of credit, Anthropic answers with two parallel tool calls.
    setup.openrouter.queue("openai", OPENROUTER_NO_CREDIT)
    setup.anthropic.queue("anthropic", anthropic_tools("Checking.", ("toolu_01A", "lookup", {"q": "rome"}),
                                                       ("toolu_01B", "lookup", {"q": "oslo"})))
    steps: list[Any] = list(await answer(setup, ask(tools=tools)))
    assert steps[-1].tool_calls == (ToolCall("toolu_01A", "lookup", {"q": "rome"}),
                                    ToolCall("toolu_01B", "lookup", {"q": "oslo"}))
    # One result came back; the other call was cancelled mid-run and never reported.
    steps.append(ToolResultStep("toolu_01A", "rain"))
    # Turn 2: openrouter has credit again and gets the Anthropic-begun history in its own shape.
    setup.openrouter.queue("openai", openai_text("Rain in Rome."))
    request = ModelRequest(system="Be brief.", messages=conversation(opening, steps), model=MODELS, tools=tools)
    [step] = await answer(setup, request)
    assert step.text == "Rain in Rome." and step.provider == "openrouter"
    sent = setup.openrouter.received()[-1].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool"]
    assert sent[2]["content"] == "Checking."
    assert [c["id"] for c in sent[2]["tool_calls"]] == ["toolu_01A", "toolu_01B"]
    assert sent[3] == {"role": "tool", "tool_call_id": "toolu_01A", "content": "rain"}
    assert sent[4]["tool_call_id"] == "toolu_01B" and "interrupted" in sent[4]["content"]


def test_model_for() -> None:
    assert model_for("m", "any") == "m"
    assert model_for({"a": "ma"}, "a") == "ma"
    assert model_for({"a": "ma"}, "b", "default-b") is None  # a map names providers; others are skipped
    assert model_for(None, "b", "default-b") == "default-b"
    assert model_for(None, "b") is None


async def test_a_script_is_never_bought_even_by_the_chain_itself(setup: Setup) -> None:
    setup.openrouter.queue("openai", openai_text("bought"))
    [step] = await StandInModel(lambda _: [{"text": "scripted"}], setup.chain, FakeClock()).answer(ask(), turn=0)
    assert step.text == "scripted" and step.provider == "mock"
    assert setup.openrouter.received() == [] and setup.anthropic.received() == []


async def test_a_provider_too_slow_to_wait_for_falls_back(fake: FakeProvider, fake2: FakeProvider) -> None:
    clock = FakeClock()
    slow = OpenAIAdapter(ProviderConfig("openrouter", "openai", url=fake.openai_url, key="k", timeout=0.3), clock)
    quick = AnthropicAdapter(ProviderConfig("anthropic", "anthropic", url=fake2.anthropic_url, key="k"), clock)
    chain = Chain([slow, quick], PRICES, clock)
    try:
        fake.queue("openai", Canned(body=openai_text("late").body, delay=2.0))
        fake2.queue("anthropic", anthropic_text("Sunny."))
        first, second = await chain.answer(ask(), turn=0)
    finally:
        await chain.aclose()
    assert first.error == "the provider did not answer in time" and first.error_class == "provider"
    assert second.text == "Sunny." and second.fallback


class Stub:
    """An adapter that fails after using up some of the (fake) clock, and records its timeouts."""

    kind = "openai"
    default_model: str | None = "m"

    def __init__(self, name: str, clock: FakeClock, takes: float, error: Exception | None = None) -> None:
        self.name, self.clock, self.takes, self.error = name, clock, takes, error
        self.timeouts: list[float | None] = []

    async def complete(self, model: str, request: ModelRequest, *, timeout: float | None = None) -> Reply:
        self.timeouts.append(timeout)
        self.clock.advance(self.takes)
        if self.error is not None:
            raise self.error
        return Reply("ok")

    async def aclose(self) -> None:
        pass


async def test_one_answer_keeps_within_its_patience() -> None:
    clock = FakeClock()
    a = Stub("a", clock, 45, ProviderFailure("down", provider="a", status=500))
    b = Stub("b", clock, 14.5, ProviderFailure("down too", provider="b", status=500))
    c = Stub("c", clock, 1)
    chain = Chain([a, b, c], PriceTable({}), clock, patience=60)
    steps = await chain.answer(ModelRequest("", (Message("user", "hi"),)), turn=0)
    assert [(s.provider, s.gave_up) for s in steps] == [("a", False), ("b", True)]
    assert (a.timeouts, b.timeouts, c.timeouts) == ([60], [15], [])  # each told what is left; c never started

    clock = FakeClock()
    busy = Stub("a", clock, 59.2, RetryableFailure("busy", provider="a", status=503))
    chain = Chain([busy], PriceTable({}), clock, patience=60)
    [step] = await chain.answer(ModelRequest("", (Message("user", "hi"),)), turn=0)
    assert step.gave_up and busy.timeouts == [60]  # no retry: its wait would not leave time for it


async def test_each_attempt_goes_out_with_the_max_tokens_its_own_price_allows(setup: Setup) -> None:
    # The cheaper first provider fails for itself; the fallback's output costs 2.5 times as much a token.
    setup.openrouter.queue("openai", OPENROUTER_NO_CREDIT)
    setup.anthropic.queue("anthropic", Canned(body=anthropic_text("Sunny.").body, fill=True))
    first, second = await s_answer_within(setup, 0.005)
    [to_openrouter] = setup.openrouter.received()
    [to_anthropic] = setup.anthropic.received()
    # Each worked out from its own wire request and its own price (input: Anthropic's cache-write rate).
    mini = clamp(PRICES.prices[("openrouter", "openai/gpt-4o-mini")],
                 input_bound(openai_request("openai/gpt-4o-mini", ask())), 4096, 0.005)
    haiku = clamp(PRICES.prices[("anthropic", "claude-haiku-4-5")],
                  input_bound(anthropic_request("claude-haiku-4-5", ask())), 4096, 0.005)
    assert mini is not None and haiku is not None
    assert to_openrouter.body["max_completion_tokens"] == mini.max_tokens < 4096
    assert to_anthropic.body["max_tokens"] == haiku.max_tokens < mini.max_tokens
    # Billed for every output token it was allowed, the fallback still cost no more than was left.
    assert second.provider == "anthropic" and second.fallback and second.tokens_out == haiku.max_tokens
    assert first.error is not None and 0.0045 < second.cost_usd <= 0.005


async def s_answer_within(s: Setup, allowance: float) -> list[ModelStep]:
    return await s.chain.answer(ask(), turn=0, allowance=allowance)


async def test_after_an_attempt_with_no_answer_the_fallback_fits_what_is_left_once_that_one_is_counted(
    fake: FakeProvider, fake2: FakeProvider,
) -> None:
    # The first provider cannot be reached: a call that got no HTTP answer may have been billed all the same.
    s = Setup(fake, fake2, openrouter_url=f"http://127.0.0.1:{closed_port()}/v1")
    try:
        s.anthropic.queue("anthropic", Canned(body=anthropic_text("Sunny.").body, fill=True))
        first, second = await s_answer_within(s, 0.02)
    finally:
        await s.chain.aclose()
    mini = clamp(PRICES.prices[("openrouter", "openai/gpt-4o-mini")],
                 input_bound(openai_request("openai/gpt-4o-mini", ask())), 4096, 0.02)
    assert mini is not None and first.error is not None and first.provider == "openrouter"
    haiku = clamp(PRICES.prices[("anthropic", "claude-haiku-4-5")],
                  input_bound(anthropic_request("claude-haiku-4-5", ask())), 4096, 0.02 - mini.worst_usd)
    assert haiku is not None and haiku.max_tokens < 4000  # 0.02 alone would have let nearly 4,000 through
    [sent] = s.anthropic.received()
    assert sent.body["max_tokens"] == haiku.max_tokens
    # Together, the worst the first may have cost and what the second did cost stay within the allowance.
    assert mini.worst_usd + second.cost_usd <= 0.02
