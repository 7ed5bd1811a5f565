"""Providers from the environment, and the rule that decides whether anything is bought.

    SUMMON_PROVIDERS=openrouter,anthropic          the providers, in the order they are tried
    SUMMON_PROVIDER_<NAME>_KIND=openai|anthropic   the wire shape (default: anthropic for a provider
                                                   named "anthropic", openai for any other)
    SUMMON_PROVIDER_<NAME>_URL=https://…           base url (default: the kind's official one)
    SUMMON_PROVIDER_<NAME>_KEY=…                   the key; a provider without one is never called
    SUMMON_PROVIDER_<NAME>_MODEL=…                 the model for a bot that names none (optional)
    SUMMON_PROVIDER_<NAME>_TIMEOUT=120             seconds for one call (optional)
    SUMMON_PROVIDER_<NAME>_FREE=1                  every model on it costs nothing (a local model: llama.cpp,
                                                   Ollama, vLLM): priced 0 with no price file, and no key needed
    SUMMON_PROVIDER_<NAME>_MAX_IN_FLIGHT=20        calls to it at once, all workers together (optional)
    SUMMON_PROVIDER_<NAME>_RPM=500                 requests per minute, all workers together (optional)
    SUMMON_PROVIDER_<NAME>_TPM=200000              tokens per minute (prompt estimate + max_tokens), likewise
    SUMMON_PROVIDER_<NAME>_WINDOW=60               seconds RPM and TPM are counted over, each window its share
                                                   (a provider that enforces per-minute limits per 10 s: 10)
    SUMMON_PRICES=/path/prices.yaml                the deployment's prices, over the kit's
    AGENTS_LIVE=1                                  switch buying on
    SUMMON_AGENT_MOCK=1                            answer through the stand-in, whatever else is set

<NAME> is the name upper-cased, with anything but letters and digits as ``_``.

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
from collections.abc import Iterable, Mapping
from dataclasses import replace

from engine.clock import Clock
from engine.core.messages import ModelRequest, ModelStep
from engine.core.permits import ProviderLimits
from engine.errors import ConfigError
from engine.providers.base import DEFAULT_TIMEOUT, Kind, ProviderConfig, ProviderStatus
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
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
_YES = frozenset({"1", "true", "yes", "on"})


def env_prefix(name: str) -> str:
    return "SUMMON_PROVIDER_" + re.sub(r"[^A-Z0-9]", "_", name.upper()) + "_"


def providers_from_env(env: Mapping[str, str]) -> list[ProviderConfig]:
    """The configured providers, in order. A bad setting is a ``ConfigError`` naming its key."""
    listed = [n.strip().lower() for n in env.get("SUMMON_PROVIDERS", "").split(",") if n.strip()]
    out: list[ProviderConfig] = []
    seen: set[str] = set()
    for name in listed:
        if not _NAME.match(name):
            raise ConfigError(f"SUMMON_PROVIDERS: {name!r} is not a provider name (letters, digits, '_', '-', '.')")
        prefix = env_prefix(name)
        if prefix in seen:
            raise ConfigError(f"SUMMON_PROVIDERS: {name!r} is listed twice (or two names share {prefix}*)")
        seen.add(prefix)
        kind = env.get(prefix + "KIND", "").strip().lower() or ("anthropic" if name == "anthropic" else "openai")
        if kind not in KINDS:
            raise ConfigError(f"{prefix}KIND: {kind!r} is not one of {', '.join(KINDS)}")
        url = env.get(prefix + "URL", "").strip() or None
        if url is not None and not url.startswith(("http://", "https://")):
            raise ConfigError(f"{prefix}URL: {url!r} is not an http(s) url")
        raw_timeout = env.get(prefix + "TIMEOUT", "").strip()
        try:
            timeout = float(raw_timeout) if raw_timeout else DEFAULT_TIMEOUT
        except ValueError:
            raise ConfigError(f"{prefix}TIMEOUT: {raw_timeout!r} is not a number of seconds") from None
        if not 0 < timeout <= 600:
            raise ConfigError(f"{prefix}TIMEOUT: {raw_timeout!r} is not between 0 and 600 seconds")
        raw_free = env.get(prefix + "FREE", "").strip().lower()
        if raw_free not in ("", "0", "false", "no", "off") and raw_free not in _YES:
            raise ConfigError(f"{prefix}FREE: {raw_free!r} is not 1 or 0")
        free = raw_free in _YES
        # A local model wants no key; its SDK wants a string, which it never checks.
        key = env.get(prefix + "KEY", "").strip() or ("no-key-needed" if free else None)
        out.append(ProviderConfig(
            name=name, kind="anthropic" if kind == "anthropic" else "openai", url=url, key=key,
            model=env.get(prefix + "MODEL", "").strip() or None,
            timeout=timeout, limits=limits_from_env(env, prefix), free=free,
        ))
    return out


def limits_from_env(env: Mapping[str, str], prefix: str) -> ProviderLimits:
    """A provider's limits (every worker keeps them together); a bad one is a ``ConfigError`` naming its key."""

    def count(suffix: str) -> int | None:
        raw = env.get(prefix + suffix, "").strip()
        if not raw:
            return None
        if not raw.isdecimal() or int(raw) < 1:
            raise ConfigError(f"{prefix}{suffix}: {raw!r} is not a whole number of at least 1")
        return int(raw)

    raw_window = env.get(prefix + "WINDOW", "").strip()
    try:
        window = float(raw_window) if raw_window else 60.0
    except ValueError:
        raise ConfigError(f"{prefix}WINDOW: {raw_window!r} is not a number of seconds") from None
    if not 1 <= window <= 60:
        raise ConfigError(f"{prefix}WINDOW: {raw_window!r} is not between 1 and 60 seconds")
    return ProviderLimits(max_in_flight=count("MAX_IN_FLIGHT"), requests_per_minute=count("RPM"),
                          tokens_per_minute=count("TPM"), window_seconds=window)


