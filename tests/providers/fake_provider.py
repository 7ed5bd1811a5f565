"""A local fake provider: an aiohttp server on 127.0.0.1 (a random port) that speaks the real OpenAI
chat-completions and Anthropic Messages wire formats — their success bodies, tool calls, usage fields,
and their real error bodies and status codes — and records every request it got.

Answers are queued per route (``openai`` = ``POST /v1/chat/completions``, ``anthropic`` =
``POST /v1/messages``); a request with nothing queued gets ``otherwise`` when one is set, else a 500 that
says so, and is recorded, so a test that did not expect it fails on its assertions.

A request that asks to stream (``"stream": true``) gets the same answer as the real wire streams it: OpenAI's
``chat.completion.chunk`` events (and the final usage chunk when ``stream_options.include_usage`` asks for it,
then ``[DONE]``), Anthropic's ``message_start`` … ``message_stop`` events — word by word: the opening event at
once, the next after ``first`` seconds (``first_sent`` says when) and the rest every ``pace``. A stream may be
cut off after ``cut_after`` events, or end in a provider's error event after ``error_after``. When a caller goes
away before its answer is all sent, the moment the fake saw it go is in ``drops`` (``time.monotonic``).

It counts what a provider's own limits would: requests being answered at once (``in_flight``, the most
ever in ``most_in_flight``) and when each arrived (``arrivals``, ``time.monotonic``), so a test can check
that every worker together kept its limits.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from aiohttp import web

Route = Literal["openai", "anthropic"]
PATHS: dict[str, Route] = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}


@dataclass(frozen=True)
class Canned:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: str | None = None  # sent verbatim instead of ``body`` (for a body that is not JSON)
    delay: float = 0.0  # seconds before answering (a provider too slow to wait for)
    # Usage reported as a model that talks to the limit would bill it: every token of the request's own
    # ``max_completion_tokens`` / ``max_tokens`` as output, and its input at about four bytes of JSON a token
    # (English prose's rate — what a real tokenizer would report, and well under summon's bound of one a byte).
    fill: bool = False
    # Streamed (a request with ``"stream": true``): the opening event at once, the next after ``first`` seconds, each
    # after that ``pace`` later;
    # cut off (the connection closed) after ``cut_after`` events, or a provider's error event after ``error_after``.
    first: float = 0.0
    pace: float = 0.0
    cut_after: int | None = None
    error_after: int | None = None


@dataclass(frozen=True)
class Received:
    route: Route
    path: str
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any]


class FakeProvider:
    def __init__(self) -> None:
        self.requests: list[Received] = []
        self._queued: dict[Route, deque[Canned]] = {"openai": deque(), "anthropic": deque()}
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.otherwise: dict[Route, Canned] = {}  # the answer when nothing is queued on a route
        self.in_flight = 0
        self.most_in_flight = 0
        self.arrivals: list[float] = []
        self.drops: list[float] = []  # when a caller went away before its answer was all sent
        self.first_sent: list[float] = []  # when each stream's first words went out

    def most_within(self, seconds: float) -> int:
        """The most requests that arrived within any ``seconds`` (a sliding window over ``arrivals``)."""
        times = sorted(self.arrivals)
        most, first = 0, 0
        for last, at in enumerate(times):
            while at - times[first] >= seconds:
                first += 1
            most = max(most, last - first + 1)
        return most

    @property
    def openai_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def queue(self, route: Route, *answers: Canned) -> None:
        self._queued[route].extend(answers)

    def always(self, route: Route, answer: Canned) -> None:
        """Answer every request on ``route`` with ``answer`` once the queue is empty."""
        self.otherwise[route] = answer

    def received(self, route: Route | None = None) -> list[Received]:
        return [r for r in self.requests if route is None or r.route == route]

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/v1/messages", self._handle)
        # A caller going away cancels its handler at once, so the moment it went is seen, not the next write.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        sockets = getattr(server, "sockets", None)
        assert sockets
        self.port = sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.arrivals.append(time.monotonic())
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            return await self._answer(request)
        except asyncio.CancelledError:
            self.drops.append(time.monotonic())
            raise
        finally:
            self.in_flight -= 1

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        route = PATHS[request.path]
        headers = {k.lower(): v for k, v in request.headers.items()}
        body = await request.json()
        self.requests.append(Received(route, request.path, headers, body))
        if not self._queued[route] and route not in self.otherwise:
            return web.json_response({"error": {"message": "fake server: nothing queued"}}, status=500)
        canned = self._queued[route].popleft() if self._queued[route] else self.otherwise[route]
        if canned.fill:
            canned = filled(route, canned, body)
        if canned.delay:
            await asyncio.sleep(canned.delay)
        if body.get("stream") and canned.status == 200 and canned.raw is None:
            return await self._stream(request, route, canned, body)
        if canned.raw is not None:
            return web.Response(status=canned.status, text=canned.raw, headers=canned.headers,
                                content_type="application/json")
        return web.Response(status=canned.status, text=json.dumps(canned.body), headers=canned.headers,
                            content_type="application/json")


    async def _stream(self, request: web.Request, route: Route, canned: Canned,
                      body: dict[str, Any]) -> web.StreamResponse:
        usage = route == "anthropic" or bool((body.get("stream_options") or {}).get("include_usage"))
        events = streamed(route, canned.body, usage=usage)
        response = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream",
                                                           "Cache-Control": "no-cache", **canned.headers})
        await response.prepare(request)
        for n, payload in enumerate(events):
            if n == canned.cut_after:
                assert request.transport is not None
                request.transport.close()  # cut off mid-way: no end, no [DONE]
                return response
            if n == canned.error_after:
                await response.write(stream_error(route))
                break
            # The opening event (the role chunk, message_start) at once, as a provider's is; the first words after
            # ``first``; the rest at ``pace``.
            if n:
                await asyncio.sleep(canned.first if n == 1 else canned.pace)
            if n == 1:
                self.first_sent.append(time.monotonic())
            await response.write(payload)
        await response.write_eof()
        return response


def stream_error(route: Route) -> bytes:
    """A provider's own error, mid-stream, as each wire sends it."""
    if route == "openai":
        return _sse({"error": {"message": "The server had an error while processing your request.",
                               "type": "server_error", "param": None, "code": None}})
    return _sse({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "error")


def _sse(data: object, name: str | None = None) -> bytes:
    head = f"event: {name}\n" if name else ""
    text = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {text}\n\n".encode()


def _words(text: str) -> list[str]:
    """``text`` in the pieces a model streams it in: each word with the space before it."""
    return re.findall(r"\s*\S+", text) or ([text] if text else [])


def streamed(route: Route, body: Any, *, usage: bool = True) -> list[bytes]:
    """The events that stream ``body`` (a success body in ``route``'s wire shape), word by word."""
    if route == "openai":
        return _openai_stream(body, usage=usage)
    return _anthropic_stream(body)


def _openai_stream(body: dict[str, Any], *, usage: bool) -> list[bytes]:
    base = {"id": body.get("id", "chatcmpl-x"), "object": "chat.completion.chunk", "created": body.get("created", 0),
            "model": body.get("model", ""), "system_fingerprint": body.get("system_fingerprint")}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _sse({**base, "choices": [choice], **({"usage": None} if usage else {})})

    choice = body["choices"][0]
    message = choice["message"]
    out = [chunk({"role": "assistant", "content": "", "refusal": None})]
    out += [chunk({"content": word}) for word in _words(message.get("content") or "")]
    for index, call in enumerate(message.get("tool_calls") or []):
        out.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                          "function": {"name": call["function"]["name"], "arguments": ""}}]}))
        arguments = call["function"]["arguments"]
        out += [chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[i:i + 8]}}]})
                for i in range(0, len(arguments), 8)]
    out.append(chunk({}, choice.get("finish_reason") or "stop"))
    if usage:
        out.append(_sse({**base, "choices": [], "usage": body.get("usage")}))
    out.append(_sse("[DONE]"))
    return out


