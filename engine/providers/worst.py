"""What a model call may cost at worst, worked out before it is made — so a run never spends more than its
file allows. Pure: the request about to be sent (in its wire shape) and a price in, numbers out.

**Input tokens, bounded from above.** No tokenizer ships with summon (``tiktoken`` downloads its encodings at
first use; Anthropic publishes none for its current models), so the input is bounded, never estimated:

- every token of a byte-level BPE tokenizer — OpenAI's ``cl100k_base`` and ``o200k_base``, Anthropic's — stands
  for at least one byte of UTF-8, so a text has at most as many tokens as it has bytes. The bound counts the
  UTF-8 bytes of the whole request body as JSON (roles, field names and quotes included), which is more than
  the text the model reads;
- what the provider adds around that text (each message's role markers, the reply's priming, the tool-use
  instructions Anthropic puts in the system prompt when tools are offered — 346 tokens for the Claude 4
  models, at most 530 for the Claude 3 ones) is counted per request, per message and per tool, each
  constant above what the providers document.

English prose runs about four bytes a token, so the bound is about four times the real count there, and near
it for text the tokenizer knows badly (emoji, CJK, base64). tests/unit/test_worst.py checks the bound against
real tokenizations written down in it.

**The worst case** of a call is its input bound at the dearest rate an input token may be billed at (uncached,
written to the provider's cache, or read from it) plus ``max_tokens`` at the output rate. A call is made only
when that fits in what is left of the run's budget: ``max_tokens`` is lowered (``clamp``) until it does, and a
call whose input alone does not fit — or that would leave room for no output at all — is not made.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

# Tokens a provider may add once per request (the reply's priming, the system prompt's markers).
PER_REQUEST = 16
# ... once per message (its role and separators; OpenAI documents 3, plus 1 for a name).
PER_MESSAGE = 8
# ... once per tool offered (its name and the framing of its schema), beyond the schema's own bytes.
PER_TOOL = 32
# ... once when any tool is offered: Anthropic's tool-use system prompt (346 tokens for the Claude 4 models,
# 530 at most for any it documents); OpenAI's framing of its functions is far smaller.
TOOLS_PREAMBLE = 600
# A call that could not say even this much is not worth making: it ends the run "out of money" instead.
MIN_OUTPUT = 1


class Rates(Protocol):
    """USD per token, as the price table has them (``engine.providers.prices.Price``)."""

    @property
    def input(self) -> float: ...
    @property
    def output(self) -> float: ...
    @property
    def cache_read(self) -> float | None: ...
    @property
    def cache_write(self) -> float | None: ...


def input_bound(body: Mapping[str, Any]) -> int:
    """At most how many input tokens the wire request ``body`` (OpenAI chat completions or Anthropic Messages,
    as ``engine.providers.translate`` writes them) is billed for."""
    sent = {k: v for k, v in body.items() if k in ("system", "messages", "tools")}
    tokens = PER_REQUEST + len(json.dumps(sent, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    tokens += PER_MESSAGE * len(body.get("messages") or ())
    tools = body.get("tools") or ()
    if tools:
        tokens += TOOLS_PREAMBLE + PER_TOOL * len(tools)
    return tokens


def input_rate(price: Rates) -> float:
    """The most one input token may be billed at: uncached, written to the cache, or read from it (a rate the
    table leaves out is the input rate, as ``Price.cost`` has it)."""
    return max(price.input, price.cache_write if price.cache_write is not None else price.input,
               price.cache_read if price.cache_read is not None else price.input)


def worst_case(price: Rates, input_tokens: int, max_tokens: int) -> float:
    """The most a call may cost: every input token at the dearest input rate, and ``max_tokens`` of output."""
    return input_tokens * input_rate(price) + max_tokens * price.output


@dataclass(frozen=True)
class Fit:
    """A call that fits what is left: the ``max_tokens`` it is sent with, and what it may cost at worst."""

    max_tokens: int
    worst_usd: float


def clamp(price: Rates, input_tokens: int, max_tokens: int, left: float) -> Fit | None:
    """The call with ``max_tokens`` lowered so that its worst case fits in ``left`` USD; None when its input alone
    does not fit (or leaves room for fewer than ``MIN_OUTPUT`` tokens): the call is not made."""
    spare = left - input_tokens * input_rate(price)
    if spare < 0:
        return None
    fitting = max_tokens if price.output <= 0 else min(max_tokens, math.floor(spare / price.output))
    # Floating point may round the product up past ``left`` by a hair: step down until it holds exactly.
    while fitting >= MIN_OUTPUT and worst_case(price, input_tokens, fitting) > left:
        fitting -= 1
    if fitting < MIN_OUTPUT:
        return None
    return Fit(fitting, worst_case(price, input_tokens, fitting))