def stand_in_reason(env: Mapping[str, str], providers: list[ProviderConfig]) -> StandIn | None:
    """Why the mock is there instead of a provider, or None when buying is on. Only ``"chosen"`` answers
    anybody (``Answering.status``)."""
    if _yes(env.get("SUMMON_AGENT_MOCK")):
        return "chosen"
    if not any(p.key for p in providers):
        return "no_key"
    if not _yes(env.get("AGENTS_LIVE")):
        return "not_switched_on"
    return None


def _yes(value: str | None) -> bool:
    return (value or "").strip().lower() in _YES


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
    ) -> list[ModelStep]:
        if self.chain is None:
            return await self.mock.answer(request, turn=turn, allowance=allowance, run_id=run_id)
        return await self.chain.answer(request, turn=turn, allowance=allowance, run_id=run_id)

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
    env: Mapping[str, str], clock: Clock, *, prices: PriceTable | None = None, retry: RetryPolicy | None = None,
    patience: float = PATIENCE, store: Store | None = None, worker_id: str | None = None,
) -> Answering:
    """What answers model calls in this process. Raises ``ConfigError`` for a bad setting. ``patience``
    bounds one answer (all its attempts): keep it well inside the worker's lease. With a ``store``, the
    providers' limits are kept with every other worker (``worker_id`` owns this process's permits; run the
    answerer's ``limiter`` to hear permits handed back elsewhere)."""
    providers = providers_from_env(env)
    reason = stand_in_reason(env, providers)
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
    table = prices if prices is not None else load_prices(env.get("SUMMON_PRICES") or None)
    table = replace(table, free=frozenset(p.name for p in keyed if p.free))
    mock = MockModel(clock, reason="not_switched_on")
    limiter = (Limiter(store, clock, worker_id or f"answerer-{uuid.uuid4().hex[:8]}",
                       {p.name: replace(p.limits, call_seconds=p.timeout) for p in keyed}) if store is not None else None)
    chain = Chain([adapter_for(p, clock) for p in keyed], table, clock, retry=retry, patience=patience,
                  limiter=limiter)
    log.info("model calls are bought from %s, in that order", ", ".join(p.name for p in keyed))
    for p in keyed:
        if p.limits.limited:
            log.info("provider %s is kept to %s by every worker together", p.name, limits_said(p.limits))
    return Answering(mock, chain)
