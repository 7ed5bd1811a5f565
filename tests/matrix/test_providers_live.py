"""Real providers end to end: a mention in a room, answered through the real SDKs by two local fake
providers (one OpenAI-shaped that is out of quota, one Anthropic-shaped that calls a tool and answers),
on the real Synapse and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import pytest

from appservice.app import Service
from appservice.config import provider_settings
from engine.providers.config import choose_answerer
from engine.providers.prices import parse_prices
from engine.tools.base import RunRef
from tests.matrix.people import Person
from tests.providers.fake_provider import (
    OPENAI_INSUFFICIENT_QUOTA,
    OPENAI_INVALID,
    FakeProvider,
    anthropic_text,
    anthropic_tools,
)

pytestmark = pytest.mark.matrix
People = Callable[[str], Awaitable[Person]]
PRICES = parse_prices({"prices": {"anthropic": {"claude-test": {"input": 0.000003, "output": 0.000015}},
                                  "first": {"gpt-test": {"input": 0.000001, "output": 0.000002}}}})


@pytest.fixture
async def live(service: Service) -> AsyncIterator[tuple[FakeProvider, list[dict[str, Any]]]]:
    """The service buys from two fake providers for the length of a test, with a `lookup` tool."""
    fake = FakeProvider()
    await fake.start()
    env = {
        "SUMMON_PROVIDERS": "first,anthropic",
        "SUMMON_PROVIDER_FIRST_KIND": "openai", "SUMMON_PROVIDER_FIRST_URL": fake.openai_url,
        "SUMMON_PROVIDER_FIRST_KEY": "sk-first", "SUMMON_PROVIDER_FIRST_MODEL": "gpt-test",
        "SUMMON_PROVIDER_ANTHROPIC_URL": fake.anthropic_url, "SUMMON_PROVIDER_ANTHROPIC_KEY": "sk-ant",
        "SUMMON_PROVIDER_ANTHROPIC_MODEL": "claude-test", "AGENTS_LIVE": "1",
    }
    answerer = choose_answerer(provider_settings(env), service.clock, prices=PRICES)
    assert answerer.buying
    looked_up: list[dict[str, Any]] = []

    async def lookup(run: RunRef, arguments: dict[str, Any]) -> str:
        looked_up.append(arguments)
        return "42"

    before = service.worker.answerer
    service.worker.answerer = answerer
    service.worker.toolbox.harness["lookup"] = lookup
    try:
        yield fake, looked_up
    finally:
        service.worker.answerer = before
        del service.worker.toolbox.harness["lookup"]
        await answerer.aclose()
        await fake.close()


async def test_out_of_quota_falls_back_to_the_next_provider_which_uses_a_tool(
    people: People, service: Service, live: tuple[FakeProvider, list[dict[str, Any]]], sql: asyncpg.Pool,
) -> None:
    fake, looked_up = live
    fake.queue("openai", OPENAI_INSUFFICIENT_QUOTA, OPENAI_INSUFFICIENT_QUOTA)
    fake.queue("anthropic", anthropic_tools("", ("toolu_1", "lookup", {"q": "meaning"})),
               anthropic_text("The answer is 42."))
    alice = await people("alice")
    room = await alice.room_with("helper")
    asked = await alice.say(room, "Helper, what is the meaning of it all?", mention="helper")
    answer = await alice.answer_to(room, asked, timeout=30)
    assert answer["content"]["body"] == "The answer is 42."
    assert looked_up == [{"q": "meaning"}]

    run_id = await sql.fetchval("SELECT id FROM agent_runs WHERE trigger_event = $1", asked)
    steps = [dict(r) for r in await sql.fetch(
        "SELECT kind, provider, model, tokens_in, tokens_out, cost_usd::float8 AS cost, payload FROM agent_steps"
        " WHERE run_id = $1 ORDER BY seq", run_id)]
    assert [(s["kind"], s["provider"]) for s in steps] == [
        ("model_started", None), ("model", "first"), ("model", "anthropic"), ("tool_call", None), ("tool_result", None),
        ("model_started", None), ("model", "first"), ("model", "anthropic"), ("answer", None)]
    started, failed, answered = steps[0], steps[1], steps[2]
    # Before the call, what it may cost was reserved on its start: its size and max_tokens of output, at the
    # dearer of the two prices — never less than what it did cost.
    assert started["payload"]["estimate_usd"] >= answered["cost"] > 0
    assert failed["payload"]["error"] and failed["payload"]["error_class"] == "provider"
    assert failed["cost"] == 0
    assert answered["payload"]["fallback"] is True and answered["model"] == "claude-test"
    assert answered["tokens_in"] == 300 and answered["tokens_out"] == 40
    assert answered["cost"] == pytest.approx(300 * 0.000003 + 40 * 0.000015)
    # The OpenAI-shaped provider was asked with its own model, never Anthropic's.
    assert {r.body["model"] for r in fake.received("openai")} == {"gpt-test"}


async def test_a_malformed_request_does_not_fall_back_and_the_asker_hears_why(
    people: People, service: Service, live: tuple[FakeProvider, list[dict[str, Any]]], sql: asyncpg.Pool,
) -> None:
    fake, _ = live
    fake.queue("openai", OPENAI_INVALID)
    alice = await people("alice")
    room = await alice.room_with("helper")
    asked = await alice.say(room, "Helper, break please", mention="helper")
    answer = await alice.answer_to(room, asked, timeout=30)
    assert "must be a response to a preceeding message" in answer["content"]["body"]
    assert answer["content"]["m.mentions"] == {"user_ids": [alice.user_id]}
    assert fake.received("anthropic") == []
    row = await sql.fetchrow("SELECT status, ending FROM agent_runs WHERE trigger_event = $1", asked)
    assert (row["status"], row["ending"]) == ("failed", "failed")
