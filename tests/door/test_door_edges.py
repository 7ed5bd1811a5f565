"""The door as front ends expect it at its edges (issue 30 items 3 and 4): a failed turn is an error — an HTTP
status before the first byte, an ``error`` event after it — never the provider's sentence as an answer; ``model``
names the grant's bot or nothing; ``/v1/models/{id}``; unknown routes and methods in OpenAI's error shape; a
request id on every response; ``Retry-After`` on a ceiling; keep-alives well inside a client's read timeout.
Through the real ``openai`` SDK, and raw HTTP where the SDK hides what is on the wire."""

from __future__ import annotations

import asyncio
import itertools
import json
import time

import httpx
import openai
import pytest

from appservice.config import Door as DoorConfig
from engine.core.limits import Ceilings
from tests.door.conftest import KEYS, Harness
from tests.providers.fake_provider import OPENAI_INVALID, Canned, openai_text

pytestmark = pytest.mark.db

PROVIDERS_OWN_WORDS = "must be a response to a preceeding message"  # in OPENAI_INVALID's message
KEEPALIVE = 0.4


@pytest.fixture
def door_config() -> DoorConfig:
    return DoorConfig(keys=KEYS, signing_key="k1", wait_seconds=20.0, check_seconds=2.0, max_body_size=8192,
                      keepalive_seconds=KEEPALIVE)


async def ending_of(door: Harness, run_id: int) -> str | None:
    return await door.db.pool.fetchval("SELECT ending FROM agent_runs WHERE id = $1", run_id)


async def test_a_failed_turn_is_an_http_error_in_openais_shape_not_an_answer(door: Harness) -> None:
    door.fake.queue("openai", OPENAI_INVALID)
    client = door.client(door.grant())
    with pytest.raises(openai.InternalServerError) as caught:
        await asyncio.to_thread(client.chat.completions.create, model="caller",
                                messages=[{"role": "user", "content": "Hello?"}])
    assert caught.value.status_code == 502
    body = caught.value.body
    assert isinstance(body, dict) and body["code"] == "failed" and body["type"] == "server_error"
    assert PROVIDERS_OWN_WORDS not in json.dumps(body)
    run_id = int(caught.value.response.headers["X-Summon-Run"])
    assert await ending_of(door, run_id) == "failed"


async def test_a_streamed_turn_that_fails_ends_with_an_error_event_the_sdk_raises(door: Harness) -> None:
    door.fake.queue("openai", OPENAI_INVALID)
    client = door.aclient(door.grant())
    stream = await client.chat.completions.create(model="caller", stream=True,
                                                  messages=[{"role": "user", "content": "Hello?"}])
    seen = []
    with pytest.raises(openai.APIError) as caught:
        async for part in stream:
            seen.append(part)
    assert seen and seen[0].choices[0].delta.role == "assistant"  # the first byte went at once
    assert not any(c.choices and c.choices[0].delta.content for c in seen)  # no words: the failure is no answer
    assert PROVIDERS_OWN_WORDS not in str(caught.value)
    assert isinstance(caught.value.body, dict) and caught.value.body.get("code") == "failed"


async def test_on_the_wire_the_error_event_is_the_last_and_there_is_no_done(door: Harness) -> None:
    door.fake.queue("openai", OPENAI_INVALID)
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(f"{door.url}/chat/completions", headers={"Authorization": f"Bearer {door.grant()}"},
                                   json={"model": "caller", "stream": True,
                                         "messages": [{"role": "user", "content": "Hello?"}]})
    assert response.status_code == 200
    events = [line.removeprefix("data: ") for line in response.text.splitlines() if line.startswith("data: ")]
    assert "[DONE]" not in events
    last = json.loads(events[-1])
    assert last["error"]["code"] == "failed" and last["error"]["type"] == "server_error"
    assert PROVIDERS_OWN_WORDS not in response.text


async def test_a_front_end_may_ask_for_the_bots_own_apology_instead(door: Harness) -> None:
    door.fake.queue("openai", OPENAI_INVALID)
    client = door.client(door.grant())
    done = await asyncio.to_thread(client.chat.completions.create, model="caller",
                                   messages=[{"role": "user", "content": "Hello?"}], extra_body={"summon": {"apology": True}})
    extra = done.model_extra or {}
    assert extra["summon"]["ending"] == "failed"
    assert PROVIDERS_OWN_WORDS not in (done.choices[0].message.content or "")


