"""Desk message → the bot's answer, as the widget sees it: the time from posting a contact's message
(``POST …/messages``) to the bot's answer arriving as the first ``message_created`` on the conversation's event
stream (server-sent events), on the same service and the same scripted zero-latency model as the Matrix figure
(``python -m tests.bench`` runs it after the Matrix rounds and prints it beside them).

One contact, one conversation, the content's offered bot (``support``) chosen once; each round posts a
message carrying the model's scripted answer and waits for it on the stream the reader already holds open.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

import aiohttp

from tests.book import BOOK

ROUND_TIMEOUT = 30.0
SLUG = "support"


class DeskBenchError(Exception):
    """The desk rounds could not run."""


@dataclass
class DeskRound:
    sent_at: float
    posted_at: float  # the POST returned
    seen_at: float  # the bot's answer arrived on the stream

    @property
    def ms(self) -> float:
        return (self.seen_at - self.sent_at) * 1000


class Stream:
    """The conversation's event stream, read in the background: each bot answer's arrival time."""

    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        self.resp = resp
        self.answers: asyncio.Queue[tuple[float, dict[str, Any]]] = asyncio.Queue()

    async def read(self) -> None:
        fields: dict[str, str] = {}
        async for raw in self.resp.content:
            line = raw.decode().rstrip("\n")
            if line:
                key, _, value = line.partition(": ")
                fields[key] = value
                continue
            if fields.get("event") == "message_created":
                data = json.loads(fields.get("data", "{}"))
                if data.get("bot") and data.get("message_type") == "outgoing":
                    self.answers.put_nowait((time.monotonic(), data))
            fields = {}


async def measure(address: str, inbox: str, rounds: int, warmup: int, pause: float) -> list[DeskRound]:
    base = f"{address}/public/api/v1/inboxes/{inbox}"
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{base}/contacts", json={"name": "bench"}) as resp:
            contact = await resp.json()
        headers = {"Authorization": f"Bearer {contact['pubsub_token']}"}
        conversations = f"{base}/contacts/{contact['source_id']}/conversations"
        async with http.post(conversations, json={}, headers=headers) as resp:
            conversation = (await resp.json())["id"]
        messages = f"{conversations}/{conversation}/messages"
        async with http.get(f"{conversations}/{conversation}/events", headers=headers,
                            timeout=aiohttp.ClientTimeout(total=None)) as events:
            stream = Stream(events)
            reader = asyncio.ensure_future(stream.read())
            try:
                await _choose(http, messages, headers, stream)
                out: list[DeskRound] = []
                for i in range(warmup + rounds):
                    sent_at = time.monotonic()
                    BOOK.say(f"ping {i}", [{"text": f"pong {i}"}])
                    async with http.post(messages, headers=headers, json={"content": f"ping {i}"}) as resp:
                        if resp.status != 200:
                            raise DeskBenchError(f"round {i}: {resp.status} {await resp.text()}")
                    posted_at = time.monotonic()
                    seen_at = await _answer(stream, f"pong {i}")
                    if i >= warmup:
                        out.append(DeskRound(sent_at, posted_at, seen_at))
                    await asyncio.sleep(pause)
                return out
            finally:
                reader.cancel()


async def _choose(http: aiohttp.ClientSession, messages: str, headers: dict[str, str], stream: Stream) -> None:
    """Write once so the offer comes, and choose the bot: it has the conversation from then on."""
    BOOK.say("hello", [{"text": "hi"}])  # and the bot chosen is asked it again
    async with http.post(messages, headers=headers, json={"content": "hello"}) as resp:
        if resp.status != 200:
            raise DeskBenchError(f"the first message: {resp.status} {await resp.text()}")
    async with http.get(messages, headers=headers) as resp:
        offer = next((m for m in await resp.json() if m["message_type"] == "template"), None)
    if offer is None:
        raise DeskBenchError(f"no bot was offered (is {SLUG} an offer: ask bot on the desk?)")
    async with http.patch(f"{messages}/{offer['id']}", headers=headers, json={
            "submitted_values": [{"value": f"bot:{SLUG}"}]}) as resp:
        if resp.status != 200:
            raise DeskBenchError(f"choosing {SLUG}: {resp.status} {await resp.text()}")
    await _answer(stream, "hi")


async def _answer(stream: Stream, text: str) -> float:
    deadline = time.monotonic() + ROUND_TIMEOUT
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise DeskBenchError(f"no answer {text!r} on the stream within {ROUND_TIMEOUT:.0f} s")
        try:
            seen_at, data = await asyncio.wait_for(stream.answers.get(), left)
        except TimeoutError:
            continue
        if data.get("content") == text:
            return seen_at
