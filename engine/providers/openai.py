"""The OpenAI chat-completions adapter: OpenAI itself and everything that speaks its shape (OpenRouter,
Azure, Groq, Together, Fireworks, vLLM, llama.cpp, LM Studio, Ollama …). The SDK is imported here only."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import openai

from engine.core.messages import ModelRequest
from engine.providers.base import SdkAdapter
from engine.providers.translate import OpenAIStream, Reply, openai_reply, openai_request

OPENAI_URL = "https://api.openai.com/v1"


class OpenAIAdapter(SdkAdapter):
    kind = "openai"
    status_error = openai.APIStatusError
    connection_error = openai.APIConnectionError
    timeout_error = openai.APITimeoutError
    sdk_error = openai.OpenAIError

    def _new_client(self) -> openai.AsyncOpenAI:
        # Every setting explicit, so nothing is picked up from OPENAI_* in the environment.
        return openai.AsyncOpenAI(api_key=self.config.key or "", base_url=self.config.url or OPENAI_URL,
                                  organization=None, project=None, max_retries=0)

    def _request(self, model: str, request: ModelRequest, seconds: float) -> dict[str, Any]:
        kwargs: dict[str, Any] = openai_request(model, request)
        kwargs["timeout"] = openai.Timeout(seconds, connect=min(5.0, seconds))
        return kwargs

    async def _create(self, client: openai.AsyncOpenAI, kwargs: dict[str, Any]) -> Any:
        return await client.chat.completions.with_raw_response.create(**kwargs)

    def _reply(self, body: Any) -> Reply:
        return openai_reply(body)

    async def _events(self, client: openai.AsyncOpenAI, kwargs: dict[str, Any]) -> AsyncIterator[Mapping[str, Any]]:
        # The usage comes in a last chunk of its own, and only when asked for.
        stream = await client.chat.completions.create(**kwargs, stream=True, stream_options={"include_usage": True})
        try:
            async for chunk in stream:
                yield chunk.model_dump()
        finally:
            await stream.close()

    def _fold(self) -> OpenAIStream:
        return OpenAIStream()