async def test_a_model_that_is_not_the_grants_bot_is_not_found_and_names_the_bot(door: Harness) -> None:
    client = door.client(door.grant())
    with pytest.raises(openai.NotFoundError) as caught:
        await asyncio.to_thread(client.chat.completions.create, model="gpt-4o-mini",
                                messages=[{"role": "user", "content": "Hello?"}])
    body = caught.value.body
    assert isinstance(body, dict) and body["code"] == "model_not_found" and body["param"] == "model"
    assert "'caller'" in body["message"]
    assert await door.db.pool.fetchval("SELECT count(*) FROM agent_runs") == 0  # nothing asked, nothing paid
    # Another of our bots is a grant used for another bot: refused as a forged grant is.
    with pytest.raises(openai.AuthenticationError):
        await asyncio.to_thread(client.chat.completions.create, model="roomy",
                                messages=[{"role": "user", "content": "Hello?"}])


async def test_models_retrieve_gives_the_grants_bot_and_nothing_else(door: Harness) -> None:
    client = door.client(door.grant())
    model = await asyncio.to_thread(client.models.retrieve, "caller")
    assert (model.id, model.object, model.owned_by) == ("caller", "model", "summon")
    for other in ("roomy", "gpt-4o"):
        with pytest.raises(openai.NotFoundError) as caught:
            await asyncio.to_thread(client.models.retrieve, other)
        assert isinstance(caught.value.body, dict) and caught.value.body["code"] == "model_not_found"
    with pytest.raises(openai.AuthenticationError):
        await asyncio.to_thread(door.client("forged").models.retrieve, "caller")


async def test_unknown_routes_and_methods_answer_in_openais_shape(door: Harness) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        missing = await http.post(f"{door.url}/embeddings", json={})
        wrong = await http.get(f"{door.url}/chat/completions")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "unknown_url" and "/v1/embeddings" in missing.json()["error"]["message"]
    assert wrong.status_code == 405 and wrong.headers["Allow"] == "POST"
    assert wrong.json()["error"]["code"] == "method_not_allowed"


async def test_every_response_carries_a_request_id(door: Harness) -> None:
    grant = {"Authorization": f"Bearer {door.grant()}"}
    door.fake.queue("openai", openai_text("Hi."), openai_text("Hi again."))
    turn = {"model": "caller", "messages": [{"role": "user", "content": "Hi?"}]}
    async with httpx.AsyncClient(timeout=30) as http:
        echoed = await http.post(f"{door.url}/chat/completions", headers={**grant, "X-Request-Id": "fe-1234.a"},
                                 json=turn)
        streamed = await http.post(f"{door.url}/chat/completions", headers=grant, json={**turn, "stream": True})
        insane = await http.get(f"{door.url}/models", headers={**grant, "X-Request-Id": "a b\tc"})
        refused = await http.get(f"{door.url}/models", headers={"Authorization": "Bearer nope"})
        missing = await http.get(f"{door.url}/nowhere")
    assert echoed.status_code == 200 and echoed.headers["x-request-id"] == "fe-1234.a"
    assert streamed.status_code == 200 and streamed.headers["x-request-id"].startswith("req_")
    assert insane.headers["x-request-id"].startswith("req_")
    assert refused.status_code == 401 and refused.headers["x-request-id"].startswith("req_")
    assert missing.headers["x-request-id"].startswith("req_")
    ids = {r.headers["x-request-id"] for r in (streamed, insane, refused, missing)}
    assert len(ids) == 4  # one of its own each


async def test_a_ceiling_says_when_to_try_again(door: Harness) -> None:
    door.fake.queue("openai", Canned(body=openai_text("One.").body, delay=1.5))
    client = door.aclient(door.grant(ceilings=Ceilings(steps=4, spend=0.01, minutes=1, per={"minute": 0.015})))
    first = asyncio.ensure_future(client.chat.completions.create(
        model="caller", messages=[{"role": "user", "content": "One?"}]))
    started = time.monotonic()
    while not door.fake.received() and time.monotonic() - started < 10:
        await asyncio.sleep(0.05)
    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model="caller", messages=[{"role": "user", "content": "Two?"}])
    assert isinstance(caught.value.body, dict) and caught.value.body["code"] == "ceiling"
    retry_after = int(caught.value.response.headers["Retry-After"])
    assert 1 <= retry_after <= 60  # within the minute the ceiling is over
    await first


