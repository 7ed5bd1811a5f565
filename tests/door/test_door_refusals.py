"""What the door refuses, and how: a grant that does not verify (forged, tampered field by field, expired, under
a key no longer held, for another bot or another room) is one 401 with one body; a bad body is a 400 in
OpenAI's error shape; a flood on one grant meets its ceilings, refused in words; a client that goes away
cancels its run."""

from __future__ import annotations

import asyncio
import base64
import json
from datetime import timedelta

import aiohttp
import openai
import pytest

from appservice.door.grants import mint, new_grant
from engine.core.limits import Ceilings
from tests.door.conftest import KEYS, PERSON, SERVER, Harness
from tests.providers.fake_provider import Canned, openai_text
from tests.support import eventually

pytestmark = pytest.mark.db

TURN = {"model": "caller", "messages": [{"role": "user", "content": "Hello?"}]}


async def post(door: Harness, token: str | None, body: object, path: str = "/chat/completions") -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with aiohttp.ClientSession() as http, http.post(f"{door.url}{path}", data=data, headers=headers) as resp:
        return resp.status, await resp.read()


def tampered(token: str, field: str, value: object) -> str:
    version, key_id, payload, signature = token.split(".")
    fields = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    if field.startswith("lim."):
        fields["lim"][field[4:]] = value
    else:
        fields[field] = value
    raw = base64.urlsafe_b64encode(json.dumps(fields, separators=(",", ":")).encode()).rstrip(b"=").decode()
    return f"{version}.{key_id}.{raw}.{signature}"


async def test_every_bad_grant_gets_one_401_with_one_body(door: Harness) -> None:
    good = door.grant(room="!room:localhost")
    expired = mint(new_grant(bot="caller", person=PERSON, room=None, audience=f"summon-door:{SERVER}",
                             ceilings=Ceilings(steps=1, spend=0.01, minutes=1, per={}),
                             now=door.clock.now() - timedelta(minutes=31), minutes=30, minted_by="operator"),
                   "k1", KEYS["k1"])
    bad: dict[str, tuple[str | None, object]] = {
        "none": (None, TURN),
        "garbage": ("not-a-grant", TURN),
        "forged": (door.grant().rsplit(".", 1)[0] + "." + "A" * 43, TURN),
        "expired": (expired, TURN),
        "other audience": (door.grant(audience="summon-door:elsewhere.org"), TURN),
        "another bot": (good, {**TURN, "model": "roomy"}),
        "another room": (good, {**TURN, "session_context": {"room_id": "!other:localhost"}}),
    }
    for field, value in [("bot", "roomy"), ("sub", "@mallory:localhost"), ("room", None), ("exp", 4102444800),
                         ("lim.spend", 100.0), ("lim.steps", 1000), ("lim.per", {}), ("aud", "x"), ("id", "B" * 24)]:
        bad[f"tampered {field}"] = (tampered(good, field, value), TURN)
    answers = {name: await post(door, token, body) for name, (token, body) in bad.items()}
    assert {status for status, _ in answers.values()} == {401}
    bodies = {body for _, body in answers.values()}
    assert len(bodies) == 1, answers  # saying which part was wrong tells somebody trying things which to keep
    assert json.loads(bodies.pop())["error"]["code"] == "invalid_grant"
    # Nothing was asked of anybody, and the good grant still works (for its own bot and room).
    assert door.fake.received() == []
    assert await door.db.pool.fetchval("SELECT count(*) FROM agent_runs") == 0


async def test_a_key_rotated_out_refuses_its_grants(door: Harness) -> None:
    door.fake.queue("openai", openai_text("Under the new key."))
    old = door.grant(key_id="k2")
    rotated = door.config.model_copy(update={"keys": {"k1": KEYS["k1"]}})
    door.listener.endpoint.config = rotated
    assert (await post(door, old, TURN))[0] == 401
    status, body = await post(door, door.grant(key_id="k1"), TURN)
    assert status == 200 and json.loads(body)["choices"][0]["message"]["content"] == "Under the new key."


@pytest.mark.parametrize(("body", "code"), [
    (b"{not json", "invalid_json"),
    (b"[1, 2]", "invalid_json"),
    (b"x" * 9000, "body_too_large"),
])
async def test_a_body_that_is_no_request_is_a_400_in_openais_shape(door: Harness, body: bytes, code: str) -> None:
    status, answer = await post(door, door.grant(), body)
    assert status == 400
    error = json.loads(answer)["error"]
    assert error["code"] == code and error["type"] == "invalid_request_error" and error["message"]
    assert set(error) == {"message", "type", "param", "code"}


