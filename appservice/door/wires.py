"""How a turn's answer is written on each of the door's two OpenAI wires: chat completions
(``POST /v1/chat/completions``) and the Responses API (``POST /v1/responses``). Pure: words in, bytes and dicts
out. One ``Wire`` a response: the same turn — its opening, each piece of words, its end with the usage, or its
failure after the first byte — in either wire's own events, so a client moving from one API to the other works
unchanged (openai-python's ``responses.create``/``.stream``, the AI SDK's default ``openai(model)``).

Responses API events are named as OpenAI names them (``event:`` and ``type``, with a ``sequence_number``):
``response.created``, ``response.in_progress``, ``response.output_item.added``, ``response.content_part.added``,
``response.output_text.delta`` …, then ``response.output_text.done``, ``response.content_part.done``,
``response.output_item.done`` and ``response.completed`` — or, after the first byte, ``error`` and
``response.failed`` and the end of the stream.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from appservice.door.shapes import chunk, completion, event, usage_chunk, usage_of
from appservice.door.waiting import HandedCall

Tokens = tuple[int, int]  # what the run's model calls used: in, out


class Wire(Protocol):
    def opening(self, summon: dict[str, Any]) -> list[bytes]:
        """What a streamed response says at once, before any word."""

    def said(self, text: str) -> bytes:
        """One piece of the answer's words."""

    def handed(self, calls: tuple[HandedCall, ...]) -> list[bytes]:
        """The client tools the model called, for the client to run (its next request brings the results)."""

    def closing(self, tokens: Tokens, summon: dict[str, Any], *, calls: bool = False) -> list[bytes]:
        """The end of a streamed response that answered (or, ``calls``, handed tools over): its usage, and
        whatever the wire ends with."""

    def failed(self, error: dict[str, Any]) -> list[bytes]:
        """The end of a streamed response that failed after its first byte (``error``: OpenAI's error object)."""

    def whole(self, text: str, tokens: Tokens, summon: dict[str, Any],
              calls: tuple[HandedCall, ...] = ()) -> dict[str, Any]:
        """A response that is not streamed: the answer (or the client tools called) in one object."""


class ChatWire:
    """Chat completions: ``chat.completion.chunk`` events and ``[DONE]``; the usage chunk when asked for."""

    def __init__(self, *, run_id: int, bot: str, created: int, include_usage: bool = False) -> None:
        self.run_id, self.bot, self.created, self.include_usage = run_id, bot, created, include_usage

    def _chunk(self, delta: dict[str, Any], **kw: Any) -> bytes:
        return event(chunk(run_id=self.run_id, bot=self.bot, created=self.created, delta=delta, **kw))

    def opening(self, summon: dict[str, Any]) -> list[bytes]:
        return [self._chunk({"role": "assistant", "content": ""}, summon=summon)]

    def said(self, text: str) -> bytes:
        return self._chunk({"content": text})

    def handed(self, calls: tuple[HandedCall, ...]) -> list[bytes]:
        return [self._chunk({"tool_calls": [_chat_call(n, call)]}) for n, call in enumerate(calls)]

    def closing(self, tokens: Tokens, summon: dict[str, Any], *, calls: bool = False) -> list[bytes]:
        out = [self._chunk({}, finish="tool_calls" if calls else "stop", summon=summon)]
        if self.include_usage:
            out.append(event(usage_chunk(run_id=self.run_id, bot=self.bot, created=self.created,
                                         usage=usage_of(*tokens))))
        return [*out, event("[DONE]")]

    def failed(self, error: dict[str, Any]) -> list[bytes]:
        return [event(error)]  # and no [DONE]

    def whole(self, text: str, tokens: Tokens, summon: dict[str, Any],
              calls: tuple[HandedCall, ...] = ()) -> dict[str, Any]:
        body = completion(run_id=self.run_id, bot=self.bot, created=self.created, text=text,
                          usage=usage_of(*tokens), summon=summon)
        if calls:
            choice = body["choices"][0]
            choice["message"]["tool_calls"] = [{k: v for k, v in _chat_call(n, c).items() if k != "index"}
                                               for n, c in enumerate(calls)]
            choice["message"]["content"] = text or None
            choice["finish_reason"] = "tool_calls"
        return body


