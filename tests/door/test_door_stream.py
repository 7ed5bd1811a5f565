"""The door as voice front ends expect it (issue 30): the first word reaches the client while the model is still
talking — streamed from the provider through the run and the door, through the real openai SDK and as raw
server-sent events — a barge-in stops the model call and the bill at once and frees the person's place, and a
stream that breaks after its first words ends in an error event, never the provider's sentence as content."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace

import aiohttp

from tests.door.conftest import Harness
from tests.providers.fake_provider import openai_text, openai_tools

# About 7 s of answer: 35 words, the first 0.3 s after the call, then one every 0.2 s.
SEVEN_SECONDS = replace(openai_text(" ".join(f"word{n}" for n in range(35)) + ".", prompt=50, completion=36),
                        first=0.3, pace=0.2)


async def test_the_first_word_of_a_seven_second_answer_comes_while_the_model_is_still_talking(door: Harness) -> None:
    door.fake.always("openai", SEVEN_SECONDS)
    client = door.aclient(door.grant())
    stream = await client.chat.completions.create(model="caller", stream=True,
                                                  messages=[{"role": "user", "content": "Tell me a long story."}])
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            arrived = time.monotonic()
            first = chunk.choices[0].delta.content
            break
    await stream.close()
    [sent] = door.fake.first_sent
    assert first == "word0"
    assert arrived - sent <= 1.0, f"the first word came {arrived - sent:.3f}s after the provider sent it"
    assert door.provider_requests()[0]["stream"] is True


async def test_a_streamed_turn_says_every_word_once_and_its_usage_comes_from_the_stream(door: Harness) -> None:
    words = "Rain in Lyon this morning, then sun by noon. Take a coat."
    door.fake.always("openai", replace(openai_text(words, prompt=80, completion=14), first=0.05, pace=0.05))
    async with aiohttp.ClientSession() as http, http.post(
            f"{door.url}/chat/completions", headers={"Authorization": f"Bearer {door.grant()}"},
            json={"model": "caller", "stream": True, "stream_options": {"include_usage": True},
                  "messages": [{"role": "user", "content": "Weather?"}]}) as response:
        assert response.status == 200
        raw = (await response.read()).decode()
    events = [line[6:] for line in raw.split("\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    said = [c["choices"][0]["delta"].get("content") for c in chunks if c["choices"]]
    content = [s for s in said if s]
    assert "".join(content) == words
    assert len(content) >= 10  # word by word, as the provider said them, not the whole answer at the end
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] == 80
    assert chunks[-1]["usage"]["completion_tokens"] == 14


async def test_a_barge_in_stops_the_model_call_at_once_and_frees_the_place(door: Harness) -> None:
    """A 20 s answer cut off 0.8 s in, three times: each time the provider sees its caller go within 100 ms of
    the client closing the stream, the run ends cancelled and nothing more is paid for, and the next turn is
    taken (the person's live-run limit is three)."""
    door.fake.always("openai", replace(openai_text("word " * 200, prompt=50, completion=200), first=0.2, pace=0.1))
    client = door.aclient(door.grant())
    cut = []
    for n in range(3):
        stream = await client.chat.completions.create(model="caller", stream=True,
                                                      messages=[{"role": "user", "content": f"Story {n}?"}])
        first = await stream.__anext__()
        cut.append((first.model_extra or {})["summon"]["run"])
        await asyncio.sleep(0.8)
        closed = time.monotonic()
        await stream.close()
        while len(door.fake.drops) <= n:
            assert time.monotonic() - closed < 3, "the provider's call went on after the client left"
            await asyncio.sleep(0.005)
        assert door.fake.drops[n] - closed < 0.1, f"the provider saw its caller go {door.fake.drops[n] - closed:.3f}s later"

    async def all_ended() -> bool:
        return bool(await door.db.pool.fetchval(
            "SELECT bool_and(status = 'cancelled') FROM agent_runs WHERE id = ANY($1::bigint[])", cut))

    started = time.monotonic()
    while not await all_ended():
        assert time.monotonic() - started < 5, "the cut-off turns did not end"
        await asyncio.sleep(0.05)
    # Each stopped call is counted (at its worst case: nobody says what an aborted call used), once.
    steps = await door.db.pool.fetch("SELECT payload->>'error' AS error, (payload->>'interrupted')::bool AS cut, "
                                     "cost_usd FROM agent_steps WHERE run_id = ANY($1::bigint[]) AND kind = 'model'", cut)
    assert len(steps) == 3 and all(s["cut"] and s["cost_usd"] > 0 for s in steps), steps
    fourth = await client.chat.completions.create(model="caller", stream=True,
                                                  messages=[{"role": "user", "content": "And now?"}])
    first = await fourth.__anext__()  # a refusal would raise RateLimitError (too_many) here
    assert first.choices[0].delta.role == "assistant"
    await fourth.close()


async def test_a_stream_that_breaks_after_its_first_words_ends_in_an_error_event(door: Harness) -> None:
    door.fake.always("openai", replace(openai_text("One two three four five six."), pace=0.05, cut_after=4))
    async with aiohttp.ClientSession() as http, http.post(
            f"{door.url}/chat/completions", headers={"Authorization": f"Bearer {door.grant()}"},
            json={"model": "caller", "stream": True, "messages": [{"role": "user", "content": "Count."}]}) as response:
        raw = (await response.read()).decode()
    events = [line[6:] for line in raw.split("\n") if line.startswith("data: ")]
    assert "[DONE]" not in events
    said = "".join(json.loads(e)["choices"][0]["delta"].get("content") or ""
                   for e in events[:-1] if json.loads(e).get("choices"))
    assert said == "One two three"  # what was heard before it broke, once
    error = json.loads(events[-1])["error"]
    assert error["type"] == "server_error" and error["code"] == "failed"
    assert "could not" in error["message"] and "peer" not in error["message"].lower()
    assert len(door.provider_requests()) == 1  # never said again by another attempt


async def test_a_tool_step_says_nothing_to_the_client_and_the_answer_after_it_streams(door: Harness) -> None:
    door.fake.queue("openai", openai_tools(("call_1", "current_room", "{}")),
                    replace(openai_text("You are in no room right now."), pace=0.05))
    client = door.aclient(door.grant())
    stream = await client.chat.completions.create(model="caller", stream=True,
                                                  messages=[{"role": "user", "content": "Where am I?"}])
    content = [c.choices[0].delta.content async for c in stream if c.choices and c.choices[0].delta.content]
    assert "".join(content) == "You are in no room right now." and len(content) > 1
    assert len(door.provider_requests()) == 2
