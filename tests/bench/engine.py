"""The engine alone against its floor: claim → scripted steps → finish, on a real PostgreSQL, with 1 and 8
workers (each model call is two step rows: started, then what came back) — and, in the same run on the same
database, the raw SQL floor: the same claim, fenced step and finish statements (read from engine/store/sql/queries by
name) through bare asyncpg connections with no engine around them.

Prints runs/s, step commits/s, claim / step-commit latency p50/p99, and the engine's throughput over the
floor's (target ≥ 0.8× at 1 and 8 workers); writes ``.dev/bench/engine.json``. Asserts nothing about speed.
Run: ``python -m tests.bench.engine``.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg

from appservice.kinds import KINDS
from appservice.matrix.surface import RoomFacts
from engine.clock import SystemClock
from engine.content import Registry, compile_sources
from engine.content.audience import AudienceFacts
from engine.content.files import read_content
from engine.core.messages import Step
from engine.run.hold import Hold
from engine.run.publish import publish
from engine.run.worker import Worker, WorkerSettings
from engine.store import Families, Store, Tx, migrate
from engine.store.base import init_connection
from engine.store.queries import Queries
from engine.store.runs import Claim
from engine.surface import RunInfo
from engine.tools.base import RunRef
from tests.bench.results import Ratio, write
from tests.book import stand_in, told
from tests.store import TestStore
from tests.support import STAND_IN

REPO = Path(__file__).resolve().parents[2]
RUN_DIR = REPO / ".dev" / "bench-engine-run"
PORTS = {"SUMMON_PG_PORT": "55435", "SUMMON_HS_PORT": "8011", "SUMMON_AS_PORT": "29336"}
RUNS = 400
SCRIPT: list[dict[str, Any]] = [{"tool_calls": [{"id": "a", "name": "noop", "arguments": {}}]}, {"text": "done"}]


class TimedHold(Hold):
    commits: list[float]

    async def record(self, steps: list[Step], step: Step, *, unless_cancelled: bool = False) -> bool:
        started = time.perf_counter()
        try:
            return await super().record(steps, step, unless_cancelled=unless_cancelled)
        finally:
            self.commits.append(time.perf_counter() - started)


class Timed(Worker):
    claims: list[float]
    commits: list[float]

    async def work_once(self) -> bool:
        started = time.perf_counter()
        claim = await self.store.runs.claim(self.id, self.settings.lease_seconds)
        self.claims.append(time.perf_counter() - started)
        if claim is None:
            return False
        await self.hold(claim)
        return True

    def holding(self, claim: Claim) -> Hold:
        hold = super().holding(claim)
        assert isinstance(hold, TimedHold)
        hold.commits = self.commits
        return hold


class Silent:
    """The rooms surface, saying nothing: who a person is comes from the room as stored (as the Matrix
    surface reads it); nothing is delivered, typed or published."""

    name = "rooms"

    def __init__(self) -> None:
        self.room_facts = RoomFacts("localhost")

    async def facts(self, db: Families, room_id: str | None, user_id: str | None, *,
                    site_classes: frozenset[str] = frozenset()) -> AudienceFacts:
        return await self.room_facts.facts(db, room_id, user_id, site_classes=site_classes)

    async def deliver(self, tx: Tx, run: RunInfo, outcome: Any) -> None:
        return None

    async def working(self, run: RunInfo, on: bool) -> None:
        return None

    async def published(self, registry: Registry) -> None:
        return None


async def noop(run: RunRef, arguments: dict[str, Any]) -> str:
    return "ok"


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] * 1000 if len(values) > 1 else 0.0


async def queue_runs(db: TestStore) -> None:
    await db.pool.execute("TRUNCATE agent_runs, agent_steps CASCADE")
    for _ in range(RUNS):
        run_id = await db.runs.insert(bot="helper", surface="rooms", place="!bench:localhost", thread=None,
                                      trigger_event=None, asked_by="@b:localhost", subject="@b:localhost",
                                      prompt=told("go", SCRIPT), context={},
                                      limits={"steps": 8, "spend": 1, "minutes": 5}, max_attempts=3)
        assert run_id is not None
    await db.pool.execute("VACUUM ANALYZE agent_runs")


# The step rows a run of SCRIPT writes, in the engine's commits: five fenced steps of their own (each model call's
# start with its spend drawn, its answer with its spend settled), then the model's last word and the answer with
# the finish and the run's spend settled (one commit).
RAW_STEPS: list[dict[str, Any]] = [
    {"kind": "model_started", "estimate_usd": 0.0},
    {"kind": "model", "tool_calls": [{"id": "a", "name": "noop", "arguments": {}}], "provider": "mock"},
    {"kind": "tool_call", "call": {"id": "a", "name": "noop", "arguments": {}}},
    {"kind": "tool_result", "call_id": "a", "content": "ok", "is_error": False},
    {"kind": "model_started", "estimate_usd": 0.0},
]
RAW_FINISH: list[dict[str, Any]] = [{"kind": "model", "text": "done", "provider": "mock"},
                                    {"kind": "answer", "text": "done"}]


async def raw_spend(conn: asyncpg.Connection, q: Queries, run_id: int, step: dict[str, Any]) -> None:
    """The spend the engine writes beside a step, in its commit: a call's worst case drawn from the run's
    reservation before it is made, settled to its cost when it comes back (issue 27: the floor does every durable
    write a run must make)."""
    if step["kind"] == "model_started":
        await conn.execute(q["draw_spend"], run_id, step["estimate_usd"])
    elif step["kind"] == "model":
        await conn.execute(q["spend_call"], run_id, 0.0)


async def raw_worker(conn: asyncpg.Connection, owner: str, q: Queries, commits: list[float],
                     claims: list[float]) -> int:
    """The floor: the engine's own statements for one run after another, and nothing else."""
    done = 0
    while True:
        started = time.perf_counter()
        claimed = await conn.fetchrow(q["claim_runs"], owner, 90.0, 1)  # the engine claims one at a time when one slot is free
        claims.append(time.perf_counter() - started)
        if claimed is None:
            return done
        run_id = claimed["id"]
        for seq, step in enumerate(RAW_STEPS, start=1):
            started = time.perf_counter()
            async with conn.transaction():
                await conn.fetchrow(q["fence_run"], run_id, owner, 90.0)
                await conn.execute(q["insert_step"], run_id, seq, step["kind"], step,
                                   step.get("provider"), None, 0, 0, 0.0, owner)
                await raw_spend(conn, q, run_id, step)
            commits.append(time.perf_counter() - started)
        async with conn.transaction():
            await conn.fetchrow(q["fence_run"], run_id, owner, 90.0)
            for seq, step in enumerate(RAW_FINISH, start=len(RAW_STEPS) + 1):
                await conn.execute(q["insert_step"], run_id, seq, step["kind"], step,
                                   step.get("provider"), None, 0, 0, 0.0, owner)
                await raw_spend(conn, q, run_id, step)
            await conn.fetchval(q["finish_run"], run_id, owner, "done", None, None, "done")
            await conn.execute(q["settle_spend"], run_id)
        done += 1


