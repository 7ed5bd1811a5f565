"""No provider, no bots — exactly as the seed says (issue 12, item 13): a deployment with no key, or with
buying not switched on, offers no bot anywhere (mentions refused, `!help` lists none, presence says why),
unless the operator chose the stand-in (``SUMMON_AGENT_MOCK=1``), and then the bots answer and say they
are standing in. Real PostgreSQL, the real worker and its real heartbeat, the real intake."""

from __future__ import annotations

import asyncio

import pytest

from appservice.config import provider_settings
from appservice.matrix.claimers.commands import help_text
from appservice.matrix.rooms import REASONS, presence_status
from engine.clock import SystemClock
from engine.content import Registry
from engine.content.audience import AudienceFacts
from engine.providers.config import choose_answerer
from engine.providers.mock import CHOSEN
from engine.run.summon import LIVENESS_SECONDS
from engine.run.worker import Worker, WorkerSettings
from engine.surface import Answered
from tests.db.test_ingest import HELPER, count, feed, message, pipeline
from tests.db.test_worker import RecordingSurface
from tests.store import TestStore
from tests.support import eventually

pytestmark = pytest.mark.db


async def serve(db: TestStore, registry: Registry, env: dict[str, str], surface: RecordingSurface,
                stop: asyncio.Event) -> asyncio.Future[None]:
    """A worker as ``summon serve`` builds one from this environment, beating its provider status."""
    clock = SystemClock()
    answerer = choose_answerer(provider_settings(env), clock)
    worker = Worker(db, lambda: registry, answerer, {"rooms": surface}, clock,
                    WorkerSettings(poll_seconds=0.2, heartbeat_seconds=0.2), worker_id="w-env",
                    status=answerer.status())
    running = asyncio.ensure_future(worker.run(stop))
    await eventually(lambda: db.pool.fetchval("SELECT count(*) FROM provider_status WHERE worker = 'w-env'"))
    return running


@pytest.mark.parametrize(
    ("env", "why"),
    [({}, "no_key"),
     ({"SUMMON_PROVIDERS": "openai", "SUMMON_PROVIDER_OPENAI_KEY": "sk-x"}, "not_switched_on")],
    ids=["no_key", "not_switched_on"],
)
async def test_with_no_usable_provider_no_bot_is_offered_and_presence_says_why(
    db: TestStore, registry: Registry, env: dict[str, str], why: str,
) -> None:
    from engine.run.publish import publish

    await publish(db, registry)
    await db.pool.execute("DELETE FROM provider_status")
    stop = asyncio.Event()
    running = await serve(db, registry, env, RecordingSurface(), stop)
    try:
        ingest = pipeline(db, registry)
        await feed(ingest, db, "t1", [message("Helper, are you there?", mentions=[HELPER])])
        assert await count(db, "SELECT count(*) FROM agent_runs") == 0
        assert await db.pool.fetchval("SELECT reason FROM summon_refusals") == "no_provider"
        state = await db.workers.provider_state(LIVENESS_SECONDS)
        assert not state.usable
        assert why in REASONS
        words = presence_status(state.usable, state.mode, registry.strings)
        assert words is not None and words == registry.strings.get("reasons", why)
        facts = AudienceFacts(user_id="@alice:localhost", local_server="localhost", is_member=True)
        said = help_text(registry, facts, {HELPER: "Helper"}, usable=state.usable)
        assert said == registry.strings.get("commands", "help_no_provider")
        assert "Helper" not in (said or "")
    finally:
        stop.set()
        await running


async def test_the_stand_in_chosen_answers_and_says_it_is_standing_in(db: TestStore, registry: Registry) -> None:
    from engine.run.publish import publish

    await publish(db, registry)
    await db.pool.execute("DELETE FROM provider_status")
    stop = asyncio.Event()
    surface = RecordingSurface()
    running = await serve(db, registry, {"SUMMON_AGENT_MOCK": "1"}, surface, stop)
    try:
        state = await db.workers.provider_state(LIVENESS_SECONDS)
        assert state.usable and presence_status(state.usable, state.mode, registry.strings) is None
        await feed(pipeline(db, registry), db, "t1", [message("Helper, are you there?", mentions=[HELPER])])
        await eventually(lambda: surface.delivered)
        [(_, outcome)] = surface.delivered
        assert outcome == Answered(CHOSEN)
    finally:
        stop.set()
        await running