async def test_keepalives_come_well_inside_a_clients_read_timeout(door: Harness) -> None:
    assert DoorConfig.model_fields["keepalive_seconds"].default < 5.0  # LiveKit's client read timeout
    door.fake.queue("openai", Canned(body=openai_text("At last.").body, delay=2.0))
    arrivals: list[tuple[float, str]] = []
    async with httpx.AsyncClient(timeout=30) as http:
        async with http.stream("POST", f"{door.url}/chat/completions",
                               headers={"Authorization": f"Bearer {door.grant()}"},
                               json={"model": "caller", "stream": True,
                                     "messages": [{"role": "user", "content": "Take your time."}]}) as response:
            async for line in response.aiter_lines():
                if line:
                    arrivals.append((time.monotonic(), line))
    working = [at for at, line in arrivals if line == ": working"]
    assert len(working) >= 3  # a 2 s answer, a comment every 0.4 s
    waits = [b - a for a, b in itertools.pairwise(working)]
    # Never near a silence a client would time out on: under 2 s apart, where the default (2.5 s) or a keep-alive
    # that ignored its setting would not be — and with room for a loaded machine's scheduling.
    assert max(waits) < 2.0
    said = [json.loads(line[6:]) for _, line in arrivals if line.startswith("data: {")]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in said if c.get("choices")) == "At last."


async def test_a_client_gone_while_its_turn_is_being_asked_gets_its_run_cancelled_not_cut_off(door: Harness) -> None:
    """The gap the handler's own cancel missed: the client goes after its request is read, while the run is being
    committed. Cut off there, the ask could have committed all the same (the commit went through, the reply did
    not arrive) and left a run that nobody cancels and that is paid for; so the ask is never cut off — it
    finishes, and the run it made is cancelled. Held here by a lock on agent_runs, so the ask is still waiting to
    commit when the client goes."""
    door.fake.queue("openai", Canned(body=openai_text("Nobody hears this.").body, delay=5.0))
    async with door.db.pool.acquire() as holder:
        lock = holder.transaction()
        await lock.start()
        await holder.execute("LOCK TABLE agent_runs IN SHARE ROW EXCLUSIVE MODE")  # inserts wait
        async with httpx.AsyncClient(timeout=0.5) as http:
            with pytest.raises(httpx.ReadTimeout):  # the client gives up and goes while the ask waits
                await http.post(f"{door.url}/chat/completions", headers={"Authorization": f"Bearer {door.grant()}"},
                                json={"model": "caller", "messages": [{"role": "user", "content": "Hello?"}]})
        await asyncio.sleep(0.3)
        await lock.rollback()

    async def cancelled() -> bool:
        row = await door.db.pool.fetchrow("SELECT status, cancel_requested FROM agent_runs ORDER BY id DESC LIMIT 1")
        return row is not None and row["cancel_requested"] and row["status"] in ("cancelled", "queued", "running")

    started = time.monotonic()
    while not await cancelled():
        assert time.monotonic() - started < 10, "the run made for a client that went away was never cancelled"
        await asyncio.sleep(0.1)


async def test_barge_ins_free_the_persons_live_run_places_at_once(door: Harness) -> None:
    """Three turns cut off 0.8 s into long answers (a barge-in closes the stream): the next turn is taken at once,
    while the three are still being made — not refused as one too many until they end."""
    door.fake.always("openai", Canned(body=openai_text("A long answer.").body, delay=8.0))
    client = door.aclient(door.grant())
    cut = []
    for n in range(3):
        stream = await client.chat.completions.create(model="caller", stream=True,
                                                      messages=[{"role": "user", "content": f"Story {n}?"}])
        first = await stream.__anext__()
        cut.append((first.model_extra or {})["summon"]["run"])
        await asyncio.sleep(0.8)
        await stream.close()

    async def all_asked_to_stop() -> bool:
        return bool(await door.db.pool.fetchval(
            "SELECT bool_and(cancel_requested) FROM agent_runs WHERE id = ANY($1::bigint[])", cut))

    started = time.monotonic()
    while not await all_asked_to_stop():
        assert time.monotonic() - started < 5, "the cut-off turns were not cancelled"
        await asyncio.sleep(0.05)
    # (Their calls are stopped at once now, so they end before long: tests/door/test_door_stream.py times that.)
    fourth = await client.chat.completions.create(model="caller", stream=True,
                                                  messages=[{"role": "user", "content": "And now?"}])
    first = await fourth.__anext__()  # a refusal would raise RateLimitError (too_many) here
    assert first.choices[0].delta.role == "assistant"
    await fourth.close()
