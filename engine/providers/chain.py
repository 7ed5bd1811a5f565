"""The providers, tried in order: the ``Answerer`` the worker calls when buying is switched on.

Every attempt is a step. A provider's own failure (no credit, bad key, rate limit, down, model not
found) moves on to the next provider, after at most one short same-provider retry for a rate limit or a
server error; the request's fault (malformed, too long) stops at once, since it would fail everywhere
and be two bills. A fallback uses its own model: a bot names one per provider, or one for all; a
provider with no model for the bot is skipped, never sent another provider's model name.

Every attempt is priced for itself before it is made (``engine.providers.worst``): given what is left of the
run's budget (``allowance``), each provider's request is sent with ``max_tokens`` lowered so that its worst
case fits, a provider whose call cannot fit (its input alone is too dear) is skipped, and so is a model with
no price — nothing bounds what it costs — unless the call has no limit at all. An attempt that got no HTTP
answer (timed out, cut off) may have been billed regardless: the attempts after it fit what is left once its
worst case is counted, so even then the call's attempts together cannot cost more than the allowance.

With a ``Limiter`` (``engine/providers/limits.py``), every attempt first takes a permit to its provider, so
every worker together keeps the provider's limits; waiting for one counts against the answer's patience, and a
call that could wait no longer moves on to the next provider (or gives up, saying why).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from engine.clock import Clock
from engine.core.messages import ModelRequest, ModelStep
from engine.errors import CutOff, ProviderError, RequestFault, RetryableFailure
from engine.providers.base import STOPPED, Said, Watch
from engine.providers.classify import Fault
from engine.providers.limits import Limiter, NoPermit, Permit
from engine.providers.prices import PriceTable
from engine.providers.translate import Reply, Usage, anthropic_request, openai_request
from engine.providers.worst import clamp, input_bound, worst_case

log = logging.getLogger(__name__)

# The step's words when no configured provider has a model for the bot (a configuration matter).
NO_MODEL = "no configured provider has a model for this bot"
# ... when every provider that has one has no price for it, and the run has a spend limit that must hold.
NO_PRICE = "no price is known for this bot's model, so no spend limit could hold against it"
# One answer (every attempt, retry waits included) takes at most this long by default: it must end well
# inside the worker's lease (90 s), since the attempts are recorded only when the answer returns.
PATIENCE = 60.0
# No attempt is started with less time than this left.
MIN_ATTEMPT = 1.0
# About how many characters a token is, for what a provider's tokens-per-minute window counts a call for up
# front (settled to the tokens really used when its permit is handed back). An estimate, not the spend bound.
CHARS_PER_TOKEN = 4


class Adapter(Protocol):
    """One provider: ``complete`` makes one call and raises ``ProviderFailure``/``RequestFault``."""

    name: str
    kind: str
    default_model: str | None

    async def complete(self, model: str, request: ModelRequest, *, timeout: float | None = None,
                       said: Said | None = None) -> Reply: ...
    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class RetryPolicy:
    """One short same-provider retry for a rate limit or a server error, when the wait is short."""

    retries: int = 1
    wait: float = 0.5  # when the provider did not say how long
    longest: float = 2.0  # a longer Retry-After moves on to the next provider instead


def model_for(model: str | Mapping[str, str] | None, provider: str, default: str | None = None) -> str | None:
    """The model this provider is asked for: the bot's one name, its name for *this provider*, or the
    provider's default when the bot names none. None: skip the provider for this bot."""
    if isinstance(model, str):
        return model or default
    if isinstance(model, Mapping):
        return model.get(provider) or None
    return default


class Priced(Protocol):
    """A bot, as far as its prices go: which model it names (one for all providers, or one per provider)."""

    @property
    def model(self) -> str | dict[str, str] | None: ...
    @property
    def source_path(self) -> str: ...


@dataclass(frozen=True)
class Attempt:
    """One provider the call may be sent to: its model, the request as it is sent there, its worst case."""

    adapter: Adapter
    model: str
    request: ModelRequest
    worst_usd: float


