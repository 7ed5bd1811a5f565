"""A watched call through the real SDKs and the fake provider's real streams (issue 30, items 1 and 2): its words
reach the listener as they come, the cost is settled from the stream's own usage (its worst case when the provider
says nothing), a stream that breaks off after anybody heard it is never said again by another provider, and a
stop aborts the call in flight — the provider sees its caller go at once — and is counted at its worst case."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from engine.core.messages import ModelStep
from engine.providers.base import STOPPED, Watch
from engine.providers.chain import RetryPolicy
from engine.providers.translate import openai_request
from engine.providers.worst import input_bound, worst_case
from tests.providers.fake_provider import FakeProvider, anthropic_text, openai_text
from tests.providers.test_chain import MODELS, PRICES, Setup, ask


@pytest.fixture
async def setup(fake: FakeProvider, fake2: FakeProvider) -> AsyncIterator[Setup]:
    s = Setup(fake, fake2, retry=RetryPolicy(retries=0))
    try:
        yield s
    finally:
        await s.chain.aclose()


class Heard:
    """A listener: each piece and when it came (``time.monotonic``)."""

    def __init__(self) -> None:
        self.pieces: list[tuple[float, str]] = []

    def __call__(self, text: str) -> None:
        self.pieces.append((time.monotonic(), text))

    @property
    def text(self) -> str:
        return "".join(t for _, t in self.pieces)


def worst_on_openrouter(max_tokens: int = 4096) -> float:
    request = ask()
    price = PRICES.price("openrouter", MODELS["openrouter"], kind="openai")
    assert price is not None
    return worst_case(price, input_bound(openai_request(MODELS["openrouter"], replace(request, max_tokens=max_tokens))),
                      max_tokens)


async def test_the_words_come_as_the_provider_says_them_and_the_cost_from_the_streams_usage(setup: Setup) -> None:
    setup.openrouter.queue("openai", replace(openai_text("Rain in Lyon, then sun by noon.", prompt=1000, cached=600,
                                                         completion=10), first=0.1, pace=0.15))
    heard = Heard()
    started = time.monotonic()
    [step] = await setup.chain.answer(ask(), turn=0, watch=Watch(stop=asyncio.Event(), said=heard))
    ended = time.monotonic()
    assert step.text == heard.text == "Rain in Lyon, then sun by noon."
    # The first word long before the answer was whole (seven words, 0.15 s apart).
    assert heard.pieces[0][0] - started < 0.6 and ended - heard.pieces[0][0] > 0.7
    assert heard.pieces[0][1] == "Rain"
    assert (step.tokens_in, step.tokens_out) == (1000, 10)
    assert step.cost_usd == pytest.approx(400e-6 + 600 * 5e-7 + 10 * 2e-6)
    sent = setup.openrouter.received("openai")[0].body
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}


async def test_an_anthropic_stream_is_heard_as_it_comes_and_settled_from_message_delta(setup: Setup) -> None:
    fallen = Setup(setup.openrouter, setup.anthropic, first="anthropic")
    try:
        setup.anthropic.queue("anthropic", replace(anthropic_text("Sunny and warm.", input=100, output=20), pace=0.05))
        heard = Heard()
        [step] = await fallen.chain.answer(ask(), turn=0, watch=Watch(stop=asyncio.Event(), said=heard))
    finally:
        await fallen.chain.aclose()
    assert step.text == heard.text == "Sunny and warm." and len(heard.pieces) == 3
    assert step.cost_usd == pytest.approx(100 * 1e-6 + 20 * 5e-6)
    assert setup.anthropic.received("anthropic")[0].body["stream"] is True


async def test_a_stream_that_never_says_its_usage_is_counted_at_its_worst_case(setup: Setup) -> None:
    # A server that ignores stream_options: no usage chunk.
    setup.openrouter.queue("openai", replace(openai_text("ok"), body={**openai_text("ok").body, "usage": None}))
    [step] = await setup.chain.answer(ask(), turn=0, watch=Watch(stop=asyncio.Event(), said=Heard()))
    assert step.text == "ok" and step.error is None
    assert step.cost_usd == pytest.approx(worst_on_openrouter())


async def test_a_stream_cut_off_after_it_was_heard_gives_up_counted_at_its_worst_case(setup: Setup) -> None:
    setup.openrouter.queue("openai", replace(openai_text("One two three four five."), cut_after=3))
    setup.anthropic.queue("anthropic", anthropic_text("never said"))
    heard = Heard()
    [step] = await setup.chain.answer(ask(), turn=0, watch=Watch(stop=asyncio.Event(), said=heard))
    assert heard.text == "One two"
    assert step.gave_up and step.error and step.text == "One two" and step.provider == "openrouter"
    assert step.cost_usd == pytest.approx(worst_on_openrouter())
    assert setup.anthropic.received() == []  # the next provider would say it all again


@pytest.mark.parametrize("how", ["error_event", "cut_off"])
async def test_a_stream_that_breaks_before_a_word_falls_back_counting_what_it_may_have_cost(
        setup: Setup, how: str) -> None:
    broken = {"error_event": {"error_after": 1}, "cut_off": {"cut_after": 1}}[how]
    setup.openrouter.queue("openai", replace(openai_text("never heard"), **broken))  # type: ignore[arg-type]
    setup.anthropic.queue("anthropic", anthropic_text("Sunny.", input=100, output=20))
    heard = Heard()
    first, second = await setup.chain.answer(ask(), turn=0, allowance=0.5,
                                             watch=Watch(stop=asyncio.Event(), said=heard))
    assert first.error and not first.gave_up and first.cost_usd == pytest.approx(worst_on_openrouter())
    assert second.text == heard.text == "Sunny." and second.fallback and second.provider == "anthropic"


async def test_a_provider_error_before_the_stream_is_still_a_status_and_falls_back(setup: Setup) -> None:
    from tests.providers.fake_provider import OPENAI_INSUFFICIENT_QUOTA

    setup.openrouter.queue("openai", OPENAI_INSUFFICIENT_QUOTA)
    setup.anthropic.queue("anthropic", anthropic_text("Sunny."))
    first, second = await setup.chain.answer(ask(), turn=0, watch=Watch(stop=asyncio.Event(), said=Heard()))
    assert first.reason == "no_credit" and first.cost_usd == 0 and second.text == "Sunny."


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "unstreamed"])
async def test_a_stop_aborts_the_call_in_flight_and_the_provider_sees_its_caller_go(
        setup: Setup, streamed: bool) -> None:
    # A 20 s answer, stopped 0.8 s in.
    slow = openai_text("word " * 200)
    setup.openrouter.queue("openai", replace(slow, pace=0.1) if streamed else replace(slow, delay=20))
    setup.anthropic.queue("anthropic", anthropic_text("never asked"))
    stop = asyncio.Event()
    heard = Heard()

    async def stop_soon() -> float:
        await asyncio.sleep(0.8)
        stop.set()
        return time.monotonic()

    stopping = asyncio.ensure_future(stop_soon())
    started = time.monotonic()
    steps: list[ModelStep] = await setup.chain.answer(ask(), turn=0, watch=Watch(stop=stop,
                                                                                 said=heard if streamed else None))
    stopped_at = await stopping
    assert time.monotonic() - started < 2
    [step] = steps
    assert step.error == STOPPED and step.interrupted and step.gave_up
    assert step.cost_usd == pytest.approx(worst_on_openrouter())
    for _ in range(20):
        if setup.openrouter.drops:
            break
        await asyncio.sleep(0.01)
    [dropped] = setup.openrouter.drops
    assert dropped - stopped_at < 0.1
    assert setup.anthropic.received() == []
    if streamed:
        assert step.text == heard.text and 3 <= len(heard.pieces) <= 9
