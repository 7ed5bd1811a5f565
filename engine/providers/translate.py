"""Our message list ⇄ OpenAI chat completions ⇄ Anthropic Messages. Pure: data in, data out.

The neutral history (``engine.core.messages.Message``) is first made *provider-valid* (``provider_valid``),
then written in either wire shape; a reply in either wire shape is read back into one ``Reply``. So a
conversation begun on one provider can be replayed on the other mid-run: nothing provider-specific is
kept in the history.

Provider-valid means (the rules pydantic-ai's "making histories provider-valid" spells out, and the
bugs each one avoids):

- empty text is dropped ("text content blocks must be non-empty"); an assistant turn that is only tool
  calls carries no text (``content: null`` on OpenAI, no text block on Anthropic);
- consecutive same-role turns are merged (strict Anthropic-compatible endpoints refuse them);
- every tool call is answered right after the turn that made it, in the order it was made, all
  results before any words (parallel results are one user turn on Anthropic, tool_results first);
- a tool call left without a result (a cancelled or crashed run) is closed as interrupted, so the
  history stays valid on either provider ("tool_use ids were found without tool_result blocks");
- a tool result whose call is not in the history is removed.

The rules are deterministic and idempotent, and what they add carries no wall-clock data, so the same
history always translates to the same request (provider prompt caches stay warm).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from engine.core.messages import Message, ModelRequest, ToolCall, ToolSpec
from engine.errors import NotAnAnswer

# What the model is told about a tool call that never reported back (the worker records the same
# words as a step when it closes one; this covers a history that reached us without that step).
INTERRUPTED = (
    "This tool call was interrupted before its result was recorded; it may or may not have taken effect."
)

# Arguments that were not a JSON object are kept, verbatim, under this key (and sent back verbatim to
# OpenAI), so a truncated or malformed call is neither lost nor turned into something it did not say.
INVALID_JSON = "INVALID_JSON"


@dataclass(frozen=True)
class Usage:
    """Tokens as billed: ``input`` is uncached input only, cache reads and writes apart, then output."""

    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0

    @property
    def tokens_in(self) -> int:
        """Every input token, cached or not (what OpenAI calls ``prompt_tokens``)."""
        return self.input + self.cache_read + self.cache_write


@dataclass(frozen=True)
class Reply:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()
    model: str = ""  # as the provider reported it
    finish: str = ""  # "stop" | "length" | "tool_calls" | the provider's own word
    # False: the provider did not say what the call used (a stream without its usage chunk), so ``usage`` is no
    # bill and the call is counted at its worst case.
    usage_known: bool = True


# --- making a history provider-valid ----------------------------------------------------------------

def provider_valid(messages: Sequence[Message]) -> tuple[Message, ...]:
    results: dict[str, Message] = {}
    for m in messages:
        if m.role == "tool" and m.call_id is not None:
            results.setdefault(m.call_id, m)

    out: list[Message] = []
    seen_calls: set[str] = set()
    for m in messages:
        if m.role == "tool":
            continue  # placed right after the call it answers, or dropped as orphaned
        if m.role == "user":
            if not m.text.strip():
                continue
            if out and out[-1].role == "user":
                out[-1] = replace(out[-1], text=f"{out[-1].text}\n\n{m.text}")
            else:
                out.append(Message(role="user", text=m.text))
            continue
        calls = tuple(c for c in _unique(m.tool_calls) if c.id not in seen_calls)
        seen_calls.update(c.id for c in calls)
        text = m.text if m.text.strip() else ""
        if not text and not calls:
            continue
        # The previous turn cannot have calls: those are always followed by their results.
        if out and out[-1].role == "assistant":
            prev = out[-1]
            joined = f"{prev.text}\n\n{text}" if prev.text and text else prev.text or text
            out[-1] = Message(role="assistant", text=joined, tool_calls=calls)
        else:
            out.append(Message(role="assistant", text=text, tool_calls=calls))
        for call in calls:
            found = results.get(call.id)
            if found is None:
                out.append(Message(role="tool", text=INTERRUPTED, call_id=call.id, is_error=True))
            else:
                out.append(Message(role="tool", text=found.text, call_id=call.id, is_error=found.is_error))
    return tuple(out)


def _unique(calls: Sequence[ToolCall]) -> list[ToolCall]:
    seen: set[str] = set()
    kept: list[ToolCall] = []
    for c in calls:
        if c.id not in seen:
            seen.add(c.id)
            kept.append(c)
    return kept


def _arguments_json(arguments: Mapping[str, Any]) -> str:
    if set(arguments) == {INVALID_JSON} and isinstance(arguments[INVALID_JSON], str):
        raw: str = arguments[INVALID_JSON]
        return raw
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def _arguments_from_json(raw: object) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str) or not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {INVALID_JSON: raw}
    return parsed if isinstance(parsed, dict) else {INVALID_JSON: raw}


# --- OpenAI chat completions ------------------------------------------------------------------------

def openai_messages(system: str, messages: Sequence[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if system.strip():
        out.append({"role": "system", "content": system})
    for m in provider_valid(messages):
        if m.role == "user":
            out.append({"role": "user", "content": m.text})
        elif m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.call_id, "content": m.text})
        else:
            turn: dict[str, Any] = {"role": "assistant", "content": m.text or None}
            if m.tool_calls:
                turn["tool_calls"] = [
                    {"id": c.id, "type": "function",
                     "function": {"name": c.name, "arguments": _arguments_json(c.arguments)}}
                    for c in m.tool_calls
                ]
            out.append(turn)
    return out


def openai_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {"type": "function",
         "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in tools
    ]


def openai_request(model: str, request: ModelRequest) -> dict[str, Any]:
    """The keyword arguments of ``chat.completions.create``. ``max_tokens`` is deprecated there (and
    refused by reasoning models): the ceiling goes as ``max_completion_tokens``."""
    body: dict[str, Any] = {
        "model": model,
        "messages": openai_messages(request.system, request.messages),
        "max_completion_tokens": request.max_tokens,
    }
    if request.tools:
        body["tools"] = openai_tools(request.tools)
    return body


def openai_reply(body: Mapping[str, Any]) -> Reply:
    """Read a chat completion. An error in a 200 body (OpenRouter reports failures after generation
    started that way) raises ``NotAnAnswer``, as does a body with no choice in it."""
    if not isinstance(body, Mapping):
        raise NotAnAnswer("the provider's answer was not a JSON object")
    error = body.get("error")
    if error:
        raise _not_an_answer(error)
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise NotAnAnswer("the provider's answer had no choices in it")
    choice = choices[0]
    if choice.get("error"):
        raise _not_an_answer(choice["error"])
    if choice.get("finish_reason") == "error":
        raise NotAnAnswer("the provider stopped with an error")
    message = choice.get("message") or {}
    text = message.get("content")
    if not isinstance(text, str) or (not text and message.get("refusal")):
        text = message.get("refusal") if isinstance(message.get("refusal"), str) else ""
    calls: list[ToolCall] = []
    for raw in message.get("tool_calls") or []:
        function = raw.get("function") if isinstance(raw, Mapping) else None
        if not isinstance(function, Mapping):
            continue
        calls.append(ToolCall(
            id=str(raw.get("id") or f"call_{len(calls)}"),
            name=str(function.get("name") or ""),
            arguments=_arguments_from_json(function.get("arguments")),
        ))
    return Reply(
        text=text or "",
        tool_calls=tuple(calls),
        usage=openai_usage(body.get("usage")),
        model=str(body.get("model") or ""),
        finish=str(choice.get("finish_reason") or ""),
    )


def openai_usage(usage: object) -> Usage:
    """``prompt_tokens`` includes cached tokens (and, where reported, tokens written to the cache)."""
    if not isinstance(usage, Mapping):
        return Usage()
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, Mapping) else {}
    prompt = _int(usage.get("prompt_tokens"))
    read = _int(details.get("cached_tokens"))
    write = _int(details.get("cache_write_tokens"))
    return Usage(
        input=max(0, prompt - read - write), cache_read=read, cache_write=write,
        output=_int(usage.get("completion_tokens")),
    )


def _not_an_answer(error: object) -> NotAnAnswer:
    if isinstance(error, Mapping):
        message = error.get("message")
        return NotAnAnswer(str(message) if message else "the provider answered with an error",
                           code=error.get("code"))
    return NotAnAnswer(str(error) if error else "the provider answered with an error")


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


# --- Anthropic Messages -----------------------------------------------------------------------------

_ANTHROPIC_ID = re.compile(r"^[A-Za-z0-9_-]+$")


def anthropic_id(call_id: str) -> str:
    """Anthropic accepts tool ids of ``[A-Za-z0-9_-]`` only; other providers' ids (``functions.x:0``)
    are rewritten deterministically, with a hash so that two ids never collapse into one."""
    if _ANTHROPIC_ID.match(call_id):
        return call_id
    digest = hashlib.sha1(call_id.encode("utf-8")).hexdigest()[:8]
    return f"{re.sub(r'[^A-Za-z0-9_-]', '_', call_id)}_{digest}"


def anthropic_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for m in provider_valid(messages):
        role = "assistant" if m.role == "assistant" else "user"
        blocks: list[dict[str, Any]] = []
        if m.role == "tool":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": anthropic_id(m.call_id or "")}
            if m.text:
                block["content"] = m.text
            if m.is_error:
                block["is_error"] = True
            blocks.append(block)
        elif m.role == "user":
            blocks.append({"type": "text", "text": m.text})
        else:
            if m.text:
                blocks.append({"type": "text", "text": m.text})
            blocks.extend(
                {"type": "tool_use", "id": anthropic_id(c.id), "name": c.name, "input": dict(c.arguments)}
                for c in m.tool_calls
            )
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        # Tool results lead their user turn; words follow them.
        turn["content"].sort(key=lambda b: 0 if b["type"] == "tool_result" else 1)
    if turns and turns[-1]["role"] == "assistant":
        # Anthropic refuses a final assistant turn that ends in whitespace.
        for b in reversed(turns[-1]["content"]):
            if b["type"] == "text":
                b["text"] = b["text"].rstrip()
                break
    return turns


def anthropic_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]


def anthropic_request(model: str, request: ModelRequest) -> dict[str, Any]:
    """The keyword arguments of ``messages.create``: the system prompt is a field of its own, and
    ``max_tokens`` is always sent (Anthropic requires it)."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "messages": anthropic_messages(request.messages),
    }
    if request.system.strip():
        body["system"] = request.system
    if request.tools:
        body["tools"] = anthropic_tools(request.tools)
    return body


