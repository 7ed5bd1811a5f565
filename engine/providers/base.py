"""What every provider shares: the seam between the loop and whatever answers (a real provider chain or the
stand-in), a provider's configuration, and the one adapter both wire shapes are built on.

``SdkAdapter.complete`` is the whole life of one call — the request translated, the SDK asked with every
retry off (the chain owns retries, so every attempt is a step), the SDK's exceptions mapped once into the
error tree, the body read and translated back. A subclass says only what differs: which SDK, which
endpoint, which translators (``engine.providers.translate``) and which exception classes. The SDKs are
imported by the subclasses' modules only, and those only when a provider of that kind is configured.
"""

from __future__ import annotations

import asyncio
import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

from engine.clock import Clock
from engine.core.messages import ModelRequest, ModelStep
from engine.core.permits import NO_LIMITS, ProviderLimits
from engine.errors import CutOff, NotAnAnswer, ProviderError, ProviderFailure
from engine.providers.classify import unreachable, wire_fault
from engine.providers.translate import AnthropicStream, OpenAIStream, Reply

# The step's words for a call its run stopped while it was being made (a cancel, a barge-in).
STOPPED = "the call was stopped while it was being made: its run was asked to stop"
# Hears a call's text as it comes: called with each piece, at once, from the loop reading the stream (so it must
# not block: it hands the piece on).
Said = Callable[[str], None]


@dataclass(frozen=True)
class Watch:
    """Who follows one model call while it is made: ``stop``, once set, aborts it (the HTTP call is closed, which
    stops the generation and the bill where the provider supports it); ``said``, when given, hears its text as
    it comes (the call is then streamed)."""

    stop: asyncio.Event
    said: Said | None = None

Kind = Literal["openai", "anthropic"]
DEFAULT_TIMEOUT = 120.0


class Answerer(Protocol):
    """Answers one model call for a run. Returns every attempt as a step, in order: the last one either
    answered (``error is None``) or is the one after which the chain gave up (``gave_up``).

    What answers is chosen once, at the root: a provider chain, or the stand-in (``engine.providers.mock``),
    which the tests and the demo hand a book of what to say. Nothing a run carries chooses it."""

    async def answer(
        self, request: ModelRequest, *, turn: int, allowance: float | None = None, run_id: int | None = None,
        watch: Watch | None = None,
    ) -> list[ModelStep]:
        """``turn``: how many model calls the run has made before this one. ``allowance``: what is left of the
        run's budget (USD); no attempt may cost more at worst (each is sent with ``max_tokens`` lowered to fit).
        None: no limit. ``run_id``: the run the call is for (a call waiting for a provider's permit says whose
        it is). ``watch``: who follows the call (its text as it comes; a stop that aborts it)."""
        ...

    def estimate(self, request: ModelRequest, *, turn: int, allowance: float | None = None) -> float | None:
        """The most this call may cost (USD) within ``allowance``, drawn before it is made: recorded with the
        call's start, it is what the call is counted at if its answer is never recorded. None: the call cannot
        fit what is left (its input alone costs more) and must not be made."""
        ...


@dataclass(frozen=True)
class ProviderStatus:
    """What a worker says on its heartbeat: can it answer model calls, and how."""

    usable: bool
    mode: str
    providers: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProviderConfig:
    name: str
    kind: Kind
    url: str | None = None
    key: str | None = field(default=None, repr=False)
    model: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    limits: ProviderLimits = NO_LIMITS  # kept by every worker together (engine/providers/limits.py)
    # Every model on it costs nothing (a local llama.cpp, Ollama or vLLM): priced 0 without a price file, and no
    # key needed.
    free: bool = False


