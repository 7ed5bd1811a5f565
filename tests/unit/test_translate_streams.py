"""A streamed answer folds into the answer the same call gives unstreamed (engine/providers/translate.py): every
wire's events, text as it comes, tool calls whose arguments arrive in pieces, the usage when (and only when) the
provider reports it, and a provider's error mid-stream."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.errors import NotAnAnswer
from engine.providers.translate import (
    AnthropicStream,
    OpenAIStream,
    Usage,
    anthropic_reply,
    openai_reply,
)
from tests.providers.fake_provider import (
    anthropic_text,
    anthropic_tools,
    openai_text,
    openai_tools,
    stream_error,
    streamed,
)


def events(raw: list[bytes]) -> list[Any]:
    """The JSON of each server-sent event (``[DONE]`` left out, as the SDKs leave it)."""
    out = []
    for event in raw:
        data = next(line[6:] for line in event.decode().splitlines() if line.startswith("data: "))
        if data != "[DONE]":
            out.append(json.loads(data))
    return out


@pytest.mark.parametrize("canned", [
    openai_text("Tomorrow in Lyon: rain, then sun.", prompt=120, cached=20, completion=9),
    openai_tools(("call_1", "weather", '{"city": "Lyon", "day": "tomorrow"}'),
                 ("call_2", "clock", '{"zone": "Europe/Paris"}')),
], ids=["text", "tools"])
def test_an_openai_stream_folds_into_the_completion_it_streams(canned: Any) -> None:
    fold = OpenAIStream()
    said = [fold.add(chunk) for chunk in events(streamed("openai", canned.body))]
    assert fold.reply() == openai_reply(canned.body)
    assert "".join(said) == (canned.body["choices"][0]["message"]["content"] or "")
    assert fold.usage_known


def test_an_openai_stream_says_its_words_as_they_come_and_knows_no_usage_until_the_last_chunk() -> None:
    fold = OpenAIStream()
    chunks = events(streamed("openai", openai_text("Rain, then sun.").body))
    assert fold.add(chunks[0]) == ""  # the role chunk
    assert [fold.add(c) for c in chunks[1:4]] == ["Rain,", " then", " sun."]
    assert not fold.usage_known and fold.text == "Rain, then sun."
    for chunk in chunks[4:]:
        fold.add(chunk)
    assert fold.usage_known and fold.reply().usage == Usage(input=120, output=8)


def test_an_openai_stream_without_include_usage_says_its_usage_is_unknown() -> None:
    fold = OpenAIStream()
    for chunk in events(streamed("openai", openai_text("ok").body, usage=False)):
        fold.add(chunk)
    assert fold.reply().text == "ok" and not fold.usage_known and fold.reply().usage == Usage()


def test_an_error_chunk_mid_stream_is_not_an_answer() -> None:
    fold = OpenAIStream()
    for chunk in events(streamed("openai", openai_text("Half of it").body)[:2]) + events([stream_error("openai")]):
        fold.add(chunk)
    with pytest.raises(NotAnAnswer, match="server had an error"):
        fold.reply()


def test_tool_call_arguments_in_pieces_are_joined_by_index_even_interleaved() -> None:
    fold = OpenAIStream()
    for chunk in [
        {"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 1, "id": "call_b", "type": "function", "function": {"name": "b", "arguments": ""}},
            {"index": 0, "id": "call_a", "type": "function", "function": {"name": "a", "arguments": '{"x"'}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"arguments": '{"y": 2}'}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]:
        assert fold.add(chunk) == ""
    reply = fold.reply()
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [("call_a", "a", {"x": 1}), ("call_b", "b", {"y": 2})]
    assert reply.finish == "tool_calls"


@pytest.mark.parametrize("canned", [
    anthropic_text("Tomorrow in Lyon: rain.", input=100, cache_read=30, output=7),
    anthropic_tools("Let me look.", ("toolu_1", "weather", {"city": "Lyon"})),
], ids=["text", "tools"])
def test_an_anthropic_stream_folds_into_the_message_it_streams(canned: Any) -> None:
    fold = AnthropicStream()
    said = [fold.add(event) for event in events(streamed("anthropic", canned.body))]
    assert fold.reply() == anthropic_reply(canned.body)
    assert "".join(said) == "".join(b["text"] for b in canned.body["content"] if b["type"] == "text")
    assert fold.usage_known


def test_an_anthropic_stream_knows_its_usage_only_from_message_delta() -> None:
    fold = AnthropicStream()
    raw = events(streamed("anthropic", anthropic_text("Rain.", input=100, output=3).body))
    for event in raw[:-2]:  # all but message_delta and message_stop: message_start's usage is not the last word
        fold.add(event)
    assert not fold.usage_known and fold.text == "Rain."
    for event in raw[-2:]:
        fold.add(event)
    assert fold.usage_known and fold.reply().usage.output == 3


def test_an_anthropic_error_event_mid_stream_is_not_an_answer() -> None:
    fold = AnthropicStream()
    for event in events(streamed("anthropic", anthropic_text("Half").body)[:3]) + events([stream_error("anthropic")]):
        fold.add(event)
    with pytest.raises(NotAnAnswer, match="Overloaded"):
        fold.reply()


@pytest.mark.parametrize("junk", [None, 3, "x", [], {"choices": "no"}, {"choices": [None, {"delta": 5}]},
                                  {"choices": [{"index": 0, "delta": {"tool_calls": [None, {"function": 3}]}}]}])
def test_a_malformed_chunk_adds_nothing_and_breaks_nothing(junk: Any) -> None:
    fold = OpenAIStream()
    assert fold.add(junk) == ""
    anthropic = AnthropicStream()
    assert anthropic.add(junk) == ""
    anthropic.add({"type": "content_block_delta", "index": 9, "delta": {"type": "text_delta", "text": "x"}})
    assert anthropic.text == ""


def test_message_delta_usage_fields_the_sdk_dumps_as_null_keep_what_message_start_said() -> None:
    fold = AnthropicStream()
    fold.add({"type": "message_start", "message": {"model": "claude", "content": [],
                                                   "usage": {"input_tokens": 100, "output_tokens": 1}}})
    fold.add({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "hi"}})
    fold.add({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
              "usage": {"input_tokens": None, "cache_read_input_tokens": None, "output_tokens": 20}})
    assert fold.finished and fold.reply().usage == Usage(input=100, output=20) and fold.reply().text == "hi"