_ANTHROPIC_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls"}


def anthropic_reply(body: Mapping[str, Any]) -> Reply:
    if not isinstance(body, Mapping):
        raise NotAnAnswer("the provider's answer was not a JSON object")
    if body.get("type") == "error" or "error" in body:
        raise _not_an_answer(body.get("error"))
    content = body.get("content")
    if not isinstance(content, list):
        raise NotAnAnswer("the provider's answer had no content in it")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in content:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "tool_use":
            calls.append(ToolCall(
                id=str(block.get("id") or f"toolu_{len(calls)}"),
                name=str(block.get("name") or ""),
                arguments=_arguments_from_json(block.get("input")),
            ))
    stop = str(body.get("stop_reason") or "")
    return Reply(
        text="".join(texts),
        tool_calls=tuple(calls),
        usage=anthropic_usage(body.get("usage")),
        model=str(body.get("model") or ""),
        finish=_ANTHROPIC_FINISH.get(stop, stop),
    )


def anthropic_usage(usage: object) -> Usage:
    """``input_tokens`` excludes cache reads and writes (unlike OpenAI's ``prompt_tokens``)."""
    if not isinstance(usage, Mapping):
        return Usage()
    return Usage(
        input=_int(usage.get("input_tokens")),
        cache_read=_int(usage.get("cache_read_input_tokens")),
        cache_write=_int(usage.get("cache_creation_input_tokens")),
        output=_int(usage.get("output_tokens")),
    )


