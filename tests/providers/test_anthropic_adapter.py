"""The Anthropic adapter through the real ``anthropic`` SDK against a local fake server: what the
server received, what was read back, and how each real error comes out."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from engine.clock import FakeClock
from engine.core.messages import Message, ModelRequest, ToolCall, ToolSpec
from engine.errors import ProviderFailure, RequestFault, RetryableFailure
from engine.providers.anthropic import AnthropicAdapter
from engine.providers.config import ProviderConfig
from engine.providers.translate import Usage
from tests.providers.fake_provider import (
    ANTHROPIC_BAD_KEY,
    ANTHROPIC_INVALID,
    ANTHROPIC_MODEL_NOT_FOUND,
    ANTHROPIC_NO_CREDIT,
    ANTHROPIC_OVERLOADED,
    ANTHROPIC_RATE_LIMITED,
    ANTHROPIC_TOO_LARGE,
    Canned,
    FakeProvider,
    anthropic_text,
    anthropic_tools,
    closed_port,
)

LOOKUP = ToolSpec("lookup", "Look something up.", {"type": "object", "properties": {"q": {"type": "string"}}})
# A history begun on OpenAI (its ids, a tool that failed, two user lines in a row) replayed here.
REQUEST = ModelRequest(
    system="You are terse.",
    messages=(
        Message(role="user", text="What's the weather?"),
        Message(role="user", text="In Rome."),
        Message(role="assistant", text="Let me look. ", tool_calls=(
            ToolCall("call_1", "lookup", {"q": "rome"}), ToolCall("call_2", "lookup", {"q": "oslo"}))),
        Message(role="tool", text="rain", call_id="call_1"),
        Message(role="tool", text="no such city", call_id="call_2", is_error=True),
        Message(role="tool", text="from nowhere", call_id="call_gone"),
    ),
    tools=(LOOKUP,),
)


@pytest.fixture
async def adapter(fake: FakeProvider) -> AsyncIterator[AnthropicAdapter]:
    config = ProviderConfig("anthropic", "anthropic", url=fake.anthropic_url, key="sk-ant-test", timeout=10)
    a = AnthropicAdapter(config, FakeClock())
    try:
        yield a
    finally:
        await a.aclose()


async def test_the_request_on_the_wire(fake: FakeProvider, adapter: AnthropicAdapter) -> None:
    fake.queue("anthropic", anthropic_text("Rain."))
    await adapter.complete("claude-haiku-4-5", REQUEST)
    [got] = fake.received("anthropic")
    assert got.headers["authorization"] == "Bearer sk-ant-test"  # how this SDK sends an api key
    assert "anthropic-version" in got.headers
    body = got.body
    assert body["model"] == "claude-haiku-4-5"
    assert body["max_tokens"] == 4096
    assert body["system"] == "You are terse."
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][0] == {"role": "user", "content": [{"type": "text", "text": "What's the weather?\n\nIn Rome."}]}
    assert body["messages"][1] == {"role": "assistant", "content": [
        {"type": "text", "text": "Let me look. "},
        {"type": "tool_use", "id": "call_1", "name": "lookup", "input": {"q": "rome"}},
        {"type": "tool_use", "id": "call_2", "name": "lookup", "input": {"q": "oslo"}},
    ]}
    # Both results in one user turn, in call order; the orphaned result is gone.
    assert body["messages"][2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "rain"},
        {"type": "tool_result", "tool_use_id": "call_2", "content": "no such city", "is_error": True},
    ]}
    assert body["tools"] == [{"name": "lookup", "description": "Look something up.",
                              "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}]


async def test_max_tokens_is_always_sent_and_a_caller_may_set_it(fake: FakeProvider, adapter: AnthropicAdapter) -> None:
    fake.queue("anthropic", anthropic_text("a"), anthropic_text("b"))
    await adapter.complete("claude-haiku-4-5", ModelRequest(system="", messages=(Message("user", "hi"),)))
    await adapter.complete("claude-haiku-4-5", ModelRequest(system="", messages=(Message("user", "hi"),), max_tokens=321))
    first, second = fake.received("anthropic")
    assert first.body["max_tokens"] == 4096
    assert second.body["max_tokens"] == 321
    assert "system" not in first.body  # no empty system field
    assert "tools" not in first.body


async def test_a_text_reply_and_its_usage(fake: FakeProvider, adapter: AnthropicAdapter) -> None:
    fake.queue("anthropic", anthropic_text("Rain at noon.", input=100, cache_read=5000, cache_write=2000, output=30))
    reply = await adapter.complete("claude-haiku-4-5", REQUEST)
    assert reply.text == "Rain at noon."
    assert reply.finish == "stop"
    # input_tokens excludes the cache: every input token is the three together.
    assert reply.usage == Usage(input=100, cache_read=5000, cache_write=2000, output=30)
    assert reply.usage.tokens_in == 7100


async def test_parallel_tool_use_blocks_are_all_read(fake: FakeProvider, adapter: AnthropicAdapter) -> None:
    fake.queue("anthropic", anthropic_tools("Checking both.", ("toolu_01A", "lookup", {"q": "rome"}),
                                            ("toolu_01B", "lookup", {"q": "oslo"})))
    reply = await adapter.complete("claude-haiku-4-5", REQUEST)
    assert reply.text == "Checking both."
    assert reply.finish == "tool_calls"
    assert reply.tool_calls == (ToolCall("toolu_01A", "lookup", {"q": "rome"}), ToolCall("toolu_01B", "lookup", {"q": "oslo"}))
    assert reply.usage == Usage(input=300, output=40)  # null cache fields read as 0


@pytest.mark.parametrize(
    ("canned", "raised", "words"),
    [
        (ANTHROPIC_NO_CREDIT, ProviderFailure, "Your credit balance is too low"),
        (ANTHROPIC_BAD_KEY, ProviderFailure, "invalid x-api-key"),
        (ANTHROPIC_MODEL_NOT_FOUND, ProviderFailure, "model: claude-nope"),
        (ANTHROPIC_OVERLOADED, RetryableFailure, "Overloaded"),
        (ANTHROPIC_RATE_LIMITED, RetryableFailure, "rate limit"),
        (ANTHROPIC_INVALID, RequestFault, "unexpected `tool_use_id`"),
        (ANTHROPIC_TOO_LARGE, RequestFault, "maximum allowed number of bytes"),
        (Canned(status=200, body={"type": "error", "error": {"type": "api_error", "message": "Internal error"}}),
         ProviderFailure, "Internal error"),
    ],
    ids=["400_credit_too_low", "401", "404_model", "529", "429", "400_invalid_request", "413", "200_error_body"],
)
async def test_each_error_is_mapped_once_into_ours(
    fake: FakeProvider, adapter: AnthropicAdapter, canned: Canned, raised: type[Exception], words: str,
) -> None:
    fake.queue("anthropic", canned)
    with pytest.raises(raised) as caught:
        await adapter.complete("claude-haiku-4-5", REQUEST)
    assert type(caught.value) is raised
    assert words in str(caught.value)
    assert caught.value.provider == "anthropic"  # type: ignore[attr-defined]
    assert len(fake.received("anthropic")) == 1  # the SDK did not retry (max_retries=0)


async def test_retry_after_is_read_off_a_429(fake: FakeProvider, adapter: AnthropicAdapter) -> None:
    fake.queue("anthropic", ANTHROPIC_RATE_LIMITED)
    with pytest.raises(RetryableFailure) as caught:
        await adapter.complete("claude-haiku-4-5", REQUEST)
    assert caught.value.retry_after == 30.0


async def test_connection_refused_is_the_providers_failure() -> None:
    config = ProviderConfig("down", "anthropic", url=f"http://127.0.0.1:{closed_port()}", key="k", timeout=5)
    a = AnthropicAdapter(config, FakeClock())
    try:
        with pytest.raises(ProviderFailure) as caught:
            await a.complete("claude-haiku-4-5", REQUEST)
    finally:
        await a.aclose()
    assert type(caught.value) is ProviderFailure
    assert "could not reach the provider" in str(caught.value)
