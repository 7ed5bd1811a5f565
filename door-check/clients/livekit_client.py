"""LiveKit Agents' ``openai.LLM`` with ``timeout=8`` (its own default read timeout is 5 s): ``chat()`` read to its end,
or ``aclose()``d at the first words, as the agent does when the person talks over it."""

from __future__ import annotations

import asyncio
from typing import Any

from common import DOOR, GRANT, MODEL, main, now
from livekit.agents import llm
from livekit.plugins import openai


async def turn(words: str, barge: bool) -> dict[str, Any]:
    model = openai.LLM(model=MODEL, base_url=DOOR, api_key=GRANT, timeout=8)  # type: ignore[arg-type]
    try:
        context = llm.ChatContext.empty()
        context.add_message(role="user", content=words)
        sent = now()
        first: float | None = None
        text = ""
        stream = model.chat(chat_ctx=context)
        try:
            async for chunk in stream:
                if chunk.delta is not None and chunk.delta.content:
                    first = first or now()
                    text += chunk.delta.content
                    if barge:
                        await stream.aclose()
                        return {"text": text, "first_ms": (first - sent) * 1000, "closed_at": now()}
        finally:
            await stream.aclose()
        return {"text": text, "first_ms": None if first is None else (first - sent) * 1000, "sent_at": sent}
    finally:
        await model.aclose()


asyncio.run(main(turn))
