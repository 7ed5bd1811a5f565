"""How many worker slots keep one process busy when every model call takes 2 s: the real worker (``Worker.run``:
its slots, NOTIFY, heartbeat, sweep) on a real PostgreSQL with the default database pool (10 connections), a
scripted model that answers after ``LATENCY`` seconds, and ``ROUNDS_OF`` × slots runs queued for each setting.

For each slot count it prints the runs answered per second, the ideal (slots / latency), how much of the ideal
was reached, the process's CPU (user + system seconds over wall seconds: 1.0 is one of the two cores), the
most database connections in use at once, and the p50/max time from a run's creation to its end. The default
``worker.slots`` is chosen from this (``summon.example.yaml`` says how to size it). Asserts nothing about
speed. Run: ``python -m tests.bench.slots [--slots 2,64,256] [--latency 2]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from appservice.kinds import KINDS
from engine.clock import SystemClock
from engine.content import Registry, compile_sources
from engine.content.files import read_content
from engine.run.publish import publish
from engine.run.worker import Worker, WorkerSettings
from engine.store import Store, migrate
from tests.bench.engine import Silent
from tests.book import stand_in
from tests.store import TestStore
from tests.support import STAND_IN

REPO = Path(__file__).resolve().parents[2]
RUN_DIR = REPO / ".dev" / "bench-slots-run"
PORTS = {"SUMMON_PG_PORT": "55465", "SUMMON_HS_PORT": "8045", "SUMMON_AS_PORT": "29365"}
ROUNDS_OF = 4  # runs queued per slot: four waves, so the first wave's start-up is a small part of it
POOL_MAX = 10  # database.pool_max's default


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def round_(dsn: str, registry: Registry, slots: int, latency: float) -> None:
    db = await TestStore.open(dsn, min_size=2, max_size=POOL_MAX)
    try:
        await db.pool.execute("TRUNCATE agent_runs, agent_steps CASCADE")
        script: list[dict[str, Any]] = [{"text": "done", "delay": latency}]
        runs = slots * ROUNDS_OF
        await db.pool.executemany(
            "INSERT INTO agent_runs (bot, surface, place, asked_by, prompt, context, script, limits, max_attempts)"
            " VALUES ('helper', 'rooms', '!bench:localhost', '@b:localhost', 'go', $1, $2, $3, 3)",
            [({}, script, {"steps": 8, "spend": 1, "minutes": 5})] * runs)
        clock = SystemClock()
        worker = Worker(db, lambda: registry, stand_in(clock, reason="chosen"), {"rooms": Silent()}, clock,
                        WorkerSettings(slots=slots, poll_seconds=0.5), worker_id=f"bench-slots-{slots}", status=STAND_IN)
        stop = asyncio.Event()
        busiest = 0

        async def watch() -> None:
            nonlocal busiest
            while not stop.is_set():
                busiest = max(busiest, db.pool.get_size() - db.pool.get_idle_size())
                await asyncio.sleep(0.01)

        cpu, started = cpu_seconds(), time.perf_counter()
        task = asyncio.ensure_future(worker.run(stop))
        watcher = asyncio.ensure_future(watch())
        while await db.pool.fetchval("SELECT count(*) FROM agent_runs WHERE status = 'done'") < runs:
            await asyncio.sleep(0.05)
        took, used = time.perf_counter() - started, cpu_seconds() - cpu
        stop.set()
        await asyncio.gather(task, watcher)
        spans = [float(r["s"]) for r in await db.pool.fetch(
            "SELECT extract(epoch FROM finished_at - created_at) AS s FROM agent_runs")]
        # The first wave starts with the worker; a run's wait is its time in the queue behind the others.
        ideal = slots / latency
        print(f"{slots:>4} slots: {runs:>5} runs in {took:6.2f} s = {runs / took:6.1f} runs/s "
              f"(ideal {ideal:6.1f}, {runs / took / ideal:4.0%}) | CPU {used / took:4.2f} | "
              f"connections in use at most {busiest:>2}/{POOL_MAX} | created → done p50 "
              f"{statistics.median(spans):5.2f} s, max {max(spans):5.2f} s")
    finally:
        await db.close()


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--slots", default="2,16,64,128,256,512")
    parser.add_argument("--latency", type=float, default=2.0)
    args = parser.parse_args()
    env = {**os.environ, **PORTS, "SUMMON_RUN_DIR": str(RUN_DIR)}
    up = subprocess.run([str(REPO / "synapse-dev" / "up")], env=env, capture_output=True, text=True)
    if up.returncode != 0:
        print(up.stderr, file=sys.stderr)
        return 1
    try:
        dsn = f"postgresql://postgres@127.0.0.1:{PORTS['SUMMON_PG_PORT']}/summon"
        await migrate(dsn)
        result = compile_sources(read_content(REPO / "content"), kinds=KINDS, server_name="localhost")
        assert isinstance(result, Registry), result
        db = await Store.connect(dsn, min_size=1, max_size=2)
        await publish(db, result)
        await db.close()
        print(f"worker slots at {args.latency:g} s model latency: one process, {os.cpu_count()} cores, "
              f"a pool of {POOL_MAX} connections, {ROUNDS_OF} runs queued per slot")
        for slots in (int(s) for s in args.slots.split(",")):
            await round_(dsn, result, slots, args.latency)
        return 0
    finally:
        subprocess.run([str(REPO / "synapse-dev" / "down")], env=env, check=False)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