class SdkAdapter(ABC):
    """One provider, spoken to through its official SDK. ``complete`` raises ``ProviderFailure`` (possibly
    ``RetryableFailure``) or ``RequestFault``, nothing else."""

    kind: str
    # The SDK's exceptions, from the most specific: an HTTP status, no answer at all (and of those, a
    # timeout), and anything else it raises.
    status_error: ClassVar[type[Exception]]
    connection_error: ClassVar[type[Exception]]
    timeout_error: ClassVar[type[Exception]]
    sdk_error: ClassVar[type[Exception]]

    def __init__(self, config: ProviderConfig, clock: Clock) -> None:
        self.config = config
        self.name = config.name
        self.default_model = config.model
        self._clock = clock
        self._client: Any = None

    @abstractmethod
    def _new_client(self) -> Any:
        """The SDK's async client, every setting explicit (nothing picked up from the environment) and
        ``max_retries=0``."""

    @abstractmethod
    def _request(self, model: str, request: ModelRequest, seconds: float) -> dict[str, Any]:
        """The SDK call's keyword arguments for ``request``, with its timeout of ``seconds``."""

    @abstractmethod
    async def _create(self, client: Any, kwargs: dict[str, Any]) -> Any:
        """Make the call; the SDK's raw response (``with_raw_response``)."""

    @abstractmethod
    def _reply(self, body: Any) -> Reply:
        """The provider's JSON body as a ``Reply``; raises ``NotAnAnswer``."""

    @abstractmethod
    def _events(self, client: Any, kwargs: dict[str, Any]) -> AsyncIterator[Mapping[str, Any]]:
        """Make the call streamed; its events as JSON, in order (the stream closed when the iteration ends)."""

    @abstractmethod
    def _fold(self) -> OpenAIStream | AnthropicStream:
        """What folds this wire's events into the answer they add up to."""

    async def complete(self, model: str, request: ModelRequest, *, timeout: float | None = None,
                       said: Said | None = None) -> Reply:
        """One call, in at most ``timeout`` seconds (and never longer than the provider's own setting). With
        ``said``, streamed: each piece of its text is handed to ``said`` as it arrives."""
        seconds = self.config.timeout if timeout is None else max(0.1, min(timeout, self.config.timeout))
        kwargs = self._request(model, request, seconds)
        if self._client is None:
            self._client = self._new_client()
        if said is not None:
            return await self._streamed(kwargs, seconds, said)
        try:
            raw = await self._create(self._client, kwargs)
            content = await raw.http_response.aread()
        except self.status_error as exc:
            # The SDKs' status errors carry the status, the parsed body and the response (for its headers).
            status: int = getattr(exc, "status_code", 0)
            response: Any = getattr(exc, "response", None)
            raise self._mapped(status, getattr(exc, "body", None), response.headers if response else {}) from exc
        except self.connection_error as exc:
            raise unreachable(self.name, exc, timed_out=isinstance(exc, self.timeout_error)) from exc
        except self.sdk_error as exc:
            raise ProviderFailure(f"the provider's answer could not be read: {exc}", provider=self.name,
                                  reason="unreadable") from exc
        try:
            return self._reply(json.loads(content))
        except NotAnAnswer as exc:
            raise self._mapped(raw.status_code, {"message": exc.message, "code": exc.code}, raw.headers) from exc
        except ValueError as exc:
            raise ProviderFailure("the provider's answer was not JSON", provider=self.name, reason="unreadable",
                                  status=raw.status_code) from exc

    async def _streamed(self, kwargs: dict[str, Any], seconds: float, said: Said) -> Reply:
        """The call streamed, in at most ``seconds`` in all (the SDK's own timeout is per read). A stream that
        began and broke off raises ``CutOff`` (with what the provider said it used, if it did): it may be billed."""
        fold = self._fold()
        begun = False
        failure: ProviderError
        try:
            async with asyncio.timeout(seconds):
                async for event in self._events(self._client, kwargs):
                    begun = True
                    text = fold.add(event)
                    if text:
                        said(text)
        except TimeoutError as exc:
            failure = unreachable(self.name, exc, timed_out=True)
        except self.status_error as exc:
            status: int = getattr(exc, "status_code", 0)
            response: Any = getattr(exc, "response", None)
            failure = self._mapped(status, getattr(exc, "body", None), response.headers if response else {})
        except self.connection_error as exc:
            failure = unreachable(self.name, exc, timed_out=isinstance(exc, self.timeout_error))
        except self.sdk_error as exc:
            # A provider's error event mid-stream (the SDK raises it with the event's body).
            failure = self._mapped(200, getattr(exc, "body", None) or str(exc), {})
        else:
            try:
                if not fold.finished:
                    raise NotAnAnswer("the provider's stream ended before its answer did")
                return fold.reply()
            except NotAnAnswer as exc:
                failure = self._mapped(200, {"message": exc.message, "code": exc.code}, {})
        if begun:
            raise CutOff(str(failure), provider=self.name, status=failure.status, reason=failure.reason,
                         usage=fold.usage()) from failure
        raise failure

    def _mapped(self, status: int, body: object, headers: Mapping[str, str]) -> ProviderError:
        return wire_fault(self.name, status, body, dict(headers.items()), self._clock.now())

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
