"""``POST /v1/responses``: the same turn on the Responses API (issue 30 item 4), through openai-python's own
``responses.create`` and ``responses.stream`` (which checks the events it is sent, in order) and as raw events:
the answer, streamed word by word with OpenAI's event names, the usage, and a failure as an error — before the
first byte a status, after it an ``error`` and ``response.failed`` event."""

from __future__ import annotations

import json
from dataclasses import replace

import aiohttp
import openai
import pytest

from tests.door.conftest import Harness
from tests.providers.fake_provider import OPENAI_INVALID, openai_text

WORDS = "Rain in Lyon this morning, then sun."


async def test_a_turn_on_the_responses_api_is_answered_whole(door: Harness) -> None:
    door.fake.always("openai", openai_text(WORDS, prompt=60, completion=9))
    client = door.aclient(door.grant())
    response = await client.responses.create(model="caller", input="Weather in Lyon?")
    assert response.output_text == WORDS and response.status == "completed" and response.model == "caller"
    assert response.usage is not None and (response.usage.input_tokens, response.usage.output_tokens) == (60, 9)
    # The request's items, and input_text parts, are read too.
    again = await client.responses.create(model="caller", input=[
        {"role": "system", "content": "ignored"},
        {"role": "user", "content": [{"type": "input_text", "text": "And tomorrow?"}]}])
    assert again.output_text == WORDS
    assert door.provider_requests()[-1]["messages"][-1]["content"].endswith("alice:localhost: And tomorrow?")


async def test_a_streamed_responses_turn_sends_openais_events_word_by_word(door: Harness) -> None:
    door.fake.always("openai", replace(openai_text(WORDS, prompt=60, completion=9), first=0.05, pace=0.05))
    client = door.aclient(door.grant())
    async with client.responses.stream(model="caller", input="Weather?") as stream:
        deltas = [e.delta async for e in stream if e.type == "response.output_text.delta"]
        final = await stream.get_final_response()
    assert "".join(deltas) == WORDS and len(deltas) >= 5
    assert final.output_text == WORDS and final.usage is not None and final.usage.output_tokens == 9
    async with aiohttp.ClientSession() as http, http.post(
            f"{door.url}/responses", headers={"Authorization": f"Bearer {door.grant()}"},
            json={"model": "caller", "stream": True, "input": "Weather?"}) as response:
        raw = (await response.read()).decode()
    names = [line[7:] for line in raw.split("\n") if line.startswith("event: ")]
    assert names[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert set(names[4:-4]) == {"response.output_text.delta"}
    assert names[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.completed"]
    numbers = [json.loads(line[6:])["sequence_number"] for line in raw.split("\n") if line.startswith("data: ")]
    assert numbers == list(range(len(names)))


async def test_a_responses_turn_that_fails_is_an_error_before_and_after_the_first_byte(door: Harness) -> None:
    door.fake.always("openai", OPENAI_INVALID)
    client = door.aclient(door.grant())
    with pytest.raises(openai.InternalServerError) as caught:
        await client.responses.create(model="caller", input="Weather?")
    assert caught.value.status_code == 502 and "Nothing was answered" in caught.value.message
    door.fake.always("openai", replace(openai_text("One two three four."), pace=0.05, cut_after=3))
    async with aiohttp.ClientSession() as http, http.post(
            f"{door.url}/responses", headers={"Authorization": f"Bearer {door.grant()}"},
            json={"model": "caller", "stream": True, "input": "Count."}) as response:
        raw = (await response.read()).decode()
    names = [line[7:] for line in raw.split("\n") if line.startswith("event: ")]
    assert names[-2:] == ["error", "response.failed"] and "response.completed" not in names
    said = [json.loads(line[6:]) for line in raw.split("\n") if line.startswith("data: ")]
    assert "".join(e.get("delta", "") for e in said if e["type"] == "response.output_text.delta") == "One two"
    assert said[-2]["code"] == "failed" and said[-1]["response"]["status"] == "failed"


async def test_a_responses_request_without_a_user_turn_is_a_400_in_openais_shape(door: Harness) -> None:
    client = door.aclient(door.grant())
    for given in ([{"role": "assistant", "content": "hi"}], 3):
        with pytest.raises(openai.BadRequestError) as caught:
            await client.responses.create(model="caller", input=given)  # type: ignore[arg-type]
        assert caught.value.code in ("no_user_message", "invalid_input")
    with pytest.raises(openai.NotFoundError) as missing:
        await client.responses.create(model="gpt-4o-mini", input="hi")
    assert missing.value.code == "model_not_found"
