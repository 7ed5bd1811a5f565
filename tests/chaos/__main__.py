"""`make chaos`: a steady stream of mentions through the real stack (Synapse, PostgreSQL, `summon serve`, three
`summon worker` processes, the fake provider answering in ~1.5 s over two calls and a tool), and in turn each
standard fault (tests/chaos/scenarios.py), each judged (tests/chaos/measure.py): runs lost, answers duplicated,
steps duplicated, recovery, throughput retained, p99 mention → answer before, during and after. Prints the table
and writes ``.dev/chaos/chaos.json``. Exit 1 when a scenario lost or duplicated an answer (or the run broke).

Knobs: CHAOS_RATE (mentions a second, 1), CHAOS_ROOMS × CHAOS_PER_ROOM people (15 × 20), CHAOS_ONLY (scenario
names, comma-separated), CHAOS_TIME_SCALE (every fault window ×, 1), CHAOS_SOAK_MINUTES (a fault-free soak
first, 0), CHAOS_BASELINE_SECONDS (15), CHAOS_AFTER_SECONDS (30), and each window's own (scenarios.py); ports
in tests/chaos/stack.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import platform
import random
import subprocess
import sys
import time
from typing import Any

import asyncpg

from tests.chaos.measure import DB_COUNTS, Result, Window, judge, table
from tests.chaos.people import Mention, People
from tests.chaos.scenarios import SCENARIOS, Scenario
from tests.chaos.stack import WORK, Settings, Stack

log = logging.getLogger("chaos")


def env_float(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


class Chaos:
    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.rate = env_float("CHAOS_RATE", 1.0)
        self.rate_factor = 1.0
        self.held_back = 0
        self.sent = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self.rng = random.Random(29)

    @property
    def admin(self) -> asyncpg.Pool:
        assert self.stack.admin is not None
        return self.stack.admin

    @property
    def people(self) -> People:
        assert self.stack.people is not None
        return self.stack.people

    async def stream(self, stop: asyncio.Event) -> None:
        """Mentions at ``rate × rate_factor`` a second, evenly spaced, each by someone with nothing unanswered
        (a person's second mention while their first is unanswered would join that run, by design). With
        nobody free, the mention is held back and counted."""
        next_at = time.monotonic()
        while not stop.is_set():
            free = self.people.free()
            if free:
                person = self.rng.choice(free)
                self.sent += 1
                task = asyncio.ensure_future(self.people.mention(person, self.sent))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            else:
                self.held_back += 1
            next_at += 1 / (self.rate * self.rate_factor)
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    async def settle(self, timeout: float = 90) -> None:
        """Until every mention sent before now is answered (or ``timeout``): a scenario starts from a quiet queue.
        (The stream goes on meanwhile; the mentions it sends now are the next scenario's.)"""
        pending = set(self._tasks)
        if pending:
            await asyncio.wait(pending, timeout=timeout)
        waiting = [m for m in self.people.mentions.values() if not m.answers]
        deadline = time.monotonic() + timeout
        while any(not m.answers for m in waiting) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)

    async def db_counts(self, mentions: list[Mention]) -> dict[str, int]:
        row = await self.admin.fetchrow(DB_COUNTS, [m.event_id for m in mentions])
        assert row is not None
        return dict(row)


async def run_one(chaos: Chaos, scenario: Scenario, baseline: float, after: float) -> Window:
    await chaos.settle()
    start = time.time()
    await asyncio.sleep(baseline)
    fs = time.time()
    print(f"  {scenario.name}: {scenario.what} …", flush=True)
    notes = await scenario.fault(chaos)
    fe = time.time()
    await asyncio.sleep(after)
    return Window(scenario.name, scenario.what, start, fs, fe, time.time(), notes)


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


async def main() -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("asyncpg.pool").setLevel(logging.ERROR)  # the harness's own pool across a restart
    only = {n.strip() for n in os.environ.get("CHAOS_ONLY", "").split(",") if n.strip()}
    unknown = only - {s.name for s in SCENARIOS}
    if unknown:
        print(f"CHAOS_ONLY: no scenario named {', '.join(sorted(unknown))}; the scenarios are "
              f"{', '.join(s.name for s in SCENARIOS)}", file=sys.stderr)
        return 2
    chosen = [s for s in SCENARIOS if not only or s.name in only]
    baseline, after = env_float("CHAOS_BASELINE_SECONDS", 15), env_float("CHAOS_AFTER_SECONDS", 30)
    soak = env_float("CHAOS_SOAK_MINUTES", 0) * 60
    rooms, per_room = int(env_float("CHAOS_ROOMS", 15)), int(env_float("CHAOS_PER_ROOM", 20))
    settings = Settings()
    stack = Stack(settings)
    began = time.time()
    load_before = uptime()
    print(f"chaos: {platform.node()}, {os.cpu_count()} cores; {load_before}")
    windows: list[Window] = []
    stop = asyncio.Event()
    chaos = Chaos(stack)
    try:
        await stack.up()
        print(f"  stack up: Synapse :{settings.hs}, PostgreSQL :{settings.pg}, summon serve + {settings.workers} workers "
              f"(lease {settings.lease:g} s, sweep {settings.sweep:g} s, poll {settings.poll:g} s, provider timeout "
              f"{settings.provider_timeout:g} s)", flush=True)
        await chaos.people.gather(rooms, per_room)
        print(f"  {rooms * per_room} people in {rooms} rooms with the bot; {chaos.rate:g} mentions/s", flush=True)
        streaming = asyncio.ensure_future(chaos.stream(stop))
        await asyncio.sleep(20)  # warm: the first answers, the pools filled
        if soak:
            windows.append(await run_one(chaos, Scenario("soak", f"{soak / 60:g} min, no fault", _idle(soak)),
                                         baseline, 0))
        for scenario in chosen:
            windows.append(await run_one(chaos, scenario, baseline, after))
            crashed = [w.pid for w in stack.workers if not w.alive()]
            if crashed:
                print(f"  a worker died on its own after {scenario.name}: {crashed}", flush=True)
        stop.set()
        await streaming
        await chaos.settle(timeout=180)
        mentions = list(chaos.people.mentions.values())
        results: list[Result] = []
        for w in windows:
            ours = [m for m in mentions if w.baseline_start <= m.sent < w.after_end]
            results.append(judge(w, mentions, await chaos.db_counts(ours)))
    finally:
        stop.set()
        await stack.down()
    load_after = uptime()
    print()
    print(table(results))
    bad = [r.scenario for r in results if r.lost or r.answers_duplicated or r.steps_duplicated]
    out = {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(began)), "machine": platform.node(),
           "cores": os.cpu_count(), "uptime_before": load_before, "uptime_after": load_after,
           "rate_per_s": chaos.rate, "people": rooms * per_room, "held_back": chaos.held_back,
           "send_failures": chaos.people.send_failures,
           "settings": {"lease_s": settings.lease, "sweep_s": settings.sweep, "poll_s": settings.poll,
                        "provider_timeout_s": settings.provider_timeout, "workers": settings.workers},
           "minutes": round((time.time() - began) / 60, 1), "results": [r.json() for r in results]}
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "chaos.json").write_text(json.dumps(out, indent=1))
    print(f"\n{load_after}; {out['minutes']} min; held back (nobody free) {chaos.held_back}, sends the homeserver "
          f"never took {chaos.people.send_failures}; figures in {WORK / 'chaos.json'}")
    for r in results:
        if r.notes:
            print(f"  {r.scenario}: {r.notes}")
    if bad:
        print(f"LOST OR DUPLICATED in: {', '.join(bad)}")
        return 1
    return 0


def _idle(seconds: float) -> Any:
    async def fault(chaos: Chaos) -> dict[str, Any]:
        await asyncio.sleep(seconds)
        return {}
    return fault


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
