"""The OpenAI chat-completions adapter: OpenAI itself and everything that speaks its shape (OpenRouter,
Azure, Groq, Together, Fireworks, vLLM, llama.cpp, LM Studio, Ollama …).

The SDK is imported here only. It never retries (``max_retries=0``): the chain owns the retry and
fallback loop, so every attempt is a step. Its exceptions are mapped once, in ``complete``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import openai

from engine.clock import Clock
from engine.core.messages import ModelRequest
from engine.errors import ProviderError, ProviderFailure
from engine.providers.classify import unreachable, wire_fault
from engine.providers.translate import NotAnAnswer, Reply, openai_reply, openai_request

if TYPE_CHECKING:
    from engine.providers.config import ProviderConfig

OPENAI_URL = "https://api.openai.com/v1"


class OpenAIAdapter:
    kind = "openai"

    def __init__(self, config: ProviderConfig, clock: Clock) -> None:
        self.config = config
        self.name = config.name
        self.default_model = config.model
        self._clock = clock
        self._client: openai.AsyncOpenAI | None = None

    def _sdk(self) -> openai.AsyncOpenAI:
        if self._client is None:
            # Every setting explicit, so nothing is picked up from OPENAI_* in the environment.
            self._client = openai.AsyncOpenAI(
                api_key=self.config.key or "",
                base_url=self.config.url or OPENAI_URL,
                organization=None, project=None,
                max_retries=0,
            )
        return self._client

    async def complete(self, model: str, request: ModelRequest, *, timeout: float | None = None) -> Reply:
        """One call, in at most ``timeout`` seconds (and never longer than the provider's own setting).
        Raises ``ProviderFailure`` (possibly ``RetryableFailure``) or ``RequestFault``."""
        kwargs: dict[str, Any] = openai_request(model, request)
        seconds = self.config.timeout if timeout is None else max(0.1, min(timeout, self.config.timeout))
        kwargs["timeout"] = openai.Timeout(seconds, connect=min(5.0, seconds))
        try:
            raw = await self._sdk().chat.completions.with_raw_response.create(**kwargs)
            content = await raw.http_response.aread()
        except openai.APIStatusError as exc:
            raise self._mapped(exc.status_code, exc.body, exc.response.headers) from exc
        except openai.APIConnectionError as exc:
            raise unreachable(self.name, exc, timed_out=isinstance(exc, openai.APITimeoutError)) from exc
        except openai.OpenAIError as exc:
            raise ProviderFailure(f"the provider's answer could not be read: {exc}", provider=self.name) from exc
        try:
            return openai_reply(json.loads(content))
        except NotAnAnswer as exc:
            raise self._mapped(raw.status_code, {"message": exc.message, "code": exc.code}, raw.headers) from exc
        except ValueError as exc:
            raise ProviderFailure("the provider's answer was not JSON", provider=self.name,
                                  status=raw.status_code) from exc

    def _mapped(self, status: int, body: object, headers: Any) -> ProviderError:
        return wire_fault(self.name, status, body, dict(headers.items()), self._clock.now())

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