class ResponsesWire:
    """The Responses API: one message item with one ``output_text`` part, its events numbered in order."""

    def __init__(self, *, run_id: int, bot: str, created: int) -> None:
        self.run_id, self.bot, self.created = run_id, bot, created
        self.id = f"resp_summon_{run_id}"
        self.item = f"msg_summon_{run_id}"
        self.text = ""
        self._seq = 0
        self._calls: list[dict[str, Any]] = []

    def _event(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()

    def _response(self, status: str, *, output: list[dict[str, Any]], usage: dict[str, Any] | None,
                  error: dict[str, Any] | None = None, summon: dict[str, Any] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.id, "object": "response", "created_at": self.created, "status": status, "model": self.bot,
            "output": output, "usage": usage, "error": error, "incomplete_details": None, "instructions": None,
            "metadata": {}, "parallel_tool_calls": False, "temperature": None, "top_p": None, "tool_choice": "auto",
            "tools": [], "text": {"format": {"type": "text"}}, "truncation": "disabled", "store": False,
            "previous_response_id": None, "reasoning": None, "service_tier": "default",
        }
        if summon is not None:
            body["summon"] = summon
        return body

    def _part(self) -> dict[str, Any]:
        return {"type": "output_text", "text": self.text, "annotations": [], "logprobs": []}

    def _message(self, status: str) -> dict[str, Any]:
        content = [self._part()] if status == "completed" else []
        return {"id": self.item, "type": "message", "status": status, "role": "assistant", "content": content}

    @staticmethod
    def _usage(tokens: Tokens) -> dict[str, Any]:
        tokens_in, tokens_out = tokens
        return {"input_tokens": tokens_in, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": tokens_out, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": tokens_in + tokens_out}

    def opening(self, summon: dict[str, Any]) -> list[bytes]:
        begun = self._response("in_progress", output=[], usage=None, summon=summon)
        return [
            self._event("response.created", response=begun),
            self._event("response.in_progress", response=begun),
            self._event("response.output_item.added", output_index=0, item=self._message("in_progress")),
            self._event("response.content_part.added", item_id=self.item, output_index=0, content_index=0,
                        part={"type": "output_text", "text": "", "annotations": [], "logprobs": []}),
        ]

    def said(self, text: str) -> bytes:
        self.text += text
        return self._event("response.output_text.delta", item_id=self.item, output_index=0, content_index=0,
                           delta=text, logprobs=[])

    def _function_call(self, n: int, call: HandedCall, status: str) -> dict[str, Any]:
        return {"id": f"fc_summon_{self.run_id}_{n}", "type": "function_call", "status": status, "call_id": call.id,
                "name": call.name, "arguments": call.arguments if status == "completed" else ""}

    def handed(self, calls: tuple[HandedCall, ...]) -> list[bytes]:
        out: list[bytes] = []
        for n, call in enumerate(calls):
            index = len(self._calls) + 1  # after the message item
            item = self._function_call(n, call, "in_progress")
            out += [
                self._event("response.output_item.added", output_index=index, item=item),
                self._event("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                            delta=call.arguments),
                self._event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                            arguments=call.arguments),
                self._event("response.output_item.done", output_index=index,
                            item=self._function_call(n, call, "completed")),
            ]
            self._calls.append(self._function_call(n, call, "completed"))
        return out

    def closing(self, tokens: Tokens, summon: dict[str, Any], *, calls: bool = False) -> list[bytes]:
        done = self._message("completed")
        return [
            self._event("response.output_text.done", item_id=self.item, output_index=0, content_index=0,
                        text=self.text, logprobs=[]),
            self._event("response.content_part.done", item_id=self.item, output_index=0, content_index=0,
                        part=self._part()),
            self._event("response.output_item.done", output_index=0, item=done),
            self._event("response.completed", response=self._response(
                "completed", output=[done, *self._calls], usage=self._usage(tokens), summon=summon)),
        ]

    def failed(self, error: dict[str, Any]) -> list[bytes]:
        inner = error.get("error") or {}
        said = {"code": inner.get("code"), "message": inner.get("message")}
        return [
            self._event("error", code=inner.get("code"), message=inner.get("message"), param=inner.get("param")),
            self._event("response.failed", response=self._response("failed", output=[], usage=None, error=said)),
        ]

    def whole(self, text: str, tokens: Tokens, summon: dict[str, Any],
              calls: tuple[HandedCall, ...] = ()) -> dict[str, Any]:
        self.text = text
        made = [self._function_call(n, call, "completed") for n, call in enumerate(calls)]
        output = [self._message("completed")] if text or not calls else []
        return self._response("completed", output=[*output, *made], usage=self._usage(tokens), summon=summon)


def _chat_call(index: int, call: HandedCall) -> dict[str, Any]:
    return {"index": index, "id": call.id, "type": "function", "function": {"name": call.name,
                                                                          "arguments": call.arguments}}
