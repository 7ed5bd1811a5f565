"""Spend that holds (issue 19), on a real PostgreSQL with the real worker and the real provider chain, bought
from the fake provider (tests/providers/fake_provider.py), which reports usage as a model that talks to the limit
would bill it: every output token the request allowed.

A bot allowed 0.01 USD a run, whose model costs about 0.02 for one call at the usual 4,096 tokens: the call is
made with ``max_tokens`` lowered to fit, and the run's recorded spend never passes 0.01; a request whose input
alone is over the budget is never sent, and the run ends out of money; and a hundred runs racing a person's
ceiling leave a ledger within it by what the calls really cost."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from appservice.kinds import KINDS
from engine.clock import SystemClock
from engine.content import AudienceFacts, Registry
from engine.content.files import compile_content
from engine.core.limits import Caps
from engine.providers.base import ProviderConfig
from engine.providers.chain import Chain
from engine.providers.openai import OpenAIAdapter
from engine.providers.prices import parse_prices
from engine.run.publish import publish
from engine.run.refusals import Refused
from engine.run.summon import Summoned, Summons, summon
from engine.run.worker import Worker, WorkerSettings
from engine.surface import Answered, Ended
from tests.db.runs import steps_of
from tests.db.test_worker import RecordingSurface
from tests.providers.fake_provider import Canned, FakeProvider, openai_text
from tests.store import TestStore
from tests.support import STAND_IN

pytestmark = pytest.mark.db
REPO = Path(__file__).resolve().parents[2]
WHO = "@alice:localhost"

THRIFTY = """---
name: Thrifty
surfaces: [rooms]
for: anyone
model: dear-model
limits:
  steps: 4
  spend: 0.01
  minutes: 5
  per:
    day: 0.05
