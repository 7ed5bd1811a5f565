"""The Anthropic Messages adapter. The SDK is imported here only."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import anthropic

from engine.core.messages import ModelRequest
from engine.providers.base import SdkAdapter
from engine.providers.translate import AnthropicStream, Reply, anthropic_reply, anthropic_request

ANTHROPIC_URL = "https://api.anthropic.com"


class AnthropicAdapter(SdkAdapter):
    kind = "anthropic"
    status_error = anthropic.APIStatusError
    connection_error = anthropic.APIConnectionError
    timeout_error = anthropic.APITimeoutError
    sdk_error = anthropic.AnthropicError

    def _new_client(self) -> anthropic.AsyncAnthropic:
        # Every setting explicit, so nothing is picked up from ANTHROPIC_* in the environment.
        return anthropic.AsyncAnthropic(api_key=self.config.key or "", base_url=self.config.url or ANTHROPIC_URL,
                                        max_retries=0)

    def _request(self, model: str, request: ModelRequest, seconds: float) -> dict[str, Any]:
        kwargs: dict[str, Any] = anthropic_request(model, request)
        kwargs["timeout"] = anthropic.Timeout(seconds, connect=min(5.0, seconds))
        return kwargs

    async def _create(self, client: anthropic.AsyncAnthropic, kwargs: dict[str, Any]) -> Any:
        return await client.messages.with_raw_response.create(**kwargs)

    def _reply(self, body: Any) -> Reply:
        return anthropic_reply(body)

    async def _events(self, client: anthropic.AsyncAnthropic,
                      kwargs: dict[str, Any]) -> AsyncIterator[Mapping[str, Any]]:
        stream = await client.messages.create(**kwargs, stream=True)
        try:
            async for event in stream:
                yield event.model_dump()
        finally:
            await stream.close()

    def _fold(self) -> AnthropicStream:
        return AnthropicStream()