async def raw_round(dsn: str, workers: int) -> dict[str, float]:
    db = await TestStore.open(dsn, min_size=1, max_size=2)
    try:
        await queue_runs(db)
    finally:
        await db.close()
    conns = [await asyncpg.connect(dsn) for _ in range(workers)]
    for conn in conns:
        await init_connection(conn)
    q = Queries()
    commits: list[float] = []
    claims: list[float] = []
    try:
        started = time.perf_counter()
        done = sum(await asyncio.gather(*(raw_worker(c, f"raw-{n}", q, commits, claims)
                                          for n, c in enumerate(conns))))
        took = time.perf_counter() - started
    finally:
        for conn in conns:
            await conn.close()
    print(f"{workers:>2} raw SQL  : {done} runs in {took:.2f}s = {done / took:6.0f} runs/s | claim p50 "
          f"{pct(claims, 50):.2f} ms p99 {pct(claims, 99):.2f} ms | step commit p50 {pct(commits, 50):.2f} ms "
          f"p99 {pct(commits, 99):.2f} ms")
    return {"runs_per_s": done / took, "claim_p99_ms": pct(claims, 99), "commit_p99_ms": pct(commits, 99)}


async def round_(dsn: str, registry: Registry, workers: int) -> dict[str, float]:
    db = await TestStore.open(dsn, min_size=workers + 2, max_size=workers + 4)
    try:
        await queue_runs(db)
        clock = SystemClock()
        pool = []
        for n in range(workers):
            w = Timed(db, lambda: registry, stand_in(clock), {"rooms": Silent()}, clock, WorkerSettings(),
                      harness={"noop": noop}, worker_id=f"bench-{n}", status=STAND_IN, hold=TimedHold)
            w.claims, w.commits = [], []
            pool.append(w)

        async def drain(w: Worker) -> None:
            while await w.work_once():
                pass

        started = time.perf_counter()
        await asyncio.gather(*(drain(w) for w in pool))
        took = time.perf_counter() - started
        done = await db.pool.fetchval("SELECT count(*) FROM agent_runs WHERE status = 'done'")
        steps = await db.pool.fetchval("SELECT count(*) FROM agent_steps")
        claims = [c for w in pool for c in w.claims]
        commits = [c for w in pool for c in w.commits]
        print(f"{workers:>2} engine   : {done} runs in {took:.2f}s = {done / took:6.0f} runs/s, "
              f"{steps / took:6.0f} step rows/s | claim p50 {pct(claims, 50):.2f} ms p99 {pct(claims, 99):.2f} ms"
              f" | step commit p50 {pct(commits, 50):.2f} ms p99 {pct(commits, 99):.2f} ms")
        return {"runs_per_s": done / took, "step_rows_per_s": steps / took, "claim_p99_ms": pct(claims, 99),
                "commit_p99_ms": pct(commits, 99)}
    finally:
        await db.close()


async def main() -> int:
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
        print(f"engine alone: {RUNS} runs of claim → model → tool → model → answer (7 step rows), "
              f"scripted model, {os.cpu_count()} cores; target: the engine ≥ 0.8 × the raw SQL floor")
        ratios: list[Ratio] = []
        figures: dict[str, Any] = {}
        for workers in (1, 8):
            # Floor and engine alternate, each once before and once after, so a drift in the machine's load
            # falls on both: the better of two of each counts.
            floor = [await raw_round(dsn, workers)]
            engine = [await round_(dsn, result, workers)]
            floor.append(await raw_round(dsn, workers))
            engine.append(await round_(dsn, result, workers))
            best_floor = max(f["runs_per_s"] for f in floor)
            best_engine = max(e["runs_per_s"] for e in engine)
            figures[f"workers_{workers}"] = {"raw": floor, "engine": engine}
            ratios.append(Ratio(f"runs/s at {workers} worker(s)", best_engine, best_floor, "runs/s", 0.8, "at_least"))
        write("engine", ratios, figures)
        return 0
    finally:
        subprocess.run([str(REPO / "synapse-dev" / "down")], env=env, check=False)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
