"""Provider limits shared by every worker (issue 18): real `summon worker` processes on one PostgreSQL buy from
one fake provider (real OpenAI wire format, through the real SDK) that counts what a provider's own limits
count — requests at once and requests per window — and every worker together stays under them. A worker
killed holding a permit holds it only until its lease runs out."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from appservice.config import provider_settings
from engine.clock import SystemClock
from engine.content import Registry
from engine.core.messages import Message, ModelRequest
from engine.core.permits import ProviderLimits
from engine.providers.config import choose_answerer
from engine.providers.limits import Limiter, NoPermit, Permit
from tests.db.runs import insert_run
from tests.faults.support import Processes, wait_for
from tests.providers.fake_provider import Canned, FakeProvider, openai_error, openai_text
from tests.store import TestStore

pytestmark = pytest.mark.db
FREE_PRICES = Path(__file__).parents[1] / "providers" / "free_prices.yaml"  # the fake models, free



def buying(fake: FakeProvider, **settings: object) -> dict[str, str | None]:
    """A worker's environment: buying from the fake provider, with its limits (``max_in_flight=3`` is
    ``SUMMON_PROVIDER_FAKE_MAX_IN_FLIGHT=3``), and not the stand-in the tests otherwise choose."""
    env: dict[str, str | None] = {
        "SUMMON_PROVIDERS": "fake", "SUMMON_PROVIDER_FAKE_KIND": "openai", "SUMMON_PROVIDER_FAKE_URL": fake.openai_url,
        "SUMMON_PROVIDER_FAKE_KEY": "sk-fake", "SUMMON_PROVIDER_FAKE_MODEL": "gpt-test", "AGENTS_LIVE": "1",
        "SUMMON_AGENT_MOCK": None, "SUMMON_PRICES": str(FREE_PRICES),
    }
    env.update({f"SUMMON_PROVIDER_FAKE_{k.upper()}": str(v) for k, v in settings.items()})
    return env


async def all_done(db: TestStore, ids: list[int]) -> bool:
    return bool(await db.pool.fetchval(
        "SELECT count(*) = $2 FROM agent_runs WHERE id = ANY($1) AND status = 'done'", ids, len(ids)))


async def workers_that_called(db: TestStore, ids: list[int]) -> set[str]:
    return {r["worker"] for r in await db.pool.fetch(
        "SELECT DISTINCT worker FROM agent_steps WHERE run_id = ANY($1) AND kind = 'model'", ids)}


async def test_three_workers_together_never_have_more_calls_in_flight_than_the_limit(
    db: TestStore, dsn: str, published: Registry, fake: FakeProvider, tmp_path: Path,
) -> None:
    fake.otherwise["openai"] = replace(openai_text("ok"), delay=0.4)
    processes = Processes(tmp_path, env=buying(fake, max_in_flight=3))
    try:
        ids = [await insert_run(db) for _ in range(30)]
        # Ten slots each: a worker claims as many runs as it has free slots at once, so 30 runs need all three.
        config = processes.worker_config(dsn, slots=10, poll_seconds=0.2)
        for _ in range(3):
            processes.worker(config)
        await wait_for(lambda: all_done(db, ids), timeout=90, what="every run answered")
    finally:
        processes.close()
    assert len(fake.arrivals) == 30
    # 30 slots wanted the provider at once; every worker together kept it to 3 (and used all 3).
    assert fake.most_in_flight == 3
    assert len(await workers_that_called(db, ids)) == 3


async def test_three_workers_together_keep_requests_per_minute(
    db: TestStore, dsn: str, published: Registry, fake: FakeProvider, tmp_path: Path,
) -> None:
    # 40 a minute, counted over 3-second windows: 2 in any 3 seconds, whoever makes them.
    fake.otherwise["openai"] = openai_text("ok")
    processes = Processes(tmp_path, env=buying(fake, rpm=40, window=3))
    try:
        ids = [await insert_run(db) for _ in range(8)]
        # Three slots each: the first worker up cannot take all eight at once, so the others ask too.
        config = processes.worker_config(dsn, slots=3, poll_seconds=0.2)
        for _ in range(3):
            processes.worker(config)
        await wait_for(lambda: all_done(db, ids), timeout=90, what="every run answered")
    finally:
        processes.close()
    assert len(fake.arrivals) == 8
    assert len(await workers_that_called(db, ids)) >= 2
    # The limiter counts grants; the fake sees each request a little after its grant (the worker's own
    # scheduling, its connection), later still on a loaded machine — CI once saw 3 arrivals within 3.0 s
    # of grants 3 s apart. So the windows checked here are 0.5 s short of the limiter's: at most 2 still,
    # where a broken limit lets all eight in within a fraction of a second.
    jitter = 0.5
    assert fake.most_within(3.0 - jitter) == 2
    span = max(fake.arrivals) - min(fake.arrivals)
    assert span >= 3 * 3.0 - jitter  # four windows' worth: the limit made them wait, not just counted them


async def test_a_worker_killed_holding_a_permit_holds_it_only_until_its_lease_runs_out(
    db: TestStore, dsn: str, published: Registry, fake: FakeProvider, tmp_path: Path,
) -> None:
    # One call at a time; a call takes at most 3 s (its timeout), so a permit is leased 3 s + the margin (5 s).
    fake.queue("openai", replace(openai_text("never heard"), delay=60))
    fake.otherwise["openai"] = openai_text("ok")
    processes = Processes(tmp_path, env=buying(fake, max_in_flight=1, timeout=3))
    try:
        first = await insert_run(db)
        config = processes.worker_config(dsn, slots=4, poll_seconds=0.2, lease_seconds=30)
        a = processes.worker(config)
        await wait_for(lambda: _true(len(fake.arrivals) == 1), timeout=30, what="the first call")
        taken = await db.pool.fetchrow("SELECT granted_at, expires_at FROM provider_permits WHERE run_id = $1", first)
        assert taken is not None and (taken["expires_at"] - taken["granted_at"]).total_seconds() == pytest.approx(8, abs=0.5)
        a.kill()  # mid-call, holding the only permit
        second = await insert_run(db)
        processes.worker(config)
        await wait_for(lambda: all_done(db, [second]), timeout=60, what="the second run answered")
    finally:
        processes.close()
    assert len(fake.arrivals) == 2
    gap = fake.arrivals[1] - fake.arrivals[0]
    # Not before the dead worker's lease ran out (never two at once) — and not long after it.
    assert 7.5 <= gap <= 8 + 6, gap


async def _true(value: bool) -> bool:
    return value


# --- in one process: the line, in order ------------------------------------------------------------------


async def test_waiting_calls_go_in_the_order_they_asked_whichever_worker_asked(db: TestStore) -> None:
    clock = SystemClock()
    limits = {"p": ProviderLimits(max_in_flight=1, call_seconds=10)}
    a, b = Limiter(db, clock, "worker-a", limits), Limiter(db, clock, "worker-b", limits)
    stop = asyncio.Event()
    running = [asyncio.ensure_future(x.run(stop)) for x in (a, b)]
    try:
        held = await a.acquire("p", tokens=10, run_id=None, lease=10, within=5)
        assert isinstance(held, Permit) and held.id is not None
        order: list[str] = []

        async def call(limiter: Limiter, name: str) -> None:
            permit = await limiter.acquire("p", tokens=10, run_id=None, lease=10, within=20)
            assert isinstance(permit, Permit)
            order.append(name)
            await asyncio.sleep(0.05)
            await limiter.release(permit, tokens=12)

        waiting = []
        for n, limiter in enumerate([b, a, b, a, b]):
            waiting.append(asyncio.ensure_future(call(limiter, f"{n}")))
            await wait_for(lambda n=n: _waiting(db, n + 1), timeout=5, what="in line")
        await a.release(held)
        await asyncio.gather(*waiting)
        assert order == ["0", "1", "2", "3", "4"]
        # A call that cannot wait long enough is told so, and leaves the line.
        held = await a.acquire("p", tokens=10, run_id=None, lease=10, within=5)
        refused = await b.acquire("p", tokens=10, run_id=None, lease=10, within=0.3)
        assert isinstance(refused, NoPermit) and refused.reason == "busy"
        assert await _waiting(db, 0)
        assert isinstance(held, Permit)
        await a.release(held)
    finally:
        stop.set()
        await asyncio.gather(*running)
    # Every permit was handed back when the limiters stopped.
    assert await db.pool.fetchval("SELECT count(*) FROM provider_permits WHERE released_at IS NULL") == 0


async def _waiting(db: TestStore, n: int) -> bool:
    return bool(await db.pool.fetchval("SELECT count(*) = $1 FROM provider_permits WHERE granted_at IS NULL", n))


async def test_tokens_per_minute_hold_a_call_until_the_window_makes_room(db: TestStore, fake: FakeProvider) -> None:
    env = {k: v for k, v in buying(fake, tpm=6000, window=2).items() if v is not None}
    answering = choose_answerer(provider_settings(env), SystemClock(), store=db, worker_id="w-tpm")
    assert answering.limiter is not None
    # Each answer takes 1 s, so the first two are both in flight when the second asks: an answer back in
    # milliseconds counted its 110 before the second asked, and 110 + 91 did not fit (CI saw the second wait).
    fake.otherwise["openai"] = replace(openai_text("ok", prompt=100, completion=10), delay=1.0)
    stop = asyncio.Event()
    running = asyncio.ensure_future(answering.limiter.run(stop))
    # 200 a window; each call counts its prompt and max_tokens (91) until it returns, then what it used (110):
    # two go at once, and the third waits for the window to let the first two out — whether or not they have
    # returned when it asks (at 65 a call, three fitted in the window while none had, and the test raced them).
    request = ModelRequest(system="", messages=(Message("user", "hi"),), max_tokens=90)
    try:
        steps = await asyncio.gather(*(answering.answer(request, turn=0) for _ in range(3)))
    finally:
        stop.set()
        await running
        await answering.aclose()
    assert all(s[-1].text == "ok" for s in steps)
    assert len(fake.arrivals) == 3
    granted = [r["s"] for r in await db.pool.fetch(
        "SELECT extract(epoch FROM granted_at - min(granted_at) OVER ())::float8 AS s, tokens FROM provider_permits"
        " ORDER BY granted_at")]
    # The first two at once (before the window could have let anything out — under 2 s, where a limiter that
    # let one through at a time would grant the second at 2.5 s or later; generous, since a busy machine once
    # took longer than 1.5 s); the third once the window (2 s and its margin) let the first two out.
    assert granted[1] < 2.0 and granted[2] >= 2.5, granted


# --- a provider's own "wait": a 429 with retry-after ------------------------------------------------------


def rate_limited(seconds: int) -> Canned:
    return openai_error(429, "Rate limit reached for gpt-test in organization org-abc on requests per min (RPM).",
                        type="requests", code="rate_limit_exceeded", headers={"retry-after": str(seconds)})


async def test_a_429_with_retry_after_pauses_every_worker_until_then(
    db: TestStore, dsn: str, published: Registry, fake: FakeProvider, tmp_path: Path,
) -> None:
    # One call at a time, so the 429 is the only call in flight when it comes back: none may follow it for 3 s,
    # whichever of the three workers makes it — and the run it came back to waits it out (nobody else to ask).
    fake.queue("openai", replace(openai_text("ok"), delay=0.3), rate_limited(3))
    fake.otherwise["openai"] = replace(openai_text("ok"), delay=0.3)
    processes = Processes(tmp_path, env=buying(fake, max_in_flight=1))
    try:
        ids = [await insert_run(db) for _ in range(6)]
        config = processes.worker_config(dsn, slots=8, poll_seconds=0.2)
        for _ in range(3):
            processes.worker(config)
        await wait_for(lambda: all_done(db, ids), timeout=90, what="every run answered")
    finally:
        processes.close()
    assert len(fake.arrivals) == 7  # six answers and the 429
    arrivals = sorted(fake.arrivals)
    assert arrivals[2] - arrivals[1] >= 3 - 0.3, arrivals  # the 429 was the second call
    reason = await db.pool.fetchval("SELECT paused_reason FROM provider_gates WHERE gate = 'fake'")
    assert "Rate limit reached" in reason



@pytest.mark.parametrize("limited", [False, True], ids=["no_limits", "max_in_flight"])
async def test_while_a_provider_is_paused_every_worker_asks_the_next_one(
    db: TestStore, fake: FakeProvider, fake2: FakeProvider, limited: bool,
) -> None:
    env = {"SUMMON_PROVIDERS": "first,second", "AGENTS_LIVE": "1", "SUMMON_PRICES": str(FREE_PRICES),
           "SUMMON_PROVIDER_FIRST_URL": fake.openai_url, "SUMMON_PROVIDER_FIRST_KEY": "sk-1",
           "SUMMON_PROVIDER_FIRST_MODEL": "gpt-test", "SUMMON_PROVIDER_SECOND_URL": fake2.openai_url,
           "SUMMON_PROVIDER_SECOND_KEY": "sk-2", "SUMMON_PROVIDER_SECOND_MODEL": "gpt-other"}
    if limited:
        env["SUMMON_PROVIDER_FIRST_MAX_IN_FLIGHT"] = "5"
    clock = SystemClock()
    a = choose_answerer(provider_settings(env), clock, store=db, worker_id="worker-a")
    b = choose_answerer(provider_settings(env), clock, store=db, worker_id="worker-b")
    fake.queue("openai", rate_limited(30))
    fake.otherwise["openai"] = openai_text("from first")
    fake2.otherwise["openai"] = openai_text("from second")
    request = ModelRequest(system="", messages=(Message("user", "hi"),))
    try:
        first = await a.answer(request, turn=0)
        later = [await x.answer(request, turn=0) for x in (b, a, b)]
    finally:
        await a.aclose()
        await b.aclose()
    # Worker a met the 429 (30 s: longer than a retry is worth) and moved on; it paused `first` for everyone.
    assert [(s.provider, s.error is None, s.gave_up) for s in first] == [("first", False, False), ("second", True, False)]
    # Meanwhile every worker asks `second` straight away: `first` is not called again.
    for steps in later:
        assert [(s.provider, s.text, s.fallback) for s in steps] == [("second", "from second", True)]
    assert len(fake.received()) == 1 and len(fake2.received()) == 4
    left = await db.pool.fetchval(
        "SELECT extract(epoch FROM paused_until - now()) FROM provider_gates WHERE gate = 'first'")
    assert 25 < left <= 30


async def test_a_pause_longer_than_the_answer_may_wait_gives_up_in_words(db: TestStore, fake: FakeProvider) -> None:
    env = {k: v for k, v in buying(fake).items() if v is not None}
    answering = choose_answerer(provider_settings(env), SystemClock(), store=db, worker_id="w-pause", patience=5.0)
    await db.providers.pause("fake", 120, "Rate limit reached")
    try:
        [step] = await answering.answer(ModelRequest(system="", messages=(Message("user", "hi"),)), turn=0)
    finally:
        await answering.aclose()
    assert step.gave_up and step.provider == "fake" and "rate limited" in (step.error or "")
    assert fake.received() == []
