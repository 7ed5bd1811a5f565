"""Our message list ⇄ OpenAI chat completions ⇄ Anthropic Messages, by tables of cases."""

from __future__ import annotations

import itertools
from typing import Any, Literal

import pytest

from engine.core.messages import Message, ModelRequest, ToolCall, ToolSpec
from engine.errors import NotAnAnswer
from engine.providers.translate import (
    INTERRUPTED,
    Reply,
    Usage,
    anthropic_id,
    anthropic_messages,
    anthropic_reply,
    anthropic_request,
    openai_messages,
    openai_reply,
    openai_request,
    provider_valid,
)

U: Literal["user"] = "user"
A: Literal["assistant"] = "assistant"
T: Literal["tool"] = "tool"
C1, C2, C3 = ToolCall("c1", "lookup", {"q": "rome"}), ToolCall("c2", "lookup", {"q": "oslo"}), ToolCall("c3", "now")


def tool(call_id: str, text: str, *, is_error: bool = False) -> Message:
    return Message(role=T, text=text, call_id=call_id, is_error=is_error)


VALID_CASES: list[tuple[str, list[Message], list[Message]]] = [
    ("already_valid",
     [Message(U, "hi"), Message(A, "hello")],
     [Message(U, "hi"), Message(A, "hello")]),
    ("empty_user_text_dropped",
     [Message(U, "hi"), Message(U, "  \n"), Message(A, "hello")],
     [Message(U, "hi"), Message(A, "hello")]),
    ("consecutive_users_merged",
     [Message(U, "one"), Message(U, "two")],
     [Message(U, "one\n\ntwo")]),
    ("consecutive_assistants_merged",
     [Message(U, "hi"), Message(A, "Let me look."), Message(A, "", (C1,)), tool("c1", "rain")],
     [Message(U, "hi"), Message(A, "Let me look.", (C1,)), tool("c1", "rain")]),
    ("empty_assistant_dropped",
     [Message(U, "hi"), Message(A, " "), Message(A, "hello")],
     [Message(U, "hi"), Message(A, "hello")]),
    ("blank_text_beside_calls_dropped",
     [Message(U, "hi"), Message(A, "\n", (C1,)), tool("c1", "rain")],
     [Message(U, "hi"), Message(A, "", (C1,)), tool("c1", "rain")]),
    ("dangling_call_closed_as_interrupted",
     [Message(U, "hi"), Message(A, "", (C1, C2)), tool("c1", "rain")],
     [Message(U, "hi"), Message(A, "", (C1, C2)), tool("c1", "rain"), tool("c2", INTERRUPTED, is_error=True)]),
    ("every_call_dangling_after_a_cancel",
     [Message(U, "hi"), Message(A, "", (C1,))],
     [Message(U, "hi"), Message(A, "", (C1,)), tool("c1", INTERRUPTED, is_error=True)]),
    ("orphaned_result_removed",
     [Message(U, "hi"), tool("zz", "from nowhere"), Message(A, "hello")],
     [Message(U, "hi"), Message(A, "hello")]),
    ("results_follow_their_calls_in_call_order",
     [Message(U, "hi"), Message(A, "", (C1, C2)), Message(U, "and?"), tool("c2", "sun"), tool("c1", "rain")],
     [Message(U, "hi"), Message(A, "", (C1, C2)), tool("c1", "rain"), tool("c2", "sun"), Message(U, "and?")]),
    ("a_second_result_for_one_call_dropped",
     [Message(U, "hi"), Message(A, "", (C1,)), tool("c1", "first"), tool("c1", "second")],
     [Message(U, "hi"), Message(A, "", (C1,)), tool("c1", "first")]),
    ("a_repeated_call_id_dropped",
     [Message(U, "hi"), Message(A, "", (C1, C1)), tool("c1", "rain"), Message(A, "", (C1,))],
     [Message(U, "hi"), Message(A, "", (C1,)), tool("c1", "rain")]),
    ("error_flag_kept",
     [Message(U, "hi"), Message(A, "", (C3,)), tool("c3", "boom", is_error=True)],
     [Message(U, "hi"), Message(A, "", (C3,)), tool("c3", "boom", is_error=True)]),
    ("nothing", [], []),
]


