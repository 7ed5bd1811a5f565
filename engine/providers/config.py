"""The providers, as the root read them (``ProviderSettings``: ``appservice.config.provider_settings``
parses the ``SUMMON_PROVIDER*`` variables; the engine reads no environment), and the rule that decides whether
anything is bought.

Buying is opt-in (SPEC §2), and no provider means no bots: with no key at all, or with a key but buying
not switched on, nothing can answer, and the heartbeat says so (``usable`` false, with why), so no bot is
offered anywhere. Only an operator's explicit choice of the stand-in (``SUMMON_AGENT_MOCK=1``: the demo,
the tests) makes the mock answer — and it says it is standing in. The rule lives here, not in a variable
somebody remembers to set.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace

from engine.clock import Clock
from engine.core.messages import ModelRequest, ModelStep
from engine.providers.base import Kind, ProviderConfig, ProviderStatus, Watch
from engine.providers.chain import PATIENCE, Adapter, Chain, Priced, RetryPolicy
from engine.providers.limits import Limiter, limits_said
from engine.providers.mock import MockModel, StandIn
from engine.providers.prices import PriceTable, load_prices
from engine.store import Store

log = logging.getLogger(__name__)

KINDS: tuple[Kind, ...] = ("openai", "anthropic")
# The heartbeat's ``mode`` when the stand-in is there: the presence of a puppet says why it cannot answer.
MODES: dict[StandIn, str] = {"chosen": "stand-in: chosen", "no_key": "no provider: no key",
                             "not_switched_on": "no provider: not switched on"}


def env_prefix(name: str) -> str:
    """Where a provider's settings are named (``SUMMON_PROVIDER_<NAME>_``): for the words that point at them."""
    return "SUMMON_PROVIDER_" + re.sub(r"[^A-Z0-9]", "_", name.upper()) + "_"


@dataclass(frozen=True)
class ProviderSettings:
    """What the deployment says answers model calls: its providers, in the order they are tried, whether the
    operator chose the stand-in (``SUMMON_AGENT_MOCK``), whether buying is switched on (``AGENTS_LIVE``), and
    its own price file over the kit's (``SUMMON_PRICES``)."""

    providers: tuple[ProviderConfig, ...] = ()
    mock: bool = False
    live: bool = False
    prices: str | None = None


def stand_in_reason(settings: ProviderSettings) -> StandIn | None:
    """Why the mock is there instead of a provider, or None when buying is on. Only ``"chosen"`` answers
    anybody (``Answering.status``)."""
    if settings.mock:
        return "chosen"
    if not any(p.key for p in settings.providers):
        return "no_key"
    if not settings.live:
        return "not_switched_on"
    return None


def adapter_for(config: ProviderConfig, clock: Clock) -> Adapter:
    if config.kind == "anthropic":
        # The SDKs are imported only when a provider is configured: each takes a second or more to import,
        # and a worker started to take over from a dead one (or on the mock) should not wait for them.
        from engine.providers.anthropic import AnthropicAdapter

        return AnthropicAdapter(config, clock)
    from engine.providers.openai import OpenAIAdapter

    return OpenAIAdapter(config, clock)


