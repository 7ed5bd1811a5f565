"""The chaos run's model: the tests' fake provider (real OpenAI and Anthropic wire formats) answering like a real
one — a tool call first (``search_site``), then the answer, each after a realistic, jittered latency — and able to
fail every call, or hang, on the primary route while a scenario says so. The backup (Anthropic-shaped) route
always answers: it is the fallback a failing primary falls to."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
from typing import Any, Literal

from aiohttp import web

from tests.providers.fake_provider import (
    PATHS,
    FakeProvider,
    anthropic_text,
    anthropic_tools,
    openai_error,
    openai_text,
    openai_tools,
)

Mode = Literal["ok", "fail", "hang"]


class ChaosProvider(FakeProvider):
    def __init__(self, *, first: float = 0.6, second: float = 0.9, jitter: float = 0.3, seed: int = 29) -> None:
        """``first``/``second``: seconds the tool call and the answer take (± ``jitter`` of that)."""
        super().__init__()
        self.first, self.second, self.jitter = first, second, jitter
        self.mode: Mode = "ok"
        self.rng = random.Random(seed)
        self.calls = {"openai": 0, "anthropic": 0}
        self.failed = 0
        self.hung = 0

    async def serve_on(self, host: str, port: int) -> None:
        """Listen on ``host:port`` (an address inside a test's own network namespace) instead of a loopback port."""
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/v1/messages", self._handle)
        app.router.add_post("/control", self._control)  # {"first": s, "second": s}: the latency from now on
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1, handler_cancellation=True)
        await self._runner.setup()
        await web.TCPSite(self._runner, host, port).start()
        self.port = port

    async def _control(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.first, self.second = float(body["first"]), float(body["second"])
        return web.json_response({})

    def _latency(self, base: float) -> float:
        return base * (1 + self.rng.uniform(-self.jitter, self.jitter))

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        route = PATHS[request.path]
        body: dict[str, Any] = await request.json()
        self.calls[route] += 1
        if route == "openai" and self.mode == "fail":
            self.failed += 1
            canned = openai_error(500, "The server had an error while processing your request.", type="server_error")
            return web.Response(status=canned.status, text=json.dumps(canned.body), content_type="application/json")
        if route == "openai" and self.mode == "hang":
            self.hung += 1
            await asyncio.sleep(3600)  # never answers; the caller's deadline ends it
        answered = _has_tool_result(route, body.get("messages") or [])
        await asyncio.sleep(self._latency(self.second if answered else self.first))
        if route == "openai":
            canned = openai_text("Here is what the docs say.") if answered else \
                openai_tools(("call_1", "search_site", json.dumps({"query": "getting started"})))
        else:
            canned = anthropic_text("Here is what the docs say.") if answered else \
                anthropic_tools("", ("toolu_1", "search_site", {"query": "getting started"}))
        if body.get("stream"):
            return await self._stream(request, route, canned, body)
        return web.Response(status=canned.status, text=json.dumps(canned.body), content_type="application/json")


async def _serve(args: argparse.Namespace) -> None:
    provider = ChaosProvider(first=args.first, second=args.second, jitter=args.jitter)
    await provider.serve_on(args.host, args.port)
    print("ready", flush=True)
    await asyncio.Event().wait()


def _has_tool_result(route: str, messages: list[dict[str, Any]]) -> bool:
    if route == "openai":
        return any(m.get("role") == "tool" for m in messages)
    return any(isinstance(m.get("content"), list) and any(
        isinstance(part, dict) and part.get("type") == "tool_result" for part in m["content"]) for m in messages)


if __name__ == "__main__":
    # ``python -m tests.chaos.provider --host H --port P``: the provider as a process of its own (on another host:
    # inside a worker's network namespace, tests/chaos/hosts.py), until it is killed.
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--first", type=float, default=0.6)
    parser.add_argument("--second", type=float, default=0.9)
    parser.add_argument("--jitter", type=float, default=0.3)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(parser.parse_args()))
