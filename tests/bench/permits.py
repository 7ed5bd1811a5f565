"""What keeping a provider's limits through PostgreSQL costs, and what the choice of mechanism costs: the leased
permits summon uses (``engine/providers/limits.py``) against session advisory locks, one per in-flight slot.

Three "processes" (each its own pool of ``POOL`` connections, as three workers would have) make ``CALLS`` model
calls between them, ``CONCURRENT`` at once each, to a provider kept to ``LIMIT`` calls in flight; a call takes
``CALL_SECONDS``. Prints, per mechanism: calls per second, the time to take and give back leave to call (p50 /
p99), the most calls in flight, and the most database connections held while the calls wait for the model.
Asserts nothing about speed. Run: ``python -m tests.bench.permits``.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg

from engine.clock import SystemClock
from engine.core.permits import ProviderLimits
from engine.providers.limits import Limiter, Permit
from engine.store import migrate
from engine.store.base import init_connection
from tests.store import TestStore

REPO = Path(__file__).resolve().parents[2]
RUN_DIR = REPO / ".dev" / "bench-permits-run"
PORTS = {"SUMMON_PG_PORT": "55466", "SUMMON_HS_PORT": "8046", "SUMMON_AS_PORT": "29366"}
PROCESSES, CONCURRENT, CALLS, LIMIT, CALL_SECONDS, POOL = 3, 40, 720, 50, 1.0, 10


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] * 1000 if len(values) > 1 else 0.0


class Counter:
    def __init__(self) -> None:
        self.now = 0
        self.most = 0

    def enter(self) -> None:
        self.now += 1
        self.most = max(self.most, self.now)

    def leave(self) -> None:
        self.now -= 1


async def drive(name: str, calls_per_process: int,
                call: Callable[[int, list[float], Counter], Awaitable[None]], held: Callable[[], int]) -> None:
    taken: list[float] = []
    flying = Counter()
    samples: list[int] = []
    stop = asyncio.Event()

    async def watch() -> None:
        while not stop.is_set():
            if flying.now == LIMIT:  # every permit out: the calls are waiting for the model
                samples.append(held())
            await asyncio.sleep(0.005)

    watcher = asyncio.ensure_future(watch())
    started = time.perf_counter()

    async def caller(p: int, n: int) -> None:
        for _ in range(n):
            await call(p, taken, flying)

    per_caller = calls_per_process // CONCURRENT
    await asyncio.gather(*(caller(p, per_caller) for p in range(PROCESSES) for _ in range(CONCURRENT)))
    took = time.perf_counter() - started
    stop.set()
    await watcher
    done = PROCESSES * CONCURRENT * per_caller
    print(f"{name:>16}: {done} calls in {took:5.2f} s = {done / took:6.0f} calls/s (ideal {LIMIT / CALL_SECONDS:.0f}) | "
          f"leave to call taken + given back p50 {pct(taken, 50):5.2f} ms, p99 {pct(taken, 99):6.2f} ms | "
          f"most in flight {flying.most}/{LIMIT} | connections held while {LIMIT} calls await the model: "
          f"mean {statistics.mean(samples or [0]):.1f}, most {max(samples or [0])}")


async def permits(dsn: str) -> None:
    stores = [await TestStore.open(dsn, min_size=2, max_size=POOL) for _ in range(PROCESSES)]
    clock = SystemClock()
    limits = {"p": ProviderLimits(max_in_flight=LIMIT, call_seconds=30)}
    limiters = [Limiter(s, clock, f"bench-{n}", limits) for n, s in enumerate(stores)]
    stop = asyncio.Event()
    running = [asyncio.ensure_future(x.run(stop)) for x in limiters]
    try:
        async def call(p: int, taken: list[float], flying: Counter) -> None:
            t0 = time.perf_counter()
            permit = await limiters[p].acquire("p", tokens=100, run_id=None, lease=30, within=60)
            assert isinstance(permit, Permit)
            t1 = time.perf_counter()
            flying.enter()
            await asyncio.sleep(CALL_SECONDS)
            flying.leave()
            t2 = time.perf_counter()
            await limiters[p].release(permit, tokens=100)
            # What a call spends on its leave, less the waiting in line (that is the limit doing its job).
            taken.append((t1 - t0 if t1 - t0 < 0.01 else 0.0) + time.perf_counter() - t2)

        def held() -> int:
            return sum(s.pool.get_size() - s.pool.get_idle_size() for s in stores)

        await drive("leased permits", CALLS // PROCESSES, call, held)
    finally:
        stop.set()
        await asyncio.gather(*running)
        for s in stores:
            await s.close()


async def advisory(dsn: str) -> None:
    """One session advisory lock per in-flight slot, held by its connection for the whole call."""
    pools = [await asyncpg.create_pool(dsn, min_size=2, max_size=POOL + CONCURRENT, init=init_connection)
             for _ in range(PROCESSES)]
    try:
        async def call(p: int, taken: list[float], flying: Counter) -> None:
            t0 = time.perf_counter()
            conn = await pools[p].acquire()
            try:
                while True:
                    got = await conn.fetchval(
                        "SELECT s FROM generate_series(1, $1) s WHERE pg_try_advisory_lock(424242, s) LIMIT 1", LIMIT)
                    if got is not None:
                        break
                    await asyncio.sleep(0.005)  # no line to wait in: try again
                t1 = time.perf_counter()
                flying.enter()
                await asyncio.sleep(CALL_SECONDS)
                flying.leave()
                t2 = time.perf_counter()
                await conn.execute("SELECT pg_advisory_unlock(424242, $1)", got)
                taken.append((t1 - t0 if t1 - t0 < 0.01 else 0.0) + time.perf_counter() - t2)
            finally:
                await pools[p].release(conn)

        def held() -> int:
            return sum(p.get_size() - p.get_idle_size() for p in pools)

        await drive("advisory locks", CALLS // PROCESSES, call, held)
    finally:
        for p in pools:
            await p.close()


async def main() -> int:
    env = {**os.environ, **PORTS, "SUMMON_RUN_DIR": str(RUN_DIR)}
    up = subprocess.run([str(REPO / "synapse-dev" / "up")], env=env, capture_output=True, text=True)
    if up.returncode != 0:
        print(up.stderr, file=sys.stderr)
        return 1
    try:
        dsn = f"postgresql://postgres@127.0.0.1:{PORTS['SUMMON_PG_PORT']}/summon"
        await migrate(dsn)
        print(f"provider limits through PostgreSQL: {PROCESSES} processes × {CONCURRENT} callers, {CALLS} calls of "
              f"{CALL_SECONDS * 1000:.0f} ms, {LIMIT} in flight at most, {os.cpu_count()} cores")
        await permits(dsn)
        await advisory(dsn)
        return 0
    finally:
        subprocess.run([str(REPO / "synapse-dev" / "down")], env=env, check=False)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