def _anthropic_stream(body: dict[str, Any]) -> list[bytes]:
    used = body.get("usage") or {}
    start = {**body, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {**used, "output_tokens": 1}}
    out = [_sse({"type": "message_start", "message": start}, "message_start")]
    for index, block in enumerate(body.get("content") or []):
        if block.get("type") == "text":
            out.append(_sse({"type": "content_block_start", "index": index,
                             "content_block": {"type": "text", "text": ""}}, "content_block_start"))
            out += [_sse({"type": "content_block_delta", "index": index,
                          "delta": {"type": "text_delta", "text": word}}, "content_block_delta")
                    for word in _words(block["text"])]
        else:
            out.append(_sse({"type": "content_block_start", "index": index,
                             "content_block": {**block, "input": {}}}, "content_block_start"))
            arguments = json.dumps(block.get("input") or {})
            out += [_sse({"type": "content_block_delta", "index": index,
                          "delta": {"type": "input_json_delta", "partial_json": arguments[i:i + 8]}},
                         "content_block_delta") for i in range(0, len(arguments), 8)]
        out.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    out.append(_sse({"type": "message_delta", "delta": {"stop_reason": body.get("stop_reason"), "stop_sequence": None},
                     "usage": {"output_tokens": used.get("output_tokens", 0)}}, "message_delta"))
    out.append(_sse({"type": "message_stop"}, "message_stop"))
    return out


