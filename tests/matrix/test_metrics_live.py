"""/metrics on the real stack: scraped before and after a mention, the counters and histograms move as they
should, and the database's figures (the queue, the outbox, the workers) are there."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
import asyncpg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from appservice.app import Service
from appservice.config import provider_settings
from engine.providers.config import choose_answerer
from tests.matrix.people import Person
from tests.providers.fake_provider import OPENAI_INSUFFICIENT_QUOTA, FakeProvider, anthropic_text
from tests.support import eventually

pytestmark = pytest.mark.matrix
People = Callable[[str], Awaitable[Person]]
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
async def scrape(service: Service) -> AsyncIterator[Callable[[], Awaitable[Samples]]]:
    runner, port = await service.metrics.listen(service.store, "127.0.0.1", 0)

    async def read() -> Samples:
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/metrics") as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith("text/plain")
            text = await resp.text()
        return {(s.name, frozenset(s.labels.items())): s.value
                for family in text_string_to_metric_families(text) for s in family.samples}

    yield read
    await runner.cleanup()


async def quiet(service: Service) -> None:
    """Until no run waits or works in the shared service."""
    async def idle() -> bool:
        s = await service.store.health.snapshot(30)
        return s.queued == 0 and s.running == 0

    await eventually(idle, timeout=30)


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def test_a_mention_moves_the_counters_and_histograms(people: People, service: Service,
                                                            scrape: Callable[[], Awaitable[Samples]]) -> None:
    fake = FakeProvider()
    await fake.start()
    env = {"SUMMON_PROVIDERS": "first,anthropic", "SUMMON_PROVIDER_FIRST_KIND": "openai",
           "SUMMON_PROVIDER_FIRST_URL": fake.openai_url, "SUMMON_PROVIDER_FIRST_KEY": "sk-first",
           "SUMMON_PROVIDER_FIRST_MODEL": "gpt-test", "SUMMON_PROVIDER_ANTHROPIC_URL": fake.anthropic_url,
           "SUMMON_PROVIDER_ANTHROPIC_KEY": "sk-ant", "SUMMON_PROVIDER_ANTHROPIC_MODEL": "claude-3-5-haiku-latest",
           "AGENTS_LIVE": "1", "SUMMON_PRICES": str(Path(__file__).parents[1] / "providers" / "free_prices.yaml")}
    # The first provider is out of quota (a fallback, class no_credit); the second answers, at a price.
    fake.queue("openai", OPENAI_INSUFFICIENT_QUOTA)
    fake.queue("anthropic", anthropic_text("Counted.", input=1000, output=100))
    answerer = choose_answerer(provider_settings(env), service.clock)
    before_answerer = service.worker.answerer
    service.worker.answerer = answerer
    try:
        alice = await people("alice")
        room = await alice.room_with("helper")
        await quiet(service)  # an earlier test's run still finishing would count in this window
        before = await scrape()
        asked = await alice.say(room, "Helper, count this", mention="helper")
        answer = await alice.answer_to(room, asked, timeout=30)
        assert answer["content"]["body"] == "Counted."
    finally:
        service.worker.answerer = before_answerer
        await answerer.aclose()
        await fake.close()

    async def moved() -> Samples | None:
        after = await scrape()
        done = value(after, "summon_runs_finished_total", bot="helper", ending="answered")
        return after if done > value(before, "summon_runs_finished_total", bot="helper", ending="answered") else None

    after = await eventually(moved, timeout=10)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("summon_runs_started_total", bot="helper") == 1
    assert delta("summon_runs_finished_total", bot="helper", ending="answered") == 1
    assert delta("summon_provider_fallbacks_total", provider="first", reason="no_credit") == 1
    assert delta("summon_spend_usd_total", bot="helper") > 0
    assert delta("summon_claim_seconds_count") == 1 and delta("summon_queue_wait_seconds_count") == 1
    assert delta("summon_step_seconds_count", kind="model", provider="anthropic") == 1
    assert delta("summon_step_seconds_count", kind="model", provider="first") == 1
    assert delta("summon_step_seconds_count", kind="answer", provider="") == 1
    assert delta("summon_step_seconds_sum", kind="model", provider="anthropic") > 0
    # The mention's own transaction (and the room's setup around it) was taken in and timed.
    assert delta("summon_transaction_seconds_count") >= 1 and delta("summon_transaction_events_sum") >= 1
    # The database's figures: readable, a worker beating that can answer, nothing stuck.
    assert value(after, "summon_database_up") == 1
    assert value(after, "summon_workers_alive") >= 1 and value(after, "summon_provider_usable") == 1
    assert value(after, "summon_worker_slots") == service.config.worker.slots
    assert value(after, "summon_worker_slots_busy") == 0
    for gauge in ("summon_queue_depth", "summon_queue_oldest_seconds", "summon_outbox_depth",
                  "summon_outbox_oldest_seconds", "summon_runs_running"):
        assert (gauge, frozenset()) in after


async def test_a_refusal_is_counted_by_reason(people: People, service: Service, sql: asyncpg.Pool,
                                              scrape: Callable[[], Awaitable[Samples]]) -> None:
    alice = await people("alice")
    room = await alice.room_with("helper")
    # The room's admins enabled no bot here: a mention is refused, reason not_enabled.
    await sql.execute("""UPDATE rooms SET settings = '{"bots": []}' WHERE room_id = $1""", room)
    await quiet(service)
    before = await scrape()
    asked = await alice.say(room, "Helper, are you there?", mention="helper")

    async def refused() -> bool:
        return bool(await sql.fetchval("SELECT count(*) FROM summon_refusals WHERE trigger_event = $1", asked))

    await eventually(refused)
    after = await scrape()
    assert value(after, "summon_refusals_total", reason="not_enabled") - \
        value(before, "summon_refusals_total", reason="not_enabled") == 1