class Chain:
    def __init__(
        self,
        adapters: Sequence[Adapter],
        prices: PriceTable,
        clock: Clock,
        *,
        retry: RetryPolicy | None = None,
        patience: float = PATIENCE,
        limiter: Limiter | None = None,
    ) -> None:
        self.adapters = tuple(adapters)
        self.prices = prices
        self.clock = clock
        self.retry = retry or RetryPolicy()
        self.patience = patience
        self.limiter = limiter
        self._unpriced_warned: set[tuple[str, str]] = set()

    def plan(self, request: ModelRequest, allowance: float | None) -> list[Attempt]:
        """The providers this request may be sent to, in order, each with its own request (``max_tokens``
        clamped to what its price lets fit in ``allowance`` USD) and what it may cost at worst. A provider
        with no model for the bot, a model with no price (when there is an allowance), and a call that
        cannot fit are left out."""
        out: list[Attempt] = []
        for adapter in self.adapters:
            model = model_for(request.model, adapter.name, adapter.default_model)
            if not model:
                continue
            price = self.prices.price(adapter.name, model, kind=adapter.kind)
            if price is None and allowance is not None:
                self._warn_unpriced(adapter, model, skipped=True)
                continue
            if price is None:
                out.append(Attempt(adapter, model, request, 0.0))
                continue
            wire = anthropic_request(model, request) if adapter.kind == "anthropic" else openai_request(model, request)
            tokens = input_bound(wire)
            if allowance is None:
                out.append(Attempt(adapter, model, request, worst_case(price, tokens, request.max_tokens)))
                continue
            fit = clamp(price, tokens, request.max_tokens, allowance)
            if fit is None:
                log.info("provider %s (%s) is not asked: the call's input alone (at most %d tokens) would cost more "
                         "than the %.6f USD left", adapter.name, model, tokens, allowance)
                continue
            if fit.max_tokens < request.max_tokens:
                log.info("provider %s (%s): max_tokens lowered from %d to %d so the call fits the %.6f USD left",
                         adapter.name, model, request.max_tokens, fit.max_tokens, allowance)
            out.append(Attempt(adapter, model, replace(request, max_tokens=fit.max_tokens), fit.worst_usd))
        return out

    async def answer(
        self, request: ModelRequest, *, turn: int, allowance: float | None = None, run_id: int | None = None,
        watch: Watch | None = None,
    ) -> list[ModelStep]:
        """Every attempt, as steps. With a ``watch``: the text is streamed to its listener as it comes (once any
        of it is heard, the answer is this attempt's: no fallback, no retry), and its stop aborts the call in
        flight (counted at its worst case: nobody says what an aborted call used)."""
        if not any(model_for(request.model, a.name, a.default_model) for a in self.adapters):
            log.error("no provider has a model for this bot (model: %r; providers: %s)",
                      request.model, ", ".join(a.name for a in self.adapters))
            return [ModelStep(error=NO_MODEL, error_class="provider", gave_up=True)]
        tried = self.plan(request, allowance)
        if not tried:
            # Every provider with a model was left out: unpriced, or too dear for what is left (the worker
            # ends a run out of money before asking, so here it is the price that is missing).
            return [ModelStep(error=NO_PRICE, error_class="provider", gave_up=True)]
        steps: list[ModelStep] = []
        heard: list[str] = []  # what the watch's listener has heard, of every attempt
        started = self.clock.monotonic()
        retries = [self.retry.retries] * len(tried)
        n = 0
        retrying = False  # the next attempt is a same-provider retry, its wait already decided
        while True:
            adapter, model, sent = tried[n].adapter, tried[n].model, tried[n].request
            left = self.patience - (self.clock.monotonic() - started)
            others = n + 1 < len(tried)
            permit = await self._permit(adapter, counted_tokens(sent), run_id, left,
                                        wait_out_pause=retrying or not others)
            retrying = False
            if isinstance(permit, NoPermit):
                left = self.patience - (self.clock.monotonic() - started)
                moving_on = others and left >= MIN_ATTEMPT
                if permit.reason == "paused" and moving_on:
                    # Paused for everyone (it asked us to wait): the next provider answers meanwhile.
                    log.info("provider %s is paused for %.1fs more; asking %s meanwhile", adapter.name,
                             permit.seconds, tried[n + 1].adapter.name, extra={"run": run_id})
                    n += 1
                    continue
                steps.append(self._not_called(adapter, model, n, permit, gave_up=not moving_on))
                if not moving_on:
                    return steps
                n += 1
                continue
            left = self.patience - (self.clock.monotonic() - started)
            reply: Reply | None = None
            failure: ProviderError | None = None
            stopped = False
            paid = 0.0
            try:
                reply = await self._made(adapter, model, sent, left, watch, heard)
                stopped = reply is None
            except ProviderError as exc:
                failure = exc
                if isinstance(exc, RetryableFailure) and exc.retry_after is not None and self.limiter is not None:
                    # Recorded before the permit is handed back, so no waiting call slips through meanwhile.
                    await self.limiter.pause(adapter.name, exc.retry_after, str(exc))
            finally:
                # Handed back as soon as the call returns (never held across a retry's wait), with what it used.
                if permit is not None:
                    await self._release(permit, None if reply is None else reply.usage.tokens_in + reply.usage.output)
            if stopped:
                log.info("provider %s (%s): the call was stopped while it was being made", adapter.name, model,
                         extra={"run": run_id})
                steps.append(ModelStep(provider=adapter.name, model=model, fallback=n > 0, text="".join(heard),
                                       error=STOPPED, error_class="provider", gave_up=True, interrupted=True,
                                       cost_usd=tried[n].worst_usd))
                return steps
            if isinstance(failure, RequestFault):
                steps.append(self._failed(adapter, model, n, failure, gave_up=True))
                return steps
            if isinstance(failure, CutOff):
                # It began and broke off: what the provider said it used, else its worst case, may be billed.
                paid = self._cost(adapter, model, failure.usage, tried[n].worst_usd)
                if heard:
                    # Somebody heard part of this answer: another attempt would say it again, differently.
                    steps.append(self._failed(adapter, model, n, failure, gave_up=True, cost=paid, text="".join(heard)))
                    return steps
            if failure is not None:
                if failure.status is None or isinstance(failure, CutOff):
                    charged = paid if isinstance(failure, CutOff) else tried[n].worst_usd
                else:
                    charged = 0.0
                if charged and allowance is not None and n + 1 < len(tried):
                    # No HTTP answer at all (timed out), or a stream cut off: it may have been generated and billed
                    # all the same, so the providers after it get what is left once that is counted.
                    allowance = max(0.0, allowance - charged)
                    later = {id(a.adapter) for a in tried[n + 1:]}
                    tried = tried[:n + 1] + [a for a in self.plan(request, allowance) if id(a.adapter) in later]
                    retries = retries[:n + 1] + [self.retry.retries] * (len(tried) - n - 1)
                left = self.patience - (self.clock.monotonic() - started)
                moving_on = n + 1 < len(tried) and left >= MIN_ATTEMPT
                wait = self._retry_wait(failure, alone=not moving_on) if retries[n] > 0 else None
                if wait is not None and left - wait < MIN_ATTEMPT:
                    wait = None
                steps.append(self._failed(adapter, model, n, failure, gave_up=wait is None and not moving_on,
                                          cost=paid if isinstance(failure, CutOff) else 0.0))
                if wait is not None:
                    retries[n] -= 1
                    retrying = True
                    await self.clock.sleep(wait)
                elif moving_on:
                    n += 1
                else:
                    return steps
                continue
            assert reply is not None
            steps.append(self._answered(adapter, model, n, reply, worst=tried[n].worst_usd))
            return steps

    @staticmethod
    async def _made(adapter: Adapter, model: str, sent: ModelRequest, left: float, watch: Watch | None,
                    heard: list[str]) -> Reply | None:
        """One attempt, followed by ``watch`` (what its listener hears is kept in ``heard`` too); None when the
        watch's stop came first (the call, if it was under way, is aborted: its connection closed)."""
        if watch is None:
            return await adapter.complete(model, sent, timeout=left)
        if watch.stop.is_set():
            return None
        listener = watch.said

        def said(text: str) -> None:
            heard.append(text)
            assert listener is not None
            listener(text)

        call = asyncio.ensure_future(adapter.complete(model, sent, timeout=left,
                                                      said=said if listener is not None else None))
        stop = asyncio.ensure_future(watch.stop.wait())
        try:
            await asyncio.wait((call, stop), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            call.cancel()
            raise
        finally:
            stop.cancel()
        if call.done():
            return call.result()
        call.cancel()
        await asyncio.gather(call, return_exceptions=True)
        return None

    def _cost(self, adapter: Adapter, model: str, usage: object, worst: float) -> float:
        """What a call that broke off is counted at: what the provider said it used, else its worst case."""
        if not isinstance(usage, Usage):
            return worst
        cost = self.prices.cost(adapter.name, model, usage, kind=adapter.kind)
        return worst if cost is None else cost

    async def _permit(self, adapter: Adapter, tokens: int, run_id: int | None, left: float, *,
                      wait_out_pause: bool) -> Permit | NoPermit | None:
        """Leave to call ``adapter`` within what is ``left`` of the answer's patience (None: no limiter)."""
        if self.limiter is None:
            return None
        return await self.limiter.acquire(adapter.name, tokens=tokens, run_id=run_id, lease=max(left, MIN_ATTEMPT),
                                          within=max(0.0, left - MIN_ATTEMPT), wait_out_pause=wait_out_pause)

    async def _release(self, permit: Permit, used: int | None) -> None:
        if self.limiter is not None:
            await self.limiter.release(permit, tokens=used)

    def _not_called(self, adapter: Adapter, model: str, n: int, refused: NoPermit, *, gave_up: bool) -> ModelStep:
        """An attempt never made: the provider's limits (this deployment's) kept it waiting too long, or it
        asked everyone to wait longer than this answer may."""
        words = (f"{adapter.name} was busy: its limits kept this call waiting {refused.seconds:.0f}s"
                 if refused.reason == "busy" else
                 f"{adapter.name} asked to be left alone for {refused.seconds:.0f}s more (rate limited)")
        log.warning("provider %s (%s) not called: %s%s", adapter.name, model, words, " — giving up" if gave_up else "")
        return ModelStep(provider=adapter.name, model=model, fallback=n > 0, error=words, error_class="provider",
                         gave_up=gave_up)

    def estimate(self, request: ModelRequest, *, turn: int, allowance: float | None = None) -> float | None:
        """The most this call may cost, drawn from ``allowance`` before it is made: the dearest worst case among
        the providers it may be sent to, each clamped to fit (``plan``). None: no provider's call fits — its
        input alone costs more than is left — and it is not made."""
        tried = self.plan(request, allowance)
        if not tried:
            return None if allowance is not None and self._any_priced(request) else 0.0
        return max(a.worst_usd for a in tried)

    def unpriced(self, bots: Iterable[Priced]) -> list[str]:
        """One line per bot and model it may be sent to that has no price: no spend limit can hold against such
        a model (every bot has one: ``limits.spend``, 0.50 USD when its file says none), so buying it is
        refused when content is published. A free model is priced 0 in the table, explicitly."""
        lines: list[str] = []
        for bot in bots:
            for adapter in self.adapters:
                model = model_for(bot.model, adapter.name, adapter.default_model)
                if model and self.prices.price(adapter.name, model, kind=adapter.kind) is None:
                    lines.append(f"{bot.source_path}: model {model!r} on provider {adapter.name!r} has no price, so "
                                 f"its spend limit cannot hold; add it to the price table (SUMMON_PRICES), at 0 if "
                                 f"it is free")
        return lines

    def _any_priced(self, request: ModelRequest) -> bool:
        return any(self.prices.price(a.name, m, kind=a.kind) is not None
                   for a in self.adapters if (m := model_for(request.model, a.name, a.default_model)))

    def _warn_unpriced(self, adapter: Adapter, model: str, *, skipped: bool) -> None:
        if (adapter.name, model) in self._unpriced_warned:
            return
        self._unpriced_warned.add((adapter.name, model))
        if skipped:
            log.warning("no price for model %s on provider %s: it is not asked, since no spend limit could hold "
                        "against it; add it to the price table (SUMMON_PRICES), at 0 if it is free", model, adapter.name)
        else:
            log.warning("no price for model %s on provider %s: its calls are recorded at cost 0 and "
                        "no spend limit can hold against them; add it to the price table (SUMMON_PRICES)",
                        model, adapter.name)

    def _retry_wait(self, exc: ProviderError, *, alone: bool) -> float | None:
        """How long to wait before asking the same provider again (None: do not). A longer retry-after than
        the policy's moves on — unless there is nobody else to ask and its wait is shared (a limiter): then
        the call waits for the provider, within the answer's patience."""
        if not isinstance(exc, RetryableFailure):
            return None
        wait = self.retry.wait if exc.retry_after is None else exc.retry_after
        if wait <= self.retry.longest or (alone and self.limiter is not None and exc.retry_after is not None):
            return wait
        return None

    def _failed(self, adapter: Adapter, model: str, n: int, exc: ProviderError, *, gave_up: bool,
                cost: float = 0.0, text: str = "") -> ModelStep:
        fault: Fault = "request" if isinstance(exc, RequestFault) else "provider"
        log.warning("provider %s (%s) failed (%s, HTTP %s): %s%s", adapter.name, model, fault,
                    exc.status, exc, " — giving up" if gave_up else "")
        return ModelStep(provider=adapter.name, model=model, fallback=n > 0, error=str(exc), text=text,
                         error_class=fault, gave_up=gave_up, reason=exc.reason, cost_usd=cost)

    def _answered(self, adapter: Adapter, model: str, n: int, reply: Reply, *, worst: float) -> ModelStep:
        cost = self.prices.cost(adapter.name, model, reply.usage, kind=adapter.kind)
        if cost is None and reply.model and reply.model != model:
            cost = self.prices.cost(adapter.name, reply.model, reply.usage, kind=adapter.kind)
        if cost is None:
            self._warn_unpriced(adapter, model, skipped=False)
        elif not reply.usage_known:
            # A stream that never said what it used (no usage chunk): counted at its worst case.
            log.info("provider %s (%s) did not say what the call used; counted at its worst case", adapter.name, model)
            cost = worst
        return ModelStep(
            text=reply.text, tool_calls=reply.tool_calls, provider=adapter.name, model=model,
            fallback=n > 0, tokens_in=reply.usage.tokens_in, tokens_out=reply.usage.output,
            cost_usd=cost or 0.0, unpriced=cost is None,
        )

    async def aclose(self) -> None:
        for adapter in self.adapters:
            await adapter.aclose()


def counted_tokens(request: ModelRequest) -> int:
    """Roughly how many tokens a provider counts ``request`` for up front (its prompt at about four characters a
    token, plus ``max_tokens``): what a call holds of a shared tokens-per-minute window until it is settled."""
    chars = len(request.system)
    for message in request.messages:
        chars += len(message.text) + sum(len(c.name) + len(str(c.arguments)) for c in message.tool_calls)
    chars += sum(len(t.name) + len(t.description) + len(str(t.parameters)) for t in request.tools)
    return chars // CHARS_PER_TOKEN + 1 + request.max_tokens