---
You are thrifty with words.
"""
# About 0.02 USD for one call at the 4,096 tokens a bot's call gets: 4,096 × 4.8e-6 = 0.0197, plus the input.
PRICES = parse_prices({"prices": {"openai": {"dear-model": {"input": 1e-6, "output": 4.8e-6}}}})
FILLED = Canned(body=openai_text("A long answer, cut where it had to stop.").body, fill=True)



@pytest.fixture
async def thrifty(db: TestStore, tmp_path: Path) -> Registry:
    root = tmp_path / "content"
    shutil.copytree(REPO / "content", root)
    (root / "bots" / "thrifty.md").write_text(THRIFTY)
    registry = compile_content(root, kinds=KINDS, server_name="localhost", fetch_spec=None)
    assert isinstance(registry, Registry), registry
    await publish(db, registry)
    await db.workers.beat("test-worker", usable=True, mode="live", providers=["openai"])
    return registry


@pytest.fixture
async def chain(fake: FakeProvider) -> AsyncIterator[Chain]:
    clock = SystemClock()
    adapter = OpenAIAdapter(ProviderConfig(name="openai", kind="openai", url=fake.openai_url, key="sk-test"), clock)
    bought = Chain([adapter], PRICES, clock)
    try:
        yield bought
    finally:
        await bought.aclose()


def buying_worker(db: TestStore, registry: Registry, chain: Chain, surface: RecordingSurface, name: str) -> Worker:
    return Worker(db, lambda: registry, chain, {"rooms": surface}, SystemClock(),
                  WorkerSettings(lease_seconds=30, poll_seconds=0.2), worker_id=name, status=STAND_IN)


async def ask(db: TestStore, registry: Registry, prompt: str, n: int = 0) -> Summoned | Refused:
    async with db.transaction("test_summon") as tx:
        return await summon(tx, registry, Summons(
            bot="thrifty", surface="rooms", prompt=prompt, asked_by=WHO, place="!room:localhost",
            facts=AudienceFacts(user_id=WHO, local_server="localhost", is_member=True), trigger_event=f"$ask{n}"))


async def run_cost(db: TestStore, run_id: int) -> float:
    return float(await db.pool.fetchval(
        "SELECT coalesce(sum(cost_usd), 0)::float8 FROM agent_steps WHERE run_id = $1", run_id))


async def test_a_call_worth_twice_the_budget_is_made_with_max_tokens_lowered_and_spends_within_it(
    db: TestStore, thrifty: Registry, chain: Chain, fake: FakeProvider,
) -> None:
    fake.queue("openai", FILLED)
    surface = RecordingSurface()
    summoned = await ask(db, thrifty, "Tell me everything about the sea.")
    assert isinstance(summoned, Summoned)
    assert await buying_worker(db, thrifty, chain, surface, "w1").work_once()
    [sent] = fake.received("openai")
    # Sent with fewer than the 4,096 tokens a call gets: at full length it would have cost about 0.02.
    assert 1000 < sent.body["max_completion_tokens"] < 4096
    steps = await steps_of(db, summoned.run_id)
    assert [s["kind"] for s in steps] == ["model_started", "model", "answer"]
    drawn, cost = steps[0]["payload"]["estimate_usd"], steps[1]["payload"]["cost_usd"]
    # The provider billed every token it was allowed, and still: the real cost ≤ the worst case drawn ≤ 0.01.
    assert steps[1]["payload"]["tokens_out"] == sent.body["max_completion_tokens"]
    assert 0.009 < cost <= drawn <= 0.01
    assert await run_cost(db, summoned.run_id) <= 0.01
    assert surface.delivered == [(summoned.run_id, Answered("A long answer, cut where it had to stop."))]
    ledger = await db.pool.fetchrow(
        "SELECT usd::float8 AS usd, spent::float8 AS spent, drawn::float8 AS drawn, reserved FROM spend_ledger "
        "WHERE run_id = $1", summoned.run_id)
    # (The ledger keeps micro-dollars.)
    assert dict(ledger) == {"usd": pytest.approx(cost, abs=1e-6), "spent": pytest.approx(cost, abs=1e-6), "drawn": 0,
                            "reserved": False}


async def test_the_draw_and_its_settling_are_in_the_ledger_while_the_run_works(
    db: TestStore, thrifty: Registry, chain: Chain, fake: FakeProvider,
) -> None:
    # The answer waits a moment, so the ledger can be read while the call is in flight.
    fake.queue("openai", Canned(body=FILLED.body, fill=True, delay=1.0))
    summoned = await ask(db, thrifty, "Tell me about the tides.")
    assert isinstance(summoned, Summoned)
    holding = asyncio.create_task(buying_worker(db, thrifty, chain, RecordingSurface(), "w1").work_once())

    async def in_flight() -> tuple[float, float, float]:
        while True:
            row = await db.pool.fetchrow("SELECT usd::float8, spent::float8, drawn::float8 FROM spend_ledger "
                                         "WHERE run_id = $1", summoned.run_id)
            assert row is not None
            if row[2] > 0:
                return row[0], row[1], row[2]
            await asyncio.sleep(0.02)

    usd, spent, drawn = await asyncio.wait_for(in_flight(), 10)
    # Reserved: the whole budget, which the call's worst case is drawn from.
    assert (usd, spent) == (pytest.approx(0.01), 0) and 0.009 < drawn <= 0.01
    assert await holding
    row = await db.pool.fetchrow("SELECT usd::float8, spent::float8, drawn::float8 FROM spend_ledger "
                                 "WHERE run_id = $1", summoned.run_id)
    assert row is not None and row[1] == pytest.approx(await run_cost(db, summoned.run_id), abs=1e-6) and row[2] == 0


async def test_a_context_whose_input_alone_is_over_the_budget_is_not_sent_and_ends_out_of_money(
    db: TestStore, thrifty: Registry, chain: Chain, fake: FakeProvider,
) -> None:
    fake.queue("openai", FILLED)
    surface = RecordingSurface()
    # 12,000 characters: at most 12,000-odd tokens of input at 1e-6 — more than 0.01 before a word of output.
    summoned = await ask(db, thrifty, "Summarise this: " + "the sea is wide and deep. " * 460)
    assert isinstance(summoned, Summoned)
    assert await buying_worker(db, thrifty, chain, surface, "w1").work_once()
    assert fake.received() == []  # nothing bought
    assert [s["kind"] for s in await steps_of(db, summoned.run_id)] == ["ending"]
    row = await db.pool.fetchrow("SELECT status, ending FROM agent_runs WHERE id = $1", summoned.run_id)
    assert row is not None and (row["status"], row["ending"]) == ("done", "out_of_money")
    assert surface.delivered == [(summoned.run_id, Ended("out_of_money", ""))]
    assert await run_cost(db, summoned.run_id) == 0


async def test_a_hundred_runs_racing_a_persons_ceiling_stay_within_it_by_what_they_really_cost(
    db: TestStore, thrifty: Registry, chain: Chain, fake: FakeProvider,
) -> None:
    await db.people.set_caps(Caps(live_runs_per_person=100))
    fake.always("openai", FILLED)
    surface = RecordingSurface()
    workers = [buying_worker(db, thrifty, chain, surface, f"w{n}") for n in range(4)]
    stop = asyncio.Event()
    working = [asyncio.create_task(w.run(stop)) for w in workers]
    try:
        # A hundred summonses at once, while four workers buy the calls of those let through.
        asked = await asyncio.gather(*(ask(db, thrifty, f"Question number {n}?", n) for n in range(100)))
        let_through = [a.run_id for a in asked if isinstance(a, Summoned)]
        assert 1 <= len(let_through) <= 5 and sum(isinstance(a, Refused) for a in asked) == 100 - len(let_through)

        async def all_done() -> None:
            while await db.pool.fetchval("SELECT count(*) FROM agent_runs WHERE status IN ('queued', 'running')"):
                await asyncio.sleep(0.1)

        await asyncio.wait_for(all_done(), 60)
    finally:
        stop.set()
        await asyncio.gather(*working, return_exceptions=True)
    real = [await run_cost(db, run_id) for run_id in let_through]
    assert len(fake.received()) == len(let_through)  # every run that was let through bought its call
    assert all(0.009 < cost <= 0.01 for cost in real)
    ledger = await db.pool.fetchval("SELECT sum(usd)::float8 FROM spend_ledger WHERE who = $1", WHO)
    assert not await db.pool.fetchval("SELECT bool_or(reserved) FROM spend_ledger WHERE who = $1", WHO)
    # The day's ceiling holds by the real costs, not only by what was reserved.
    assert sum(real) == pytest.approx(ledger) and ledger <= 0.05


# --- a model with no price cannot be bought where a limit holds ---------------------------------------

def publish_cli(root: Path, dsn: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "summon.yaml"
    config.write_text(yaml.safe_dump({
        "homeserver": {"url": "http://127.0.0.1:9", "server_name": "localhost"},
        "appservice": {"address": "http://127.0.0.1:9", "as_token": "a" * 20, "hs_token": "h" * 20},
        "database": {"dsn": dsn}, "content": {"dir": str(root)},
    }))
    # A provider that is never reached (port 9): publishing prices models, it buys nothing.
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SUMMON_", "AGENTS_"))}
    provider = {"SUMMON_PROVIDERS": "openai", "SUMMON_PROVIDER_OPENAI_URL": "http://127.0.0.1:9/v1",
                "SUMMON_PROVIDER_OPENAI_KEY": "sk-test", "SUMMON_PROVIDER_OPENAI_MODEL": "gpt-4o-mini"}
    return subprocess.run([sys.executable, "-m", "appservice", "-c", str(config), "publish"], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env={**base, **provider, **env})


async def test_a_model_with_no_price_refuses_its_bot_and_never_the_service(db: TestStore, dsn: str,
                                                                           tmp_path: Path) -> None:
    root = tmp_path / "content"
    shutil.copytree(REPO / "content", root)
    (root / "bots" / "thrifty.md").write_text(THRIFTY.replace("model: dear-model", "model: mystery-model"))
    refused = publish_cli(root, dsn, tmp_path, AGENTS_LIVE="1")
    assert refused.returncode == 0, refused.stderr  # the bot is refused; the rest are published
    # One line, naming the bot's file and the model, and that the bot alone is refused.
    assert ("bots/thrifty.md: model 'mystery-model' on provider 'openai' has no price, so its spend limit cannot hold; "
            "add it to the price table (SUMMON_PRICES), at 0 if it is free; thrifty is refused, every other bot runs"
            ) in refused.stderr.splitlines()
    live = {r["slug"] for r in await db.pool.fetch("SELECT slug FROM bots WHERE withdrawn_at IS NULL")}
    assert "thrifty" not in live and "helper" in live
    # `summon check` says it first.
    checked = subprocess.run([sys.executable, "-m", "appservice", "check", str(root)], cwd=REPO,
                             capture_output=True, text=True, timeout=120,
                             env={**{k: v for k, v in os.environ.items() if not k.startswith(("SUMMON_", "AGENTS_"))},
                                  "SUMMON_PROVIDERS": "openai", "SUMMON_PROVIDER_OPENAI_KEY": "sk-test",
                                  "AGENTS_LIVE": "1"})
    assert checked.returncode == 1 and "mystery-model" in checked.stdout and "refused when published" in checked.stdout
    # Nothing is bought with buying off, so nothing needs a price.
    assert "thrifty" in publish_cli(root, dsn, tmp_path).stdout
    # A model the table says is free (price 0, explicitly) is bounded: it is published.
    prices = tmp_path / "prices.yaml"
    prices.write_text("prices:\n  openai:\n    mystery-model: {input: 0, output: 0}\n")
    published = publish_cli(root, dsn, tmp_path, AGENTS_LIVE="1", SUMMON_PRICES=str(prices))
    assert published.returncode == 0, published.stderr
    assert "thrifty" in published.stdout
    # Or the provider is declared free in one setting, with no price file and no key (a local model).
    local = publish_cli(root, dsn, tmp_path, AGENTS_LIVE="1", SUMMON_PROVIDER_OPENAI_FREE="1",
                        SUMMON_PROVIDER_OPENAI_KEY="")
    assert local.returncode == 0 and "thrifty" in local.stdout, local.stderr
