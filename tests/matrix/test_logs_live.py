"""Structured logs on the real stack: a mention answered through a real (fake, local) provider that takes a
key, logged as JSON at DEBUG — every line an object, the lines about the run carrying its run, bot and room,
and none of the secrets the deployment holds written anywhere."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from appservice.app import Service
from appservice.config import provider_settings
from appservice.logs import handler, secrets_of
from engine.providers.config import choose_answerer
from tests.matrix.people import Person
from tests.providers.fake_provider import FakeProvider, openai_text

pytestmark = pytest.mark.matrix
People = Callable[[str], Awaitable[Person]]

PROVIDER_KEY = "sk-logtest-9f3b2c7d1e0a"  # a key no other test uses, so finding it means it leaked


async def test_json_logs_carry_the_run_and_never_a_secret(people: People, service: Service) -> None:
    fake = FakeProvider()
    await fake.start()
    env = {"SUMMON_PROVIDERS": "first", "SUMMON_PROVIDER_FIRST_KIND": "openai",
           "SUMMON_PROVIDER_FIRST_URL": fake.openai_url, "SUMMON_PROVIDER_FIRST_KEY": PROVIDER_KEY,
           "SUMMON_PROVIDER_FIRST_MODEL": "gpt-test", "AGENTS_LIVE": "1",
           "SUMMON_PRICES": str(Path(__file__).parents[1] / "providers" / "free_prices.yaml")}  # free, priced
    fake.queue("openai", openai_text("Logged and answered."))
    secrets = secrets_of(service.config, env)
    assert PROVIDER_KEY in secrets and service.config.appservice.as_token in secrets
    out = io.StringIO()
    capture = handler("json", secrets, stream=out)
    root = logging.getLogger()
    level = root.level
    root.addHandler(capture)
    root.setLevel(logging.DEBUG)
    answerer = choose_answerer(provider_settings(env), service.clock)
    before = service.worker.answerer
    service.worker.answerer = answerer
    try:
        alice = await people("alice")
        room = await alice.room_with("helper")
        asked = await alice.say(room, "Helper, log this please", mention="helper")
        answer = await alice.answer_to(room, asked, timeout=30)
        assert answer["content"]["body"] == "Logged and answered."
        assert fake.received("openai")[0].headers["authorization"] == f"Bearer {PROVIDER_KEY}"
    finally:
        service.worker.answerer = before
        root.removeHandler(capture)
        root.setLevel(level)
        await answerer.aclose()
        await fake.close()

    text = out.getvalue()
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert lines and all({"ts", "level", "logger", "message"} <= line.keys() for line in lines)
    for secret in secrets:
        assert secret not in text, f"a secret was logged: {secret[:6]}…"
    finished = [line for line in lines if line["message"].startswith("run ") and "finished" in line["message"]]
    # The shared service may finish another test's run while this one is captured: find this room's.
    ours = [line for line in finished if line.get("room") == room]
    assert ours, f"the run's end was logged with its room: {finished}"
    assert ours[-1]["bot"] == "helper" and isinstance(ours[-1]["run"], int)
    # Lines logged while the run was held, that did not name it themselves, carry it too.
    run_id = ours[-1]["run"]
    about_it = [line for line in lines if line.get("run") == run_id]
    assert {"engine.run.hold", "engine.run.worker"} & {line["logger"] for line in about_it}
    assert all(line.get("room") == room and line.get("bot") == "helper" for line in about_it
               if line["logger"].startswith("engine."))
