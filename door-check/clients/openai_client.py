"""openai-python's streamed chat completion, closed at the first words for a barge-in."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
from common import DOOR, GRANT, MODEL, main, now


async def turn(words: str, barge: bool) -> dict[str, Any]:
    async with openai.AsyncOpenAI(base_url=DOOR, api_key=GRANT, max_retries=0) as client:
        sent = now()
        first: float | None = None
        text = ""
        stream = await client.chat.completions.create(model=MODEL, stream=True,
                                                      messages=[{"role": "user", "content": words}])
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                first = first or now()
                text += chunk.choices[0].delta.content
                if barge:
                    await stream.close()
                    return {"text": text, "first_ms": (first - sent) * 1000, "closed_at": now()}
        return {"text": text, "first_ms": None if first is None else (first - sent) * 1000, "sent_at": sent}


asyncio.run(main(turn))
