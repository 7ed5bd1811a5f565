"""20 SIGKILLs across 100 runs: three real `summon worker` processes on one PostgreSQL, a killer that
kills one of them (preferring one that holds a lease, so the kill lands mid-run) and starts a
replacement, 20 times. Every run must end answered exactly once: contiguous steps of the expected
kinds, one answer step, one outbox row (one Matrix message) per run.

The workers are forked warm by tests/faults/prefork.py and run `summon worker`'s own entry point: a cold
interpreter spends 3-6 s importing the provider SDKs on a small machine, and a killer waiting for that
would mostly kill workers that had not started yet."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from typing import Any

import pytest

from engine.content import Registry
from tests.db.runs import insert_run
from tests.faults.support import Processes, wait_for
from tests.store import TestStore

pytestmark = pytest.mark.db

RUNS = 100
KILLS = 20
WORKERS = 3
KINDS = ["model", "tool_call", "tool_result", "model", "answer"]


def script(n: int) -> list[dict[str, Any]]:
    # The delays spread the work over the killing (≈ 0.4 s a run on 2-6 live slots), so kills land on
    # runs in flight.
    return [
        {"tool_calls": [{"id": "c1", "name": "lookup", "arguments": {}}], "delay": 0.15},
        {"text": f"answer {n}", "delay": 0.25},
    ]


def pid_of(worker_id: str) -> int:
    # Worker ids are host:pid:random (engine.run.worker.new_worker_id).
    return int(worker_id.rsplit(":", 2)[1])


async def test_twenty_sigkills_across_a_hundred_runs(db: TestStore, dsn: str, published: Registry,
                                                     processes: Processes) -> None:
    began = time.monotonic()
    # A run may be hit by several kills; max_attempts is the design's limit on that, not what this test
    # is about, so it is set out of reach (a worn-out run would fail, correctly, and muddy the figure).
    ids = {await insert_run(db, script=script(n), max_attempts=50,
                            limits={"steps": 8, "spend": 0.25, "minutes": 5}): n for n in range(RUNS)}
    config = processes.worker_config(dsn, slots=2, lease_seconds=1, sweep_seconds=0.5, poll_seconds=0.2)
    live = [processes.worker(config) for _ in range(WORKERS)]

    await wait_for(lambda: db.pool.fetchval("SELECT count(*) > 0 FROM agent_steps"), timeout=30,
                   what="a first step")

    async def holders() -> list[Any]:
        owners = {pid_of(r["lease_owner"]) for r in await db.pool.fetch(
            "SELECT lease_owner FROM agent_runs WHERE status = 'running' AND lease_owner IS NOT NULL")}
        return [p for p in live if p.pid in owners]

    rng = random.Random(20)
    landed = 0
    for _ in range(KILLS):
        # Kill a worker that holds a run (a replacement still starting up holds nothing; killing it would
        # test nothing); wait a little for one, else kill any.
        try:
            candidates = await wait_for(holders, timeout=5, interval=0.02, what="a worker holding a run")
            landed += 1
        except AssertionError:
            candidates = live
        victim = rng.choice(candidates)
        victim.kill()
        live[live.index(victim)] = processes.worker(config)
        await asyncio.sleep(0.3)
    killing_took = time.monotonic() - began

    async def all_terminal() -> bool:
        left = await db.pool.fetchval(
            "SELECT count(*) FROM agent_runs WHERE status NOT IN ('done', 'failed', 'cancelled')")
        return bool(left == 0)

    await wait_for(all_terminal, timeout=40, interval=0.2, what="all runs terminal")
    # No worker died on its own (only the ones we killed).
    crashed = [p for p in live if not p.alive()]
    assert not crashed, [p.log.read_text(errors="replace")[-3000:] for p in crashed]

    runs = {r["id"]: r for r in await db.pool.fetch("SELECT id, status, ending, answer, attempts FROM agent_runs")}
    assert set(runs) == set(ids)
    for rid, n in ids.items():
        r = runs[rid]
        assert (r["status"], r["ending"], r["answer"]) == ("done", None, f"answer {n}"), dict(r)

    assert await db.pool.fetch(
        "SELECT run_id, seq FROM agent_steps GROUP BY run_id, seq HAVING count(*) > 1") == []
    steps: dict[int, list[Any]] = {}
    for s in await db.pool.fetch("SELECT run_id, seq, kind, payload, worker FROM agent_steps ORDER BY run_id, seq"):
        steps.setdefault(s["run_id"], []).append(s)
    for rid, n in ids.items():
        got = steps[rid]
        assert [s["seq"] for s in got] == list(range(1, len(got) + 1)), (rid, [s["seq"] for s in got])
        # Every model call recorded as started first; a call a kill interrupted is closed at its estimate and
        # made again, so what was done, left aside those, is the same for every run.
        done = [s for s in got if s["kind"] != "model_started"
                and not (s["kind"] == "model" and s["payload"].get("interrupted"))]
        assert [s["kind"] for s in done] == KINDS, (rid, [s["kind"] for s in got])
        for i, s in enumerate(got):
            if s["kind"] == "model":
                assert got[i - 1]["kind"] in ("model_started", "model"), (rid, [s["kind"] for s in got])
        answers = [s for s in got if s["kind"] == "answer"]
        assert len(answers) == 1 and answers[0]["payload"]["text"] == f"answer {n}"
        # The tool was asked for once and answered once, whoever answered it.
        assert [s["payload"]["call"]["id"] for s in got if s["kind"] == "tool_call"] == ["c1"]

    outbox = await db.pool.fetch("SELECT txn_id, run_id, content FROM outbox")
    txns = Counter(r["txn_id"] for r in outbox)
    assert txns == Counter({f"summon.run{rid}.answer": 1 for rid in ids}), "an answer queued twice or never"
    for r in outbox:
        assert r["content"]["body"] == f"answer {ids[r['run_id']]}"

    # The kills really landed mid-run: some runs were taken over by another worker and finished there.
    taken_over = [rid for rid in ids if runs[rid]["attempts"] > 1]
    two_workers = [rid for rid in ids if len({s["worker"] for s in steps[rid]}) > 1]
    interrupted = sum(1 for got in steps.values() for s in got
                      if s["kind"] == "tool_result" and s["payload"].get("interrupted"))
    assert landed >= KILLS // 2 and two_workers, "the kills did not land mid-run; the test proved nothing"
    print(f"\n{RUNS} runs, {KILLS} SIGKILLs ({landed} on a lease holder) in {killing_took:.1f}s; "
          f"all terminal after {time.monotonic() - began:.1f}s; {len(taken_over)} runs re-claimed, "
          f"{len(two_workers)} finished by a second worker ({interrupted} tool calls closed as interrupted); max attempts "
          f"{max(r['attempts'] for r in runs.values())}; {len(processes.started)} worker processes started")
