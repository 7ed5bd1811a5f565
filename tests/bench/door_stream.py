"""The door's first word against the provider's own: a streaming fake provider (the real chat-completions wire)
that sends its first word 300 ms after a request, asked directly through openai-python (the floor: what a front
end talking to the provider itself would hear), and asked through the door — grant, run row, claim, the model
call streamed by the worker, each piece told on NOTIFY, the door's SSE — in the same run, rounds alternating.
The door adds what the ratio says (target: p50 ≤ 320 ms against 300, ≤ 1.067×). Asserts nothing about speed.

    .venv/bin/python -m tests.bench.door_stream [--rounds 40] [--warmup 3]

It starts PostgreSQL (and the test Synapse, unused) with ``synapse-dev/up`` on its own ports (55444/8024/29345)
and always stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import openai

from appservice.config import Door as DoorConfig
from appservice.config import Listen, provider_settings
from appservice.door.service import DoorListener
from appservice.door.surface import DoorSurface
from appservice.kinds import KINDS
from engine.clock import SystemClock
from engine.content import Registry, compile_sources
from engine.content.files import KIT_DIR, read_content
from engine.core.limits import Ceilings
from engine.providers.config import choose_answerer
from engine.run.publish import publish
from engine.run.worker import Worker, WorkerSettings
from engine.store import migrate
from engine.tasks import TaskGroup
from tests.bench.__main__ import percentile
from tests.bench.results import Ratio, write
from tests.door.conftest import CALLER, KEYS, PRICES, SERVER
from tests.providers.fake_provider import FakeProvider, openai_text
from tests.store import TestStore

REPO = Path(__file__).resolve().parents[2]
RUN_DIR = REPO / ".dev" / "bench-door-stream-run"
PORTS = {"SUMMON_PG_PORT": "55444", "SUMMON_HS_PORT": "8024", "SUMMON_AS_PORT": "29345"}
FIRST = 0.3  # the fake provider's first word, after the request
# A roomier hour than the tests' Caller: every round is a turn of the same person.
BOT = CALLER.replace("hour: 1.00", "hour: 100.00")


async def first_word(client: openai.AsyncOpenAI, n: int) -> float:
    """Ms from the request to the first content delta of a streamed turn (the stream read to its end)."""
    sent = time.monotonic()
    stream = await client.chat.completions.create(model="caller", stream=True,
                                                  messages=[{"role": "user", "content": f"Story {n}?"}])
    arrived: float | None = None
    async for chunk in stream:
        if arrived is None and chunk.choices and chunk.choices[0].delta.content:
            arrived = time.monotonic()
    if arrived is None:
        raise RuntimeError(f"round {n}: no words came")
    return (arrived - sent) * 1000


async def bench(dsn: str, args: argparse.Namespace) -> None:
    from appservice.door.grants import mint, new_grant
    from appservice.door.issue import ceilings_of

    result = compile_sources({"bots/caller.md": BOT}, kinds=KINDS, server_name=SERVER, kit=read_content(KIT_DIR))
    assert isinstance(result, Registry), result
    registry = result
    db = await TestStore.open(dsn, max_size=8)
    fake = FakeProvider()
    await fake.start()
    fake.always("openai", replace(openai_text(" ".join(f"w{n}" for n in range(20)), prompt=50, completion=20),
                                  first=FIRST, pace=0.01))
    clock = SystemClock()
    env = {"SUMMON_PROVIDERS": "first", "SUMMON_PROVIDER_FIRST_KIND": "openai",
           "SUMMON_PROVIDER_FIRST_URL": fake.openai_url, "SUMMON_PROVIDER_FIRST_KEY": "sk-first", "AGENTS_LIVE": "1"}
    answerer = choose_answerer(provider_settings(env), clock, prices=PRICES)
    surface = DoorSurface(lambda: registry, server_name=SERVER, service_user=f"@summon:{SERVER}")
    stop = asyncio.Event()
    tasks = TaskGroup("bench-door-stream")
    await publish(db, registry)
    worker = Worker(db, lambda: registry, answerer, {"voice": surface}, clock,
                    WorkerSettings(lease_seconds=30, poll_seconds=0.2, slots=4), streamed={"voice"},
                    surface_tools=KINDS.tools, worker_id="bench-worker", status=answerer.status())
    tasks.spawn(worker.run(stop), name="worker")
    config = DoorConfig(keys=KEYS, signing_key="k1", wait_seconds=20.0,
                        listen=Listen.model_construct(host="127.0.0.1", port=0))
    listener = DoorListener(config, store=db, registry=lambda: registry, clock=clock, surface=surface, tasks=tasks,
                            server_name=SERVER, service_user=f"@summon:{SERVER}", homeserver=None, whoami=None)
    await listener.start(stop)
    caller = registry.get("caller")
    assert caller is not None
    grant = mint(new_grant(bot="caller", person="@bench:localhost", room=None, audience=f"summon-door:{SERVER}",
                           ceilings=ceilings_of(caller) or Ceilings(), now=clock.now(), minutes=30,
                           minted_by="operator"), "k1", KEYS["k1"])
    door = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{listener.port}/v1", api_key=grant, max_retries=0)
    direct = openai.AsyncOpenAI(base_url=fake.openai_url, api_key="sk-first", max_retries=0)
    floor: list[float] = []
    through: list[float] = []
    try:
        for n in range(args.warmup + args.rounds):
            provider_ms = await first_word(direct, n)
            door_ms = await first_word(door, n)
            if n >= args.warmup:
                floor.append(provider_ms)
                through.append(door_ms)
    finally:
        await door.close()
        await direct.close()
        stop.set()
        await listener.stop()
        await tasks.close(grace=5.0)
        await answerer.aclose()
        await fake.close()
        await db.close()
    report(floor, through, args)


def report(floor: list[float], through: list[float], args: argparse.Namespace) -> None:
    print(f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; {args.rounds} rounds each after {args.warmup} "
          f"warm-up, alternating; the provider's first word {FIRST * 1000:.0f} ms after the request")
    print(f"{'ms to the first content delta':<40}{'p50':>9}{'p99':>9}{'min':>9}{'max':>9}")
    for name, ms in (("the provider, asked directly (floor)", floor), ("through the door", through)):
        print(f"{name:<40}{percentile(ms, 50):>9.1f}{percentile(ms, 99):>9.1f}{min(ms):>9.1f}{max(ms):>9.1f}")
    added = [t - f for t, f in zip(through, floor, strict=True)]
    print(f"the door adds: median {statistics.median(added):.1f} ms a round")
    write("door_stream", [
        Ratio("door first content byte p50 vs the provider's own", percentile(through, 50), percentile(floor, 50), "ms", 320 / 300),
        Ratio("door first content byte p99 vs the provider's own", percentile(through, 99), percentile(floor, 99), "ms", 1.2),
    ], {"door_p50_ms": percentile(through, 50), "provider_p50_ms": percentile(floor, 50),
        "added_median_ms": statistics.median(added), "rounds": args.rounds})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.door_stream", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args(argv)
    env = {**os.environ, **PORTS, "SUMMON_RUN_DIR": str(RUN_DIR)}
    up = subprocess.run([str(REPO / "synapse-dev" / "up")], env=env, capture_output=True, text=True)
    if up.returncode != 0:
        print(up.stderr, file=sys.stderr)
        return 1
    try:
        dsn = f"postgresql://postgres@127.0.0.1:{PORTS['SUMMON_PG_PORT']}/summon"
        asyncio.run(migrate(dsn))
        asyncio.run(bench(dsn, args))
        return 0
    finally:
        subprocess.run([str(REPO / "synapse-dev" / "down")], env=env, check=False)


if __name__ == "__main__":
    sys.exit(main())