# --- streams ------------------------------------------------------------------------------------------
# A streamed answer is folded, event by event, into the body the same call would have answered unstreamed, and
# read by the same reader (``openai_reply``, ``anthropic_reply``): one set of rules for both. ``add`` returns the
# text the event adds (what a listener may hear at once); ``usage_known`` says whether the provider reported
# what the call used (OpenAI's final usage chunk, Anthropic's ``message_delta``) — until it has, a call cut off
# is counted at its worst case.


class OpenAIStream:
    """``chat.completion.chunk`` objects (as JSON) folded into the ``chat.completion`` they add up to."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._finish: str | None = None
        self._usage: object = None
        self._model = ""
        self._error: object = None

    @property
    def usage_known(self) -> bool:
        return isinstance(self._usage, Mapping)

    @property
    def text(self) -> str:
        return "".join(self._text)

    def add(self, chunk: Mapping[str, Any]) -> str:
        if not isinstance(chunk, Mapping):
            return ""
        if chunk.get("error"):
            self._error = chunk["error"]
            return ""
        if chunk.get("model"):
            self._model = str(chunk["model"])
        if isinstance(chunk.get("usage"), Mapping):
            self._usage = chunk["usage"]
        said: list[str] = []
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            if choice.get("error"):
                self._error = choice["error"]
            if choice.get("finish_reason"):
                self._finish = str(choice["finish_reason"])
            delta = choice.get("delta")
            if not isinstance(delta, Mapping):
                continue
            if isinstance(delta.get("content"), str) and delta["content"]:
                said.append(delta["content"])
            if isinstance(delta.get("refusal"), str):
                self._refusal.append(delta["refusal"])
            for raw in delta.get("tool_calls") or ():
                if not isinstance(raw, Mapping):
                    continue
                index = raw.get("index")
                call = self._calls.setdefault(index if isinstance(index, int) else len(self._calls),
                                              {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
                if raw.get("id"):
                    call["id"] = raw["id"]
                function = raw.get("function")
                if isinstance(function, Mapping):
                    if isinstance(function.get("name"), str) and function["name"]:
                        call["function"]["name"] = function["name"]
                    if isinstance(function.get("arguments"), str):
                        call["function"]["arguments"] += function["arguments"]
        self._text.extend(said)
        return "".join(said)

    def usage(self) -> Usage | None:
        """What the provider said the call used (None: nothing yet: OpenAI says it only at the end)."""
        return openai_usage(self._usage) if self.usage_known else None

    def body(self) -> dict[str, Any]:
        """The completion the chunks so far add up to."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text,
                                   "refusal": "".join(self._refusal) or None}
        if self._calls:
            message["tool_calls"] = [self._calls[i] for i in sorted(self._calls)]
        body: dict[str, Any] = {"object": "chat.completion", "model": self._model, "usage": self._usage,
                                "choices": [{"index": 0, "message": message, "finish_reason": self._finish}]}
        if self._error:
            body["error"] = self._error
        return body

    @property
    def finished(self) -> bool:
        """Whether the stream said its answer was over (a finish reason), not just stopped."""
        return self._finish is not None

    def reply(self) -> Reply:
        """What the stream answered; raises ``NotAnAnswer`` as ``openai_reply`` does (an error chunk, say)."""
        return replace(openai_reply(self.body()), usage_known=self.usage_known)


