"""The OpenAI adapter through the real ``openai`` SDK against a local fake server: what the server
received, what was read back, and how each real error comes out."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from engine.clock import FakeClock
from engine.core.messages import Message, ModelRequest, ToolCall, ToolSpec
from engine.errors import ProviderFailure, RequestFault, RetryableFailure
from engine.providers.config import ProviderConfig
from engine.providers.openai import OpenAIAdapter
from engine.providers.translate import INTERRUPTED, Usage
from tests.providers.fake_provider import (
    OPENAI_BAD_KEY,
    OPENAI_CONTEXT,
    OPENAI_INSUFFICIENT_QUOTA,
    OPENAI_INVALID,
    OPENAI_MODEL_NOT_FOUND,
    OPENAI_RATE_LIMITED,
    OPENAI_SERVER_ERROR,
    OPENROUTER_ERROR_IN_200,
    OPENROUTER_NO_CREDIT,
    Canned,
    FakeProvider,
    closed_port,
    openai_text,
    openai_tools,
)

LOOKUP = ToolSpec("lookup", "Look something up.", {"type": "object", "properties": {"q": {"type": "string"}}})
REQUEST = ModelRequest(
    system="You are terse.",
    messages=(
        Message(role="user", text="What's the weather?"),
        Message(role="assistant", tool_calls=(ToolCall("call_1", "lookup", {"q": "weather"}),
                                              ToolCall("call_2", "lookup", {"q": "time"}))),
        Message(role="tool", text="rain", call_id="call_1"),
        # call_2 never reported back (a crash): it must be closed, or OpenAI refuses the history.
    ),
    tools=(LOOKUP,),
)


@pytest.fixture
async def adapter(fake: FakeProvider) -> AsyncIterator[OpenAIAdapter]:
    a = OpenAIAdapter(ProviderConfig("openai", "openai", url=fake.openai_url, key="sk-test", timeout=10), FakeClock())
    try:
        yield a
    finally:
        await a.aclose()


async def test_the_request_on_the_wire(fake: FakeProvider, adapter: OpenAIAdapter) -> None:
    fake.queue("openai", openai_text("Rain."))
    await adapter.complete("gpt-4o-mini", REQUEST)
    [got] = fake.received("openai")
    assert got.headers["authorization"] == "Bearer sk-test"
    body = got.body
    assert body["model"] == "gpt-4o-mini"
    assert body["max_completion_tokens"] == 4096
    assert "max_tokens" not in body
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What's the weather?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q":"weather"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "lookup", "arguments": '{"q":"time"}'}},
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "rain"},
        {"role": "tool", "tool_call_id": "call_2", "content": INTERRUPTED},
    ]
    assert body["tools"] == [{"type": "function", "function": {
        "name": "lookup", "description": "Look something up.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]


async def test_a_callers_max_tokens_goes_as_max_completion_tokens(fake: FakeProvider, adapter: OpenAIAdapter) -> None:
    fake.queue("openai", openai_text("ok"))
    await adapter.complete("gpt-4o-mini", ModelRequest(system="", messages=(Message("user", "hi"),), max_tokens=77))
    [got] = fake.received("openai")
    assert got.body["max_completion_tokens"] == 77
    assert got.body["messages"] == [{"role": "user", "content": "hi"}]  # no empty system message
    assert "tools" not in got.body


async def test_a_text_reply_and_its_usage(fake: FakeProvider, adapter: OpenAIAdapter) -> None:
    fake.queue("openai", openai_text("Rain at noon.", prompt=1200, cached=1024, completion=9))
    reply = await adapter.complete("gpt-4o-mini", REQUEST)
    assert reply.text == "Rain at noon."
    assert reply.tool_calls == ()
    assert reply.finish == "stop"
    assert reply.model == "gpt-4o-mini-2024-07-18"
    # prompt_tokens includes the cached ones: uncached input is the difference.
    assert reply.usage == Usage(input=176, cache_read=1024, cache_write=0, output=9)
    assert reply.usage.tokens_in == 1200


async def test_parallel_tool_calls_are_all_read(fake: FakeProvider, adapter: OpenAIAdapter) -> None:
    fake.queue("openai", openai_tools(("call_a", "lookup", '{"q": "rome"}'), ("call_b", "lookup", '{"q": "oslo"}'),
                                      ("call_c", "now", "")))
    reply = await adapter.complete("gpt-4o-mini", REQUEST)
    assert reply.text == ""
    assert reply.finish == "tool_calls"
    assert reply.tool_calls == (ToolCall("call_a", "lookup", {"q": "rome"}), ToolCall("call_b", "lookup", {"q": "oslo"}),
                                ToolCall("call_c", "now", {}))
    assert reply.usage == Usage(input=80, output=20)


async def test_truncated_arguments_are_kept_verbatim(fake: FakeProvider, adapter: OpenAIAdapter) -> None:
    fake.queue("openai", openai_tools(("call_a", "lookup", '{"q": "ro')))
    reply = await adapter.complete("gpt-4o-mini", REQUEST)
    assert reply.tool_calls == (ToolCall("call_a", "lookup", {"INVALID_JSON": '{"q": "ro'}),)


@pytest.mark.parametrize(
    ("canned", "raised", "words"),
    [
        (OPENAI_INSUFFICIENT_QUOTA, ProviderFailure, "You exceeded your current quota"),
        (OPENAI_BAD_KEY, ProviderFailure, "Incorrect API key provided"),
        (OPENAI_MODEL_NOT_FOUND, ProviderFailure, "does not exist"),
        (OPENROUTER_NO_CREDIT, ProviderFailure, "Insufficient credits"),
        (OPENROUTER_ERROR_IN_200, ProviderFailure, "Provider returned error"),
        (OPENAI_RATE_LIMITED, RetryableFailure, "Rate limit reached"),
        (OPENAI_SERVER_ERROR, RetryableFailure, "The server had an error"),
        (OPENAI_INVALID, RequestFault, "must be a response to a preceeding message"),
        (OPENAI_CONTEXT, RequestFault, "maximum context length"),
        (Canned(status=422, body={"detail": [{"msg": "field required"}]}), RequestFault, "HTTP 422"),
        (Canned(status=200, raw="<html>gateway</html>"), ProviderFailure, "not JSON"),
        (Canned(status=200, body={"id": "x", "object": "chat.completion", "choices": []}), ProviderFailure,
         "no choices"),
    ],
    ids=["429_insufficient_quota", "401", "404_model", "402_openrouter", "200_error_body", "429_rate_limit",
         "500", "400_invalid_request", "400_context_length", "422", "200_not_json", "200_no_choices"],
)
async def test_each_error_is_mapped_once_into_ours(
    fake: FakeProvider, adapter: OpenAIAdapter, canned: Canned, raised: type[Exception], words: str,
) -> None:
    fake.queue("openai", canned)
    with pytest.raises(raised) as caught:
        await adapter.complete("gpt-4o-mini", REQUEST)
    assert type(caught.value) is raised
    assert words in str(caught.value)  # the provider's own sentence, not the SDK's "Error code: …"
    assert "Error code" not in str(caught.value)
    assert len(fake.received("openai")) == 1  # the SDK did not retry (max_retries=0)


async def test_retry_after_is_read_off_a_429(fake: FakeProvider, adapter: OpenAIAdapter) -> None:
    fake.queue("openai", OPENAI_RATE_LIMITED)
    with pytest.raises(RetryableFailure) as caught:
        await adapter.complete("gpt-4o-mini", REQUEST)
    assert caught.value.retry_after == 1.0
    assert caught.value.status == 429


async def test_connection_refused_is_the_providers_failure() -> None:
    a = OpenAIAdapter(ProviderConfig("down", "openai", url=f"http://127.0.0.1:{closed_port()}/v1", key="k",
                                     timeout=5), FakeClock())
    try:
        with pytest.raises(ProviderFailure) as caught:
            await a.complete("gpt-4o-mini", REQUEST)
    finally:
        await a.aclose()
    assert type(caught.value) is ProviderFailure
    assert caught.value.provider == "down"
    assert "could not reach the provider" in str(caught.value)
