"""Client tools (issue 30 item 5): the tools a bot's file says its front end runs (``client_tools:``: Caller's
``end_call`` and ``navigate``) are streamed to the client as ``delta.tool_calls`` with an ``index`` (and as the
Responses API's function-call events); the run waits for the client's next request to bring the results, and
that request's response is the run's answer. Any other tool — one a client sends, one the model makes up — is
never forwarded."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
import openai
import pytest

from tests.door.conftest import Harness
from tests.providers.fake_provider import openai_text, openai_tools


async def raw_turn(door: Harness, path: str, body: dict[str, Any], grant: str) -> list[dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.post(
            f"{door.url}/{path}", headers={"Authorization": f"Bearer {grant}"}, json=body) as response:
        assert response.status == 200, await response.text()
        raw = (await response.read()).decode()
    return [json.loads(line[6:]) for line in raw.split("\n") if line.startswith("data: {")]


async def test_a_declared_client_tool_is_streamed_to_the_client_and_its_result_continues_the_run(
        door: Harness) -> None:
    door.fake.queue("openai", openai_tools(("call_nav", "navigate", '{"page": "settings"}')),
                    openai_text("Your settings are open."))
    client = door.aclient(door.grant())
    asked = [{"role": "user", "content": "Open my settings."}]
    stream = await client.chat.completions.create(model="caller", stream=True, messages=asked)  # type: ignore[arg-type]
    chunks = [c async for c in stream]
    calls = [t for c in chunks if c.choices for t in (c.choices[0].delta.tool_calls or [])]
    assert [(t.index, t.id, t.type, t.function.name, json.loads(t.function.arguments or "{}")) for t in calls
            if t.function] == [(0, "call_nav", "function", "navigate", {"page": "settings"})]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    run = (chunks[0].model_extra or {})["summon"]["run"]
    # The client ran it, and says so in its next request: the same run answers.
    then = await client.chat.completions.create(model="caller", stream=True, messages=[  # type: ignore[arg-type]
        *asked,
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_nav", "type": "function", "function": {"name": "navigate", "arguments": '{"page": "settings"}'}}]},
        {"role": "tool", "tool_call_id": "call_nav", "content": "opened settings"}])
    after = [c async for c in then]
    assert "".join(c.choices[0].delta.content or "" for c in after if c.choices) == "Your settings are open."
    assert (after[0].model_extra or {})["summon"]["run"] == run
    assert await door.db.pool.fetchval("SELECT count(*) FROM agent_runs") == 1
    second = door.provider_requests()[1]
    assert {"role": "tool", "tool_call_id": "call_nav", "content": "opened settings"}.items() <= \
        next(m for m in second["messages"] if m["role"] == "tool").items()


async def test_a_client_tool_on_an_unstreamed_turn_is_a_tool_call_message(door: Harness) -> None:
    door.fake.queue("openai", openai_tools(("call_bye", "end_call", "{}")), openai_text("Goodbye!"))
    client = door.aclient(door.grant())
    first = await client.chat.completions.create(model="caller", messages=[{"role": "user", "content": "Bye."}])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.tool_calls is not None
    [call] = choice.message.tool_calls
    assert (call.id, call.function.name, call.function.arguments) == ("call_bye", "end_call", "{}")  # type: ignore[union-attr]
    done = await client.chat.completions.create(model="caller", messages=[
        {"role": "user", "content": "Bye."}, {"role": "tool", "tool_call_id": "call_bye", "content": "call ended"}])
    assert done.choices[0].message.content == "Goodbye!" and done.choices[0].finish_reason == "stop"


async def test_a_client_tool_on_the_responses_api_is_a_function_call_item(door: Harness) -> None:
    door.fake.queue("openai", openai_tools(("call_bye", "end_call", "{}")), openai_text("Goodbye!"))
    grant = door.grant()
    events = await raw_turn(door, "responses", {"model": "caller", "stream": True, "input": "Bye."}, grant)
    kinds = [e["type"] for e in events]
    assert "response.function_call_arguments.done" in kinds and kinds[-1] == "response.completed"
    added = next(e for e in events if e["type"] == "response.output_item.added" and e["item"]["type"] == "function_call")
    assert (added["item"]["call_id"], added["item"]["name"]) == ("call_bye", "end_call")
    assert [o["type"] for o in events[-1]["response"]["output"]] == ["message", "function_call"]
    client = door.aclient(grant)
    done = await client.responses.create(model="caller", input=[
        {"type": "function_call", "call_id": "call_bye", "name": "end_call", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_bye", "output": "call ended"}])
    assert done.output_text == "Goodbye!"


async def test_a_tool_the_bot_does_not_declare_is_never_forwarded(door: Harness) -> None:
    door.fake.queue("openai", openai_tools(("call_x", "transfer_money", '{"to": "mallory"}')),
                    openai_text("I cannot do that."))
    events = await raw_turn(door, "chat/completions", {
        "model": "caller", "stream": True, "messages": [{"role": "user", "content": "Pay Mallory."}],
        "tools": [{"type": "function", "function": {"name": "transfer_money", "parameters": {"type": "object"}}}]},
        door.grant())
    assert not any(e["choices"][0]["delta"].get("tool_calls") for e in events if e.get("choices"))
    assert "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices")) == \
        "I cannot do that."
    first, second = door.provider_requests()
    assert "transfer_money" not in [t["function"]["name"] for t in first["tools"]]
    told = next(m for m in second["messages"] if m["role"] == "tool")
    assert "no tool named 'transfer_money'" in told["content"]
    assert await door.db.pool.fetchval("SELECT count(*) FROM door_client_calls") == 0


async def test_a_result_no_call_waits_for_is_refused(door: Harness) -> None:
    client = door.aclient(door.grant())
    with pytest.raises(openai.ConflictError) as caught:
        await client.chat.completions.create(model="caller", messages=[
            {"role": "user", "content": "Bye."}, {"role": "tool", "tool_call_id": "call_nobody", "content": "ok"}])
    assert caught.value.code == "no_such_call"
    # Another session's call is not this one's to answer.
    door.fake.queue("openai", openai_tools(("call_theirs", "end_call", "{}")), openai_text("Goodbye!"))
    theirs = door.aclient(door.grant(person="@bob:localhost"))
    await theirs.chat.completions.create(model="caller", messages=[{"role": "user", "content": "Bye."}])
    with pytest.raises(openai.ConflictError):
        await client.chat.completions.create(model="caller", messages=[
            {"role": "tool", "tool_call_id": "call_theirs", "content": "ok"}])


async def test_a_client_that_never_answers_leaves_the_model_told_so(door: Harness) -> None:
    door.fake.queue("openai", openai_tools(("call_bye", "end_call", "{}")), openai_text("I could not end the call."))
    client = door.aclient(door.grant())
    started = time.monotonic()
    first = await client.chat.completions.create(model="caller", messages=[{"role": "user", "content": "Bye."}])
    assert first.choices[0].finish_reason == "tool_calls"
    while await door.db.pool.fetchval("SELECT status FROM agent_runs") != "done":
        assert time.monotonic() - started < 10, "the run waited on forever"
        await asyncio.sleep(0.1)
    second = door.provider_requests()[1]
    told = next(m for m in second["messages"] if m["role"] == "tool")
    assert "did not say what came of end_call" in told["content"]