class AnthropicStream:
    """Messages stream events (``message_start`` … ``message_stop``, as JSON) folded into the message."""

    def __init__(self) -> None:
        self._message: dict[str, Any] = {"type": "message", "role": "assistant", "content": [], "model": "",
                                         "stop_reason": None, "usage": {}}
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}
        self._usage_final = False
        self._error: object = None

    @property
    def usage_known(self) -> bool:
        return self._usage_final

    @property
    def text(self) -> str:
        return "".join(b.get("text", "") for _, b in sorted(self._blocks.items()) if b.get("type") == "text")

    def add(self, event: Mapping[str, Any]) -> str:
        if not isinstance(event, Mapping):
            return ""
        kind = event.get("type")
        if kind == "error":
            self._error = event.get("error") or "the provider answered with an error"
        elif kind == "message_start" and isinstance(event.get("message"), Mapping):
            started = event["message"]
            self._message.update({k: v for k, v in started.items() if k != "content"})
            self._message["usage"] = dict(started.get("usage") or {})
        elif kind == "content_block_start" and isinstance(event.get("content_block"), Mapping):
            index = event.get("index")
            if isinstance(index, int):
                block = dict(event["content_block"])
                self._blocks[index] = block
                if block.get("type") == "text" and isinstance(block.get("text"), str):
                    return str(block["text"])
        elif kind == "content_block_delta" and isinstance(event.get("delta"), Mapping):
            index = event.get("index")
            found = self._blocks.get(index) if isinstance(index, int) else None
            delta = event["delta"]
            if found is None:
                return ""
            block = found
            if delta.get("type") == "text_delta" and isinstance(delta.get("text"), str):
                block["text"] = str(block.get("text") or "") + delta["text"]
                return str(delta["text"])
            if delta.get("type") == "input_json_delta" and isinstance(delta.get("partial_json"), str):
                self._json.setdefault(int(event["index"]), []).append(delta["partial_json"])
        elif kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, Mapping) and delta.get("stop_reason"):
                self._message["stop_reason"] = delta["stop_reason"]
            if isinstance(event.get("usage"), Mapping):
                # Cumulative counts; a field it leaves out (or null, as the SDK dumps it) stays as message_start said.
                said = {k: v for k, v in event["usage"].items() if v is not None}
                self._message["usage"] = {**self._message["usage"], **said}
                self._usage_final = True
        return ""

    def body(self) -> dict[str, Any]:
        """The message the events so far add up to."""
        content: list[dict[str, Any]] = []
        for index, block in sorted(self._blocks.items()):
            if block.get("type") == "tool_use" and index in self._json:
                block = {**block, "input": "".join(self._json[index])}
            content.append(block)
        body = {**self._message, "content": content}
        if self._error:
            body = {"type": "error", "error": self._error}
        return body

    @property
    def finished(self) -> bool:
        """Whether the stream said its answer was over (``message_delta``'s stop reason), not just stopped."""
        return self._message.get("stop_reason") is not None

    def reply(self) -> Reply:
        """What the stream answered; raises ``NotAnAnswer`` as ``anthropic_reply`` does (an error event, say)."""
        return replace(anthropic_reply(self.body()), usage_known=self.usage_known)

    def usage(self) -> Usage | None:
        """What the provider said the call used (None: not yet — ``message_start``'s is only the input)."""
        return anthropic_usage(self._message["usage"]) if self._usage_final else None