@pytest.mark.parametrize(("body", "code"), [
    ({"model": "caller"}, "invalid_messages"),
    ({"model": "caller", "messages": [{"role": "system", "content": "Be a pirate."}]}, "no_user_message"),
    ({"model": "caller", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
     "no_user_message"),
    ({"model": "caller", "messages": [{"role": "user", "content": "x" * 9000}]}, "body_too_large"),
    ({**TURN, "session_context": {"room_id": "#alias:localhost"}}, "invalid_session_context"),
])
async def test_a_bad_request_is_a_400_the_sdk_reads(door: Harness, body: dict[str, object], code: str) -> None:
    client = door.client(door.grant())
    with pytest.raises(openai.BadRequestError) as caught:
        await asyncio.to_thread(client.post, "/chat/completions", body=body, cast_to=object)
    error = caught.value.body
    assert isinstance(error, dict) and error["code"] == code and error["type"] == "invalid_request_error"
    assert error["message"]
    assert door.fake.received() == []


async def test_a_flood_on_one_grant_meets_its_ceilings_in_words(door: Harness) -> None:
    # The bot's own: three live runs per person at most; the rest are refused before anything is bought.
    door.fake.queue("openai", *[Canned(body=openai_text("Done.").body, delay=1.5) for _ in range(3)])
    client = door.aclient(door.grant())

    async def turn(n: int) -> str:
        try:
            done = await client.chat.completions.create(model="caller",
                                                        messages=[{"role": "user", "content": f"Question {n}"}])
        except openai.RateLimitError as exc:
            assert isinstance(exc.body, dict) and exc.body["code"] == "too_many"
            return exc.body["message"]
        return done.choices[0].message.content or ""

    said = await asyncio.gather(*(turn(n) for n in range(8)))
    assert said.count("Done.") == 3
    refused = [s for s in said if s != "Done."]
    assert len(refused) == 5 and all("You already have 3 questions waiting" in s for s in refused)
    assert await door.db.pool.fetchval("SELECT count(*) FROM agent_runs") == 3


async def test_a_grants_own_ceiling_holds(door: Harness) -> None:
    door.fake.queue("openai", Canned(body=openai_text("One.").body, delay=1.5), openai_text("Two."))
    # A grant carries ceilings under the bot's: at most 0.015 USD a minute, 0.01 reserved per turn.
    client = door.aclient(door.grant(ceilings=Ceilings(steps=4, spend=0.01, minutes=1, per={"minute": 0.015})))
    first = asyncio.ensure_future(client.chat.completions.create(
        model="caller", messages=[{"role": "user", "content": "One?"}]))
    await eventually(lambda: door.fake.received(), timeout=10)
    # While the first is working its reservation counts: a second would take the minute over.
    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model="caller", messages=[{"role": "user", "content": "Two?"}])
    assert isinstance(caught.value.body, dict) and caught.value.body["code"] == "ceiling"
    assert "this minute" in caught.value.body["message"]
    assert (await first).choices[0].message.content == "One."
    limits = await door.db.pool.fetchval("SELECT limits FROM agent_runs ORDER BY id LIMIT 1")
    assert limits == {"steps": 4, "spend": 0.01, "minutes": 1}
    # Settled at what it cost (a fraction of a cent), the minute has room again.
    second = await client.chat.completions.create(model="caller", messages=[{"role": "user", "content": "Two?"}])
    assert second.choices[0].message.content == "Two."


async def test_a_client_that_goes_away_mid_stream_cancels_the_run(door: Harness) -> None:
    door.fake.queue("openai", Canned(body=openai_text("Nobody hears this.").body, delay=2.0))
    client = door.aclient(door.grant())
    stream = await client.chat.completions.create(model="caller", stream=True,
                                                  messages=[{"role": "user", "content": "Tell me a long story."}])
    first = await stream.__anext__()
    assert first.choices[0].delta.role == "assistant"
    run_id = (first.model_extra or {})["summon"]["run"]
    await stream.close()  # the front end hangs up (a barge-in closes the stream)

    async def ended() -> bool:
        row = await door.db.pool.fetchrow("SELECT status, ending, answer FROM agent_runs WHERE id = $1", run_id)
        return row["status"] == "cancelled" and row["ending"] == "cancelled" and row["answer"] is None

    await eventually(ended, timeout=15)
    assert await door.db.pool.fetchval("SELECT cancel_requested FROM agent_runs WHERE id = $1", run_id)


async def test_a_client_that_goes_away_from_a_whole_completion_cancels_it_too(door: Harness) -> None:
    door.fake.queue("openai", Canned(body=openai_text("Nobody hears this either.").body, delay=2.0))
    token = door.grant()
    timeout = aiohttp.ClientTimeout(total=0.7)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        with pytest.raises(TimeoutError):
            async with http.post(f"{door.url}/chat/completions", json=TURN,
                                 headers={"Authorization": f"Bearer {token}"}) as resp:
                await resp.read()

    async def cancelled() -> bool:
        return await door.db.pool.fetchval("SELECT status FROM agent_runs") == "cancelled"

    await eventually(cancelled, timeout=15)


async def test_with_no_provider_a_turn_is_a_503_the_sdk_raises_and_nothing_is_bought(door: Harness) -> None:
    # No provider, no bots — anywhere: every worker says so on its heartbeat (as one with no key would; the
    # harness's worker has beaten once, and beats again only in ten seconds).
    await eventually(lambda: door.db.pool.fetchval("SELECT count(*) FROM provider_status WHERE worker = "
                                                   "'door-test-worker'"), timeout=10)
    await door.db.pool.execute("UPDATE provider_status SET usable = false, mode = 'no provider: no key'")
    client = door.aclient(door.grant())
    with pytest.raises(openai.InternalServerError) as raised:
        await client.chat.completions.create(model="caller", messages=[{"role": "user", "content": "Hello?"}])
    assert raised.value.status_code == 503
    assert isinstance(raised.value.body, dict) and raised.value.body["code"] == "no_provider"
    assert await door.db.pool.fetchval("SELECT count(*) FROM agent_runs") == 0 and door.fake.received() == []