def filled(route: Route, canned: Canned, request: dict[str, Any]) -> Canned:
    """``canned`` with the usage a model that used every output token it was allowed would report."""
    sent = {k: v for k, v in request.items() if k in ("system", "messages", "tools")}
    prompt = len(json.dumps(sent, ensure_ascii=False).encode("utf-8")) // 4
    body = json.loads(json.dumps(canned.body))
    if route == "openai":
        completion = int(request["max_completion_tokens"])
        body["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion,
                         "total_tokens": prompt + completion}
        body["choices"][0]["finish_reason"] = "length"
    else:
        body["usage"] = {"input_tokens": prompt, "output_tokens": int(request["max_tokens"]),
                         "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        body["stop_reason"] = "max_tokens"
    return replace(canned, body=body, fill=False)


def closed_port() -> int:
    """A loopback port nothing listens on (connection refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


# --- the real wire bodies -------------------------------------------------------------------------

def openai_text(text: str, *, prompt: int = 120, cached: int = 0, completion: int = 8,
                model: str = "gpt-4o-mini-2024-07-18") -> Canned:
    return Canned(body={
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", "object": "chat.completion", "created": 1741569952,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None,
                                             "annotations": []},
                     "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                  "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
                  "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                                "accepted_prediction_tokens": 0,
                                                "rejected_prediction_tokens": 0}},
        "service_tier": "default", "system_fingerprint": "fp_06737a9306",
    })


def openai_tools(*calls: tuple[str, str, str], prompt: int = 80, completion: int = 20) -> Canned:
    """``calls`` as (id, name, arguments JSON text), all in one message (parallel tool calls)."""
    return Canned(body={
        "id": "chatcmpl-abc123", "object": "chat.completion", "created": 1699896916, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {
            "role": "assistant", "content": None, "refusal": None, "annotations": [],
            "tool_calls": [{"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                           for i, n, a in calls]},
            "logprobs": None, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    })


def openai_error(status: int, message: str, *, type: str | None, code: str | int | None = None,
                 param: str | None = None, headers: dict[str, str] | None = None) -> Canned:
    error: dict[str, Any] = {"message": message, "type": type, "param": param, "code": code}
    return Canned(status=status, body={"error": error}, headers=headers or {})


OPENAI_INSUFFICIENT_QUOTA = openai_error(
    429, "You exceeded your current quota, please check your plan and billing details. For more information "
         "on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
    type="insufficient_quota", code="insufficient_quota")
OPENAI_RATE_LIMITED = openai_error(
    429, "Rate limit reached for gpt-4o-mini in organization org-abc on requests per min (RPM): Limit 3, "
         "Used 3, Requested 1. Please try again in 1s.",
    type="requests", code="rate_limit_exceeded", headers={"retry-after": "1"})
OPENAI_INVALID = openai_error(
    400, "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
         "'tool_calls'.", type="invalid_request_error", param="messages.[1].role")
OPENAI_CONTEXT = openai_error(
    400, "This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 "
         "tokens. Please reduce the length of the messages.",
    type="invalid_request_error", param="messages", code="context_length_exceeded")
OPENAI_MODEL_NOT_FOUND = openai_error(
    404, "The model `gpt-9` does not exist or you do not have access to it.",
    type="invalid_request_error", code="model_not_found")
OPENAI_BAD_KEY = openai_error(
    401, "Incorrect API key provided: sk-proj-****abcd. You can find your API key at "
         "https://platform.openai.com/account/api-keys.", type="invalid_request_error", code="invalid_api_key")
OPENROUTER_NO_CREDIT = Canned(status=402, body={"error": {
    "code": 402, "message": "Insufficient credits. Add more using https://openrouter.ai/settings/credits"}})
OPENROUTER_ERROR_IN_200 = Canned(status=200, body={
    "error": {"code": 502, "message": "Provider returned error",
              "metadata": {"raw": "upstream connect error", "provider_name": "Fireworks"}},
    "user_id": "user_2abc"})
OPENAI_SERVER_ERROR = openai_error(500, "The server had an error while processing your request. Sorry about that!",
                                   type="server_error")


def anthropic_text(text: str, *, input: int = 100, cache_read: int = 0, cache_write: int = 0, output: int = 10,
                   model: str = "claude-haiku-4-5-20251001") -> Canned:
    return Canned(body={
        "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF", "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": input, "cache_creation_input_tokens": cache_write,
                  "cache_read_input_tokens": cache_read, "output_tokens": output, "service_tier": "standard"},
    })


def anthropic_tools(text: str, *calls: tuple[str, str, dict[str, Any]]) -> Canned:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
    return Canned(body={
        "id": "msg_01Aq9w938a90dw8q", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
        "content": content, "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 300, "cache_creation_input_tokens": None, "cache_read_input_tokens": None,
                  "output_tokens": 40},
    })


def anthropic_error(status: int, type: str, message: str, *, headers: dict[str, str] | None = None) -> Canned:
    return Canned(status=status, headers=headers or {}, body={
        "type": "error", "error": {"type": type, "message": message}, "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"})


ANTHROPIC_NO_CREDIT = anthropic_error(
    400, "invalid_request_error", "Your credit balance is too low to access the Anthropic API. Please go to "
                                  "Plans & Billing to upgrade or purchase credits.")
ANTHROPIC_INVALID = anthropic_error(
    400, "invalid_request_error", "messages.1.content.0: unexpected `tool_use_id` found in `tool_result` blocks: "
                                  "toolu_x. Each `tool_result` block must have a corresponding `tool_use` block "
                                  "in the previous message.")
ANTHROPIC_OVERLOADED = anthropic_error(529, "overloaded_error", "Overloaded")
ANTHROPIC_MODEL_NOT_FOUND = anthropic_error(404, "not_found_error", "model: claude-nope")
ANTHROPIC_TOO_LARGE = anthropic_error(413, "request_too_large", "Request exceeds the maximum allowed number of bytes.")
ANTHROPIC_RATE_LIMITED = anthropic_error(
    429, "rate_limit_error", "This request would exceed the rate limit for your organization of 50,000 input "
                             "tokens per minute.", headers={"retry-after": "30"})
ANTHROPIC_BAD_KEY = anthropic_error(401, "authentication_error", "invalid x-api-key")