@pytest.mark.parametrize(("history", "valid"), [c[1:] for c in VALID_CASES], ids=[c[0] for c in VALID_CASES])
def test_provider_valid(history: list[Message], valid: list[Message]) -> None:
    assert list(provider_valid(history)) == valid


@pytest.mark.parametrize("history", [c[1] for c in VALID_CASES], ids=[c[0] for c in VALID_CASES])
def test_provider_valid_is_idempotent(history: list[Message]) -> None:
    once = provider_valid(history)
    assert provider_valid(once) == once


# --- OpenAI ---------------------------------------------------------------------------------------

OPENAI_CASES: list[tuple[str, str, list[Message], list[dict[str, Any]]]] = [
    ("system_first", "Be brief.", [Message(U, "hi")],
     [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]),
    ("no_empty_system", "  ", [Message(U, "hi")], [{"role": "user", "content": "hi"}]),
    ("pure_tool_calls_have_null_content", "", [Message(U, "hi"), Message(A, "", (C1, C3)), tool("c1", "r"), tool("c3", "t")],
     [{"role": "user", "content": "hi"},
      {"role": "assistant", "content": None, "tool_calls": [
          {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q":"rome"}'}},
          {"id": "c3", "type": "function", "function": {"name": "now", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "r"},
      {"role": "tool", "tool_call_id": "c3", "content": "t"}]),
    ("text_and_calls", "", [Message(U, "hi"), Message(A, "Looking.", (C3,)), tool("c3", "noon")],
     [{"role": "user", "content": "hi"},
      {"role": "assistant", "content": "Looking.", "tool_calls": [
          {"id": "c3", "type": "function", "function": {"name": "now", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "c3", "content": "noon"}]),
    ("invalid_arguments_sent_back_verbatim", "",
     [Message(U, "hi"), Message(A, "", (ToolCall("c9", "lookup", {"INVALID_JSON": '{"q": "ro'}),)), tool("c9", "?")],
     [{"role": "user", "content": "hi"},
      {"role": "assistant", "content": None, "tool_calls": [
          {"id": "c9", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "ro'}}]},
      {"role": "tool", "tool_call_id": "c9", "content": "?"}]),
    ("unicode_kept", "", [Message(U, "hi"), Message(A, "", (ToolCall("c1", "say", {"t": "café ☕"}),)), tool("c1", "ok")],
     [{"role": "user", "content": "hi"},
      {"role": "assistant", "content": None, "tool_calls": [
          {"id": "c1", "type": "function", "function": {"name": "say", "arguments": '{"t":"café ☕"}'}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "ok"}]),
]


@pytest.mark.parametrize(("system", "history", "wire"), [c[1:] for c in OPENAI_CASES], ids=[c[0] for c in OPENAI_CASES])
def test_openai_messages(system: str, history: list[Message], wire: list[dict[str, Any]]) -> None:
    assert openai_messages(system, history) == wire


def test_openai_request_sends_max_completion_tokens_and_tools() -> None:
    spec = ToolSpec("now", "The time.", {"type": "object", "properties": {}})
    body = openai_request("gpt-4o-mini", ModelRequest("s", (Message(U, "hi"),), tools=(spec,)))
    assert body["max_completion_tokens"] == 4096 and "max_tokens" not in body
    assert body["tools"] == [{"type": "function", "function": {"name": "now", "description": "The time.",
                                                               "parameters": {"type": "object", "properties": {}}}}]
    assert openai_request("m", ModelRequest("s", (Message(U, "hi"),), max_tokens=50))["max_completion_tokens"] == 50
    assert "tools" not in openai_request("m", ModelRequest("s", (Message(U, "hi"),)))


def _completion(message: dict[str, Any], *, finish: str = "stop", usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini-2024-07-18",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}


OPENAI_REPLIES: list[tuple[str, dict[str, Any], Reply]] = [
    ("text", _completion({"role": "assistant", "content": "Hi."}, usage={"prompt_tokens": 10, "completion_tokens": 2}),
     Reply("Hi.", usage=Usage(input=10, output=2), model="gpt-4o-mini-2024-07-18", finish="stop")),
    ("parallel_calls", _completion({"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "lookup", "arguments": '{"q":"rome"}'}},
        {"id": "call_b", "type": "function", "function": {"name": "now", "arguments": ""}}]}, finish="tool_calls"),
     Reply("", (ToolCall("call_a", "lookup", {"q": "rome"}), ToolCall("call_b", "now", {})),
           model="gpt-4o-mini-2024-07-18", finish="tool_calls")),
    ("arguments_not_an_object", _completion({"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "lookup", "arguments": '["rome"]'}}]}),
     Reply("", (ToolCall("call_a", "lookup", {"INVALID_JSON": '["rome"]'}),), model="gpt-4o-mini-2024-07-18",
           finish="stop")),
    ("refusal", _completion({"role": "assistant", "content": None, "refusal": "I can't help with that."}),
     Reply("I can't help with that.", model="gpt-4o-mini-2024-07-18", finish="stop")),
    ("cached_and_written_tokens", _completion({"role": "assistant", "content": "x"}, usage={
        "prompt_tokens": 3000, "completion_tokens": 7,
        "prompt_tokens_details": {"cached_tokens": 2000, "cache_write_tokens": 500}}),
     Reply("x", usage=Usage(input=500, cache_read=2000, cache_write=500, output=7), model="gpt-4o-mini-2024-07-18",
           finish="stop")),
]


@pytest.mark.parametrize(("body", "reply"), [c[1:] for c in OPENAI_REPLIES], ids=[c[0] for c in OPENAI_REPLIES])
def test_openai_reply(body: dict[str, Any], reply: Reply) -> None:
    assert openai_reply(body) == reply


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"error": {"code": 502, "message": "Provider returned error"}}, "Provider returned error"),
        ({"id": "x", "choices": [{"index": 0, "finish_reason": "error", "message": {"content": ""},
                                  "error": {"code": 500, "message": "upstream died"}}]}, "upstream died"),
        ({"id": "x", "choices": [{"index": 0, "finish_reason": "error", "message": {"content": "half"}}]}, "stopped"),
        ({"id": "x", "choices": []}, "no choices"),
        ({"id": "x"}, "no choices"),
        ({"error": "plain words"}, "plain words"),
    ],
    ids=["openrouter_200_error", "choice_error", "finish_error", "empty_choices", "no_choices", "error_string"],
)
def test_openai_reply_that_is_not_an_answer(body: dict[str, Any], words: str) -> None:
    with pytest.raises(NotAnAnswer, match=words):
        openai_reply(body)


def test_openai_200_error_keeps_its_code() -> None:
    with pytest.raises(NotAnAnswer) as caught:
        openai_reply({"error": {"code": 502, "message": "Provider returned error"}})
    assert caught.value.code == 502


# --- Anthropic ------------------------------------------------------------------------------------

ANTHROPIC_CASES: list[tuple[str, list[Message], list[dict[str, Any]]]] = [
    ("user_text", [Message(U, "hi")], [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]),
    ("tool_use_and_results_in_one_user_turn_results_first",
     [Message(U, "hi"), Message(A, "Looking.", (C1, C2)), tool("c2", "sun"), Message(U, "quick please"), tool("c1", "rain")],
     [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
      {"role": "assistant", "content": [
          {"type": "text", "text": "Looking."},
          {"type": "tool_use", "id": "c1", "name": "lookup", "input": {"q": "rome"}},
          {"type": "tool_use", "id": "c2", "name": "lookup", "input": {"q": "oslo"}}]},
      {"role": "user", "content": [
          {"type": "tool_result", "tool_use_id": "c1", "content": "rain"},
          {"type": "tool_result", "tool_use_id": "c2", "content": "sun"},
          {"type": "text", "text": "quick please"}]}]),
    ("pure_tool_use_has_no_text_block_and_errors_are_flagged",
     [Message(U, "hi"), Message(A, "", (C3,)), tool("c3", "boom", is_error=True)],
     [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
      {"role": "assistant", "content": [{"type": "tool_use", "id": "c3", "name": "now", "input": {}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c3", "content": "boom", "is_error": True}]}]),
    ("empty_result_has_no_content",
     [Message(U, "hi"), Message(A, "", (C3,)), tool("c3", "")],
     [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
      {"role": "assistant", "content": [{"type": "tool_use", "id": "c3", "name": "now", "input": {}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c3"}]}]),
    ("dangling_call_closed",
     [Message(U, "hi"), Message(A, "", (C3,))],
     [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
      {"role": "assistant", "content": [{"type": "tool_use", "id": "c3", "name": "now", "input": {}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c3", "content": INTERRUPTED,
                                    "is_error": True}]}]),
    ("final_assistant_whitespace_trimmed",
     [Message(U, "hi"), Message(A, "Sure.  \n")],
     [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
      {"role": "assistant", "content": [{"type": "text", "text": "Sure."}]}]),
    ("foreign_ids_rewritten_the_same_on_both_sides",
     [Message(U, "hi"), Message(A, "", (ToolCall("functions.now:0", "now"),)), tool("functions.now:0", "noon")],
     [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
      {"role": "assistant", "content": [{"type": "tool_use", "id": anthropic_id("functions.now:0"), "name": "now",
                                         "input": {}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": anthropic_id("functions.now:0"),
                                    "content": "noon"}]}]),
]


@pytest.mark.parametrize(("history", "wire"), [c[1:] for c in ANTHROPIC_CASES], ids=[c[0] for c in ANTHROPIC_CASES])
def test_anthropic_messages(history: list[Message], wire: list[dict[str, Any]]) -> None:
    assert anthropic_messages(history) == wire


@pytest.mark.parametrize("history", [c[1] for c in VALID_CASES], ids=[c[0] for c in VALID_CASES])
def test_anthropic_turns_alternate_and_every_tool_use_is_answered_next(history: list[Message]) -> None:
    turns = anthropic_messages(history)
    roles = [t["role"] for t in turns]
    assert all(a != b for a, b in itertools.pairwise(roles))
    for n, turn in enumerate(turns):
        assert turn["content"], "no empty turn"
        assert all(b.get("text", "x") for b in turn["content"]), "no empty text block"
        uses = [b["id"] for b in turn["content"] if b["type"] == "tool_use"]
        if uses:
            nxt = turns[n + 1]["content"]
            answered = [b["tool_use_id"] for b in nxt if b["type"] == "tool_result"]
            assert answered == uses
            kinds = [b["type"] for b in nxt]
            assert kinds == sorted(kinds, key=lambda k: k != "tool_result")


def test_anthropic_id() -> None:
    assert anthropic_id("toolu_01A-b") == "toolu_01A-b"
    rewritten = anthropic_id("functions.now:0")
    assert rewritten.startswith("functions_now_0_") and rewritten == anthropic_id("functions.now:0")
    assert anthropic_id("a.b") != anthropic_id("a:b")  # two ids never collapse into one


def test_anthropic_request_always_sends_max_tokens_and_system_as_a_field() -> None:
    spec = ToolSpec("now", "The time.", {"type": "object", "properties": {}})
    body = anthropic_request("claude-haiku-4-5", ModelRequest("Be brief.", (Message(U, "hi"),), tools=(spec,)))
    assert body["max_tokens"] == 4096
    assert body["system"] == "Be brief."
    assert all(m["role"] != "system" for m in body["messages"])
    assert body["tools"] == [{"name": "now", "description": "The time.", "input_schema": {"type": "object", "properties": {}}}]
    assert anthropic_request("m", ModelRequest("", (Message(U, "hi"),), max_tokens=9))["max_tokens"] == 9
    assert "system" not in anthropic_request("m", ModelRequest("", (Message(U, "hi"),)))


ANTHROPIC_REPLIES: list[tuple[str, dict[str, Any], Reply]] = [
    ("text", {"type": "message", "model": "claude-haiku-4-5", "content": [{"type": "text", "text": "Hi."}],
              "stop_reason": "end_turn", "usage": {"input_tokens": 10, "output_tokens": 3}},
     Reply("Hi.", usage=Usage(input=10, output=3), model="claude-haiku-4-5", finish="stop")),
    ("text_split_by_citations_joined", {"type": "message", "content": [
        {"type": "text", "text": "Rome is "}, {"type": "text", "text": "rainy."}], "stop_reason": "end_turn"},
     Reply("Rome is rainy.", finish="stop")),
    ("parallel_tool_use", {"type": "message", "content": [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "rome"}},
        {"type": "tool_use", "id": "toolu_2", "name": "now", "input": {}}], "stop_reason": "tool_use",
        "usage": {"input_tokens": 5, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 50,
                  "output_tokens": 9}},
     Reply("Checking.", (ToolCall("toolu_1", "lookup", {"q": "rome"}), ToolCall("toolu_2", "now", {})),
           usage=Usage(input=5, cache_read=100, cache_write=50, output=9), finish="tool_calls")),
    ("max_tokens", {"type": "message", "content": [{"type": "text", "text": "Trunc"}], "stop_reason": "max_tokens"},
     Reply("Trunc", finish="length")),
]


@pytest.mark.parametrize(("body", "reply"), [c[1:] for c in ANTHROPIC_REPLIES], ids=[c[0] for c in ANTHROPIC_REPLIES])
def test_anthropic_reply(body: dict[str, Any], reply: Reply) -> None:
    assert anthropic_reply(body) == reply


@pytest.mark.parametrize(
    ("body", "words"),
    [({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "Overloaded"),
     ({"type": "message"}, "no content")],
    ids=["error_body", "no_content"],
)
def test_anthropic_reply_that_is_not_an_answer(body: dict[str, Any], words: str) -> None:
    with pytest.raises(NotAnAnswer, match=words):
        anthropic_reply(body)


# --- across providers ------------------------------------------------------------------------------

def test_a_turn_read_from_one_provider_is_written_for_the_other() -> None:
    from_anthropic = anthropic_reply({"type": "message", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "rome"}}], "stop_reason": "tool_use"})
    history = [Message(U, "Rome?"), Message(A, from_anthropic.text, from_anthropic.tool_calls), tool("toolu_1", "rain")]
    assert openai_messages("", history)[1:] == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "toolu_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q":"rome"}'}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "rain"}]

    from_openai = openai_reply(_completion({"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_Xy9", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "oslo"}'}}]}))
    history = [Message(U, "Oslo?"), Message(A, from_openai.text, from_openai.tool_calls), tool("call_Xy9", "snow")]
    assert anthropic_messages(history)[1:] == [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "call_Xy9", "name": "lookup", "input": {"q": "oslo"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_Xy9", "content": "snow"}]}]


def test_the_same_history_always_translates_the_same() -> None:
    history = [Message(U, "hi"), Message(A, "", (C1, C2)), tool("c1", "rain")]
    assert openai_messages("s", history) == openai_messages("s", list(history))
    assert anthropic_messages(history) == anthropic_messages(list(history))


def test_a_four_turn_tool_history_begun_on_one_provider_is_replayed_on_the_other() -> None:
    """Turns 1-2 were answered by an OpenAI-shaped provider (ids call_…), turns 3-4 by Anthropic (toolu_…),
    and the fallback mid-conversation must be able to send the whole of it either way."""
    history = [
        Message(U, "Weather in Rome and Oslo?"),
        Message(A, "", (ToolCall("call_1", "lookup", {"q": "rome"}), ToolCall("call_2", "lookup", {"q": "oslo"}))),
        tool("call_1", "rain"), tool("call_2", "snow"),
        Message(A, "Rain in Rome, snow in Oslo."),
        Message(U, "And the time there?"),
        Message(A, "Let me check.", (ToolCall("toolu_3", "now"),)),
        tool("toolu_3", "12:00"),
        Message(A, "It is noon."),
    ]
    wire = anthropic_messages(history)
    assert [m["role"] for m in wire] == ["user", "assistant"] * 4
    # Every tool_use is answered, first thing, in the very next (single) user turn.
    for n, m in enumerate(wire):
        uses = [b["id"] for b in m["content"] if isinstance(m["content"], list) and b.get("type") == "tool_use"]
        if uses:
            nxt = wire[n + 1]["content"]
            assert [b["tool_use_id"] for b in nxt[: len(uses)]] == uses
    assert [b["tool_use_id"] for b in wire[2]["content"]] == ["call_1", "call_2"]  # both results, one turn
    assert wire[5]["content"][1] == {"type": "tool_use", "id": "toolu_3", "name": "now", "input": {}}

    oa = openai_messages("system words", history)
    assert oa[0] == {"role": "system", "content": "system words"}
    for n, m in enumerate(oa):
        for k, call in enumerate(m.get("tool_calls") or []):
            assert oa[n + 1 + k] == {"role": "tool", "tool_call_id": call["id"], "content": oa[n + 1 + k]["content"]}
    assert [m["role"] for m in oa[1:]] == ["user", "assistant", "tool", "tool", "assistant", "user",
                                           "assistant", "tool", "assistant"]