class Answering:
    """The worker's ``Answerer``: the provider chain when buying is on, the mock otherwise."""

    def __init__(self, mock: MockModel, chain: Chain | None = None) -> None:
        self.mock = mock
        self.chain = chain

    @property
    def buying(self) -> bool:
        return self.chain is not None

    @property
    def limiter(self) -> Limiter | None:
        """What keeps the providers' limits with every other worker (None: nothing is bought)."""
        return self.chain.limiter if self.chain is not None else None

    @property
    def stand_in(self) -> StandIn | None:
        return None if self.chain is not None else self.mock.reason

    async def answer(
        self, request: ModelRequest, *, turn: int, allowance: float | None = None, run_id: int | None = None,
        watch: Watch | None = None,
    ) -> list[ModelStep]:
        if self.chain is None:
            return await self.mock.answer(request, turn=turn, allowance=allowance, run_id=run_id, watch=watch)
        return await self.chain.answer(request, turn=turn, allowance=allowance, run_id=run_id, watch=watch)

    def estimate(self, request: ModelRequest, *, turn: int, allowance: float | None = None) -> float | None:
        if self.chain is None:
            return self.mock.estimate(request, turn=turn, allowance=allowance)
        return self.chain.estimate(request, turn=turn, allowance=allowance)

    def unpriced(self, bots: Iterable[Priced]) -> list[str]:
        """With buying on, one line per bot and model it may be bought from that has no price (``Chain.unpriced``):
        such content is refused when published. Nothing is bought otherwise, so nothing is refused."""
        return [] if self.chain is None else self.chain.unpriced(bots)

    def status(self) -> ProviderStatus:
        """What the heartbeat says: the stand-in is usable only when the operator chose it; with no key, or
        buying not switched on, nothing is (and ``mode`` says which, for the puppets' presence)."""
        if self.chain is None:
            reason = self.mock.reason
            return ProviderStatus(usable=reason == "chosen", mode=MODES[reason])
        names = tuple(a.name for a in self.chain.adapters)
        return ProviderStatus(usable=bool(names), mode="live", providers=names)

    async def aclose(self) -> None:
        if self.chain is not None:
            await self.chain.aclose()


def choose_answerer(
    settings: ProviderSettings, clock: Clock, *, prices: PriceTable | None = None, retry: RetryPolicy | None = None,
    patience: float = PATIENCE, store: Store | None = None, worker_id: str | None = None,
) -> Answering:
    """What answers model calls in this process. Raises ``ConfigError`` for a bad setting. ``patience``
    bounds one answer (all its attempts): keep it well inside the worker's lease. With a ``store``, the
    providers' limits are kept with every other worker (``worker_id`` owns this process's permits; run the
    answerer's ``limiter`` to hear permits handed back elsewhere)."""
    providers = settings.providers
    reason = stand_in_reason(settings)
    if reason == "chosen":
        log.info("model calls are answered by the stand-in model, as chosen (SUMMON_AGENT_MOCK=1)")
    elif reason is not None:
        log.warning("no provider can answer model calls (%s), so no bot answers anybody; configure a provider, "
                    "or choose the stand-in model with SUMMON_AGENT_MOCK=1",
                    "no provider key is configured" if reason == "no_key" else "buying is not switched on: AGENTS_LIVE=1")
    if reason is not None:
        return Answering(MockModel(clock, reason=reason))
    keyed = [p for p in providers if p.key]
    for p in providers:
        if not p.key:
            log.warning("provider %s has no key (%sKEY) and is left out", p.name, env_prefix(p.name))
    table = prices if prices is not None else load_prices(settings.prices)
    table = replace(table, free=frozenset(p.name for p in keyed if p.free))
    mock = MockModel(clock, reason="not_switched_on")
    limiter = (Limiter(store, clock, worker_id or f"answerer-{uuid.uuid4().hex[:8]}",
                       {p.name: replace(p.limits, call_seconds=p.timeout) for p in keyed}) if store is not None else None)
    chain = Chain([adapter_for(p, clock) for p in keyed], table, clock, retry=retry, patience=patience,
                  limiter=limiter)
    log.info("model calls are bought from %s, in that order", ", ".join(p.name for p in keyed))
    for p in keyed[:-1]:
        # Every attempt is given what is left of the answer's patience, capped at its provider's timeout: one
        # whose timeout is not below the patience can spend all of it on a call that never answers, and the run
        # then fails instead of falling back (make chaos, provider-hanging).
        if p.timeout >= patience:
            log.warning("provider %s: its timeout (%gs, %sTIMEOUT) is not below an answer's patience (%gs: two "
                        "thirds of worker.lease_seconds, at most 60): a call to it that hangs leaves the providers "
                        "after it no time, and the run fails instead of falling back; set it lower",
                        p.name, p.timeout, env_prefix(p.name), patience)
    for p in keyed:
        if p.limits.limited:
            log.info("provider %s is kept to %s by every worker together", p.name, limits_said(p.limits))
    return Answering(mock, chain)
