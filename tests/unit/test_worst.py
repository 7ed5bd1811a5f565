"""The worst case of a model call, worked out before it is made (engine/providers/worst.py): the input bound never
under-counts — checked against real tokenizations written down here — and the arithmetic that lowers
``max_tokens`` to fit what is left, per provider, with caching, and with a fallback to a dearer model.

Where the real counts come from (no network here, and no tokenizer ships with summon):
- OpenAI ``cl100k_base`` and ``o200k_base``: counted offline with the ``bpe-openai`` package (its encodings are
  compiled in), which reproduces the token ids OpenAI's cookbook publishes — "China is great!" is
  [23078, 374, 2294, 0] and "Hello, how are you doing today?" [9906, 11, 1268, 527, 499, 3815, 3432, 30];
- OpenAI's chat overhead: the cookbook "How to count tokens with tiktoken", whose six example messages the API
  counted at 129 prompt tokens (gpt-4-0613);
- Anthropic: the token-counting guide's own examples, counted by its count_tokens endpoint (14 tokens for a system
  prompt and one line; 403 for one tool and one question — most of it the tool-use system prompt).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from engine.clock import FakeClock
from engine.core.messages import Message, ModelRequest, ToolSpec
from engine.providers.chain import Chain
from engine.providers.config import Answering
from engine.providers.mock import MockModel
from engine.providers.prices import Price, parse_prices
from engine.providers.translate import Reply, anthropic_request, openai_request
from engine.providers.worst import MIN_OUTPUT, Fit, clamp, input_bound, input_rate, worst_case

# (text, tokens in cl100k_base, tokens in o200k_base) — real counts.
REAL = [
    ("Hello, how are you doing today?", 8, 8),
    ("China is great!", 4, 4),
    ("tiktoken is great!", 6, 6),
    ("antidisestablishmentarianism", 6, 6),
    ("2 + 2 = 4", 7, 7),
    ("お誕生日おめでとう", 9, 8),
    ("Можно ли вернуть заказ, если коробка уже открыта?", 18, 12),
    ("🛟🤖🎉👩\u200d👩\u200d👧\u200d👦", 27, 18),
    ("def f(x):\n    return {k: v for k, v in x.items() if v is not None}\n", 24, 24),
    ('{"location":"San Francisco, CA","unit":"celsius"}', 13, 13),
    ("@bot_helper:matrix.example.org please summarise !AbCdEfGhIjKlMnOp:example.org since=2d", 30, 26),
    ("https://example.org/shop/orders/123456?utm_source=matrix&utm_medium=chat#details", 20, 20),
    ("    \n\n\t\t   \n", 3, 3),
    ("aGVsbG8gd29ybGQgdGhpcyBpcyBiYXNlNjQgZW5jb2RlZCB0ZXh0IQ==", 41, 34),
    ("0123456789" * 5, 17, 17),
    ("ﷺ ﷽ 𒀱 𝔘𝔫𝔦𝔠𝔬𝔡𝔢", 32, 32),
    ("x" * 200, 25, 25),
]
# OpenAI's cookbook: 3 tokens per message, and every reply primed with 3.
OPENAI_PER_MESSAGE, OPENAI_PRIMING = 3, 3


@pytest.mark.parametrize(("text", "cl100k", "o200k"), REAL, ids=[t[:24] for t, _, _ in REAL])
def test_the_input_bound_is_never_below_a_real_tokenization(text: str, cl100k: int, o200k: int) -> None:
    real = max(cl100k, o200k) + OPENAI_PER_MESSAGE + OPENAI_PRIMING
    for body in (openai_request("m", ModelRequest(system="", messages=(Message("user", text),))),
                 anthropic_request("m", ModelRequest(system="", messages=(Message("user", text),)))):
        assert input_bound(body) >= real
    # The reason it holds: a byte-level BPE token is at least one byte of UTF-8.
    assert len(text.encode("utf-8")) >= max(cl100k, o200k)


def test_characters_are_not_a_bound_and_bytes_are() -> None:
    # Why the bound counts bytes: some text has more tokens than characters.
    over = [(text, cl100k) for text, cl100k, _ in REAL if cl100k > len(text)]
    assert {text for text, _ in over} >= {"🛟🤖🎉👩\u200d👩\u200d👧\u200d👦", "ﷺ ﷽ 𒀱 𝔘𝔫𝔦𝔠𝔬𝔡𝔢"}
    assert all(len(text.encode("utf-8")) >= tokens for text, tokens in over)


def test_the_cookbooks_chat_counted_by_the_openai_api_is_bounded() -> None:
    body: dict[str, Any] = {"model": "gpt-4-0613", "messages": [
        {"role": "system", "content": "You are a helpful, pattern-following assistant that translates corporate "
                                      "jargon into plain English."},
        {"role": "system", "name": "example_user", "content": "New synergies will help drive top-line growth."},
        {"role": "system", "name": "example_assistant",
         "content": "Things working well together will increase revenue."},
        {"role": "system", "name": "example_user",
         "content": "Let's circle back when we have more bandwidth to touch base on opportunities for increased "
                    "leverage."},
        {"role": "system", "name": "example_assistant",
         "content": "Let's talk later when we're less busy about how to do better."},
        {"role": "user",
         "content": "This late pivot means we don't have time to boil the ocean for the client deliverable."},
    ]}
    assert input_bound(body) >= 129


def test_anthropics_counted_examples_are_bounded() -> None:
    plain = anthropic_request("claude-sonnet-4-5", ModelRequest(
        system="You are a scientist", messages=(Message("user", "Hello, Claude"),)))
    assert input_bound(plain) >= 14
    weather = ToolSpec("get_weather", "Get the current weather in a given location", {
        "type": "object",
        "properties": {"location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"}},
        "required": ["location"]})
    with_tool = anthropic_request("claude-sonnet-4-5", ModelRequest(
        system="", messages=(Message("user", "What's the weather like in San Francisco?"),), tools=(weather,)))
    # 403, though the tool and the question are some 300 bytes: the tool-use system prompt is counted too.
    assert len(str(with_tool["tools"]).encode()) + 41 < 403 <= input_bound(with_tool)


# --- the arithmetic ---------------------------------------------------------------------------------

MINI = Price(input=1.5e-7, output=6e-7, cache_read=7.5e-8)  # gpt-4o-mini
HAIKU = Price(input=1e-6, output=5e-6, cache_read=1e-7, cache_write=1.25e-6)  # claude-haiku-4-5
DEAR = Price(input=1e-6, output=4.8e-6)  # one call of 4,096 tokens is about 0.02 USD


@pytest.mark.parametrize(("price", "rate"), [
    (MINI, 1.5e-7),  # a cache read is cheaper than the input: the input rate is the worst
    (HAIKU, 1.25e-6),  # writing to Anthropic's cache costs more than plain input: that is the worst
    (Price(input=2e-6, output=0), 2e-6),
    (Price(input=1e-6, output=1e-6, cache_read=3e-6), 3e-6),  # whatever the table says, the dearest wins
])
def test_an_input_token_is_priced_at_the_dearest_way_it_may_be_billed(price: Price, rate: float) -> None:
    assert input_rate(price) == rate


@pytest.mark.parametrize(("price", "tokens", "max_tokens", "left", "fit"), [
    # Fits whole: nothing lowered.
    (MINI, 1000, 4096, 0.50, Fit(4096, 1000 * 1.5e-7 + 4096 * 6e-7)),
    # 0.02 at full max_tokens against 0.01 left: lowered so the worst case fits.
    (DEAR, 500, 4096, 0.01, Fit(1979, 500 * 1e-6 + 1979 * 4.8e-6)),
    # Anthropic with caching: the input at the cache-write rate.
    (HAIKU, 2000, 4096, 0.0100025, Fit(1500, 2000 * 1.25e-6 + 1500 * 5e-6)),
    # The input alone is more than is left: no call.
    (DEAR, 20_000, 4096, 0.01, None),
    # The input fits but not one token of output does: no call.
    (DEAR, 9_999, 4096, 0.01, None),
    # A free model (price 0, said so in the table) always fits.
    (Price(input=0, output=0), 10**6, 4096, 0.0, Fit(4096, 0.0)),
])
def test_max_tokens_is_lowered_until_the_worst_case_fits(
    price: Price, tokens: int, max_tokens: int, left: float, fit: Fit | None,
) -> None:
    got = clamp(price, tokens, max_tokens, left)
    assert got == (None if fit is None else Fit(fit.max_tokens, pytest.approx(fit.worst_usd)))
    if got is not None:
        assert got.worst_usd <= left and got.max_tokens >= MIN_OUTPUT
        if got.max_tokens < max_tokens:  # as many as fit: one more would not
            assert worst_case(price, tokens, got.max_tokens + 1) > left


@pytest.mark.parametrize("left", [1e-9, 0.003, 0.0100000001, 0.0123456789, 0.07, 1 / 3])
def test_a_clamped_call_never_exceeds_what_is_left(left: float) -> None:
    for price in (MINI, HAIKU, DEAR):
        for tokens in (0, 1, 777, 5000):
            got = clamp(price, tokens, 4096, left)
            if got is not None:
                assert worst_case(price, tokens, got.max_tokens) <= left


# --- each provider of the chain priced for itself -----------------------------------------------

@dataclass
class Unbought:
    name: str
    kind: str = "openai"
    default_model: str | None = None

    async def complete(self, model: str, request: ModelRequest, *, timeout: float | None = None) -> Reply:
        raise AssertionError("pricing a call buys nothing")

    async def aclose(self) -> None:
        return None


PRICES = parse_prices({"prices": {
    "cheap": {"small": {"input": 1.5e-7, "output": 6e-7}},
    "dear": {"large": {"input": 3e-6, "output": 1.5e-5, "cache_read": 3e-7, "cache_write": 3.75e-6}},
    "free": {"local": {"input": 0, "output": 0}},
}})
ASK = ModelRequest(system="You are terse.", messages=(Message("user", "What is 2 + 2?" * 20),),
                   model={"cheap": "small", "dear": "large", "free": "local", "unpriced": "mystery"})


def test_each_fallback_is_priced_for_itself() -> None:
    chain = Chain([Unbought("cheap"), Unbought("dear", kind="anthropic")], PRICES, FakeClock())
    cheap, dear = chain.plan(ASK, 0.01)
    assert cheap.request.max_tokens == 4096  # 4,096 tokens of the small model fit in 0.01
    tokens = input_bound(anthropic_request("large", ASK))
    # The dearer fallback gets fewer tokens, priced at its own (cache-write) input rate and output rate.
    assert dear.request.max_tokens == int((0.01 - tokens * 3.75e-6) / 1.5e-5)
    assert dear.worst_usd <= 0.01 < worst_case(PRICES.prices[("dear", "large")], tokens, dear.request.max_tokens + 1)
    # What is drawn before the call: the dearest of them.
    assert chain.estimate(ASK, turn=0, allowance=0.01) == pytest.approx(max(cheap.worst_usd,
                                                                                        dear.worst_usd))


def test_a_fallback_whose_input_alone_does_not_fit_is_not_asked() -> None:
    chain = Chain([Unbought("cheap"), Unbought("dear", kind="anthropic")], PRICES, FakeClock())
    big = ModelRequest(system="", messages=(Message("user", "x" * 4000),), model=ASK.model)
    [only] = chain.plan(big, 0.01)  # 4,000+ tokens × 3.75e-6 is more than 0.01 on the dear one
    assert only.adapter.name == "cheap"
    assert chain.estimate(big, turn=0, allowance=0.0001) is None  # nothing fits: out of money


def test_an_unpriced_model_is_not_asked_under_a_limit_and_a_free_one_is() -> None:
    chain = Chain([Unbought("unpriced"), Unbought("free")], PRICES, FakeClock())
    [free] = chain.plan(ASK, 0.0)
    assert (free.adapter.name, free.request.max_tokens, free.worst_usd) == ("free", 4096, 0.0)
    alone = Chain([Unbought("unpriced")], PRICES, FakeClock())
    assert alone.plan(ASK, 0.5) == []
    assert len(alone.plan(ASK, None)) == 1  # no limit at all: nothing to hold, as before


@dataclass(frozen=True)
class BotFile:
    source_path: str
    model: str | dict[str, str] | None


def test_the_models_a_bot_may_be_bought_from_without_a_price_are_named_one_line_each() -> None:
    chain = Chain([Unbought("cheap"), Unbought("unpriced", default_model="house-model"), Unbought("free")],
                  PRICES, FakeClock())
    bots = [BotFile("bots/a.md", "small"), BotFile("bots/b.md", {"cheap": "small", "free": "local"}),
            BotFile("bots/c.md", None)]
    assert chain.unpriced(bots) == [
        "bots/a.md: model 'small' on provider 'unpriced' has no price, so its spend limit cannot hold; "
        "add it to the price table (SUMMON_PRICES), at 0 if it is free",
        "bots/a.md: model 'small' on provider 'free' has no price, so its spend limit cannot hold; "
        "add it to the price table (SUMMON_PRICES), at 0 if it is free",
        "bots/c.md: model 'house-model' on provider 'unpriced' has no price, so its spend limit cannot hold; "
        "add it to the price table (SUMMON_PRICES), at 0 if it is free",
    ]
    # Nothing bought, nothing to price: the stand-in refuses nothing.
    assert Answering(MockModel(FakeClock(), reason="chosen")).unpriced(bots) == []
