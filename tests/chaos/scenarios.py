"""The faults, each an async function that starts it, keeps it up for its window and takes it away. Windows
are the defaults below times CHAOS_TIME_SCALE (1; 0.25 for a quick look), each overridable on its own."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import asyncpg

if TYPE_CHECKING:
    from tests.chaos.__main__ import Chaos

SCALE = float(os.environ.get("CHAOS_TIME_SCALE", 1))


def seconds(name: str, default: float) -> float:
    return float(os.environ.get(name, default * SCALE))


Fault = Callable[["Chaos"], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Scenario:
    name: str
    what: str
    fault: Fault


def pid_of(worker_id: str) -> int:
    return int(worker_id.rsplit(":", 2)[1])  # host:pid:random (engine.run.worker.new_worker_id)


async def holders(chaos: Chaos) -> list[Any]:
    """The live workers that hold a run's lease now."""
    owners = {pid_of(r["lease_owner"]) for r in await chaos.admin.fetch(
        "SELECT lease_owner FROM agent_runs WHERE status = 'running' AND lease_owner IS NOT NULL")}
    return [w for w in chaos.stack.workers if w.pid in owners]


async def crash(chaos: Chaos) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while not (busy := await holders(chaos)) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    victim = random.choice(busy or chaos.stack.workers)
    chaos.stack.replace(victim)
    return {"mid_step": bool(busy)}


async def repeated_kills(chaos: Chaos) -> dict[str, Any]:
    every, span = float(os.environ.get("CHAOS_KILL_EVERY", 4)), seconds("CHAOS_KILLS_SECONDS", 60)
    end = time.monotonic() + span
    kills = on_holder = 0
    while time.monotonic() < end:
        busy = await holders(chaos)
        on_holder += bool(busy)
        chaos.stack.replace(random.choice(busy or chaos.stack.workers))
        kills += 1
        await asyncio.sleep(every)
    return {"kills": kills, "on_a_lease_holder": on_holder}


def restart(mode: str) -> Fault:
    async def fault(chaos: Chaos) -> dict[str, Any]:
        pg = chaos.stack.postgres
        began = time.monotonic()
        await asyncio.to_thread(pg._pg_ctl, "restart", "-m", mode, "-w", "-t", "60")
        await asyncio.to_thread(pg._record_pid)
        return {"restart_s": round(time.monotonic() - began, 2)}
    return fault


async def backend_kills(chaos: Chaos) -> dict[str, Any]:
    rate, span = float(os.environ.get("CHAOS_BACKEND_KILLS_PER_S", 2)), seconds("CHAOS_BACKEND_SECONDS", 30)
    end = time.monotonic() + span
    killed = 0
    while time.monotonic() < end:
        # summon's connections to its own database only: never Synapse's, never this harness's own.
        killed += await chaos.admin.fetchval(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM (SELECT pid FROM pg_stat_activity"
            " WHERE datname = 'summon' AND backend_type = 'client backend' AND application_name <> 'chaos-harness'"
            " AND pid <> pg_backend_pid() ORDER BY random() LIMIT 1) s") or 0
        await asyncio.sleep(1 / rate)
    return {"backends_killed": killed, "per_s": rate}


async def pool_exhaustion(chaos: Chaos) -> dict[str, Any]:
    span = seconds("CHAOS_EXHAUST_SECONDS", 30)
    taken: list[asyncpg.Connection] = []
    dsn = chaos.stack.env["SUMMON_DSN"].rsplit("/", 1)[0] + "/postgres"  # someone else's database, same server
    try:
        while True:
            try:
                taken.append(await asyncpg.connect(dsn, server_settings={"application_name": "chaos-harness"}))
            except (asyncpg.TooManyConnectionsError, asyncpg.CannotConnectNowError, OSError):
                break
            except asyncpg.PostgresError as exc:
                if "too many" in str(exc) or "reserved" in str(exc):
                    break
                raise
        free = await chaos.admin.fetchval(
            "SELECT current_setting('max_connections')::int - count(*) FROM pg_stat_activity"
            " WHERE backend_type = 'client backend'")
        await asyncio.sleep(span)
    finally:
        for conn in taken:
            with contextlib.suppress(Exception):
                await conn.close()
    return {"connections_taken": len(taken), "left_free": free}


async def held_xmin(chaos: Chaos) -> dict[str, Any]:
    span = seconds("CHAOS_XMIN_SECONDS", 90)
    conn = await asyncpg.connect(chaos.stack.env["SUMMON_DSN"], server_settings={"application_name": "chaos-harness"})
    dead = "SELECT relname, n_dead_tup FROM pg_stat_user_tables WHERE relname IN ('agent_runs', 'agent_steps', 'outbox')"
    try:
        before = {r["relname"]: r["n_dead_tup"] for r in await chaos.admin.fetch(dead)}
        tx = conn.transaction(isolation="repeatable_read")
        await tx.start()
        await conn.fetchval("SELECT count(*) FROM agent_runs")  # the snapshot is taken: xmin held from here
        await asyncio.sleep(span)
        after = {r["relname"]: r["n_dead_tup"] for r in await chaos.admin.fetch(dead)}
        await tx.rollback()
    finally:
        await conn.close()
    return {"dead_tuples_before": before, "dead_tuples_after": after}


async def concurrent_readers(chaos: Chaos) -> dict[str, Any]:
    span, readers = seconds("CHAOS_READERS_SECONDS", 30), int(os.environ.get("CHAOS_READERS", 3))
    end = time.monotonic() + span
    scans = 0

    async def reader() -> None:
        nonlocal scans
        conn = await asyncpg.connect(chaos.stack.env["SUMMON_DSN"],
                                     server_settings={"application_name": "chaos-harness"})
        try:
            while time.monotonic() < end:
                async with conn.transaction(isolation="repeatable_read", readonly=True):
                    for _ in range(5):  # a long report: five full scans in one snapshot
                        await conn.fetchval(
                            "SELECT count(*) + sum(length(s.payload::text)) FROM agent_steps s"
                            " JOIN agent_runs r ON r.id = s.run_id LEFT JOIN outbox o ON o.run_id = r.id")
                        scans += 1
                        await asyncio.sleep(0.2)
        finally:
            await conn.close()

    await asyncio.gather(*(reader() for _ in range(readers)))
    return {"readers": readers, "scans": scans}


async def burst(chaos: Chaos) -> dict[str, Any]:
    span, times = seconds("CHAOS_BURST_SECONDS", 30), float(os.environ.get("CHAOS_BURST_TIMES", 10))
    chaos.rate_factor = times
    try:
        await asyncio.sleep(span)
    finally:
        chaos.rate_factor = 1.0
    return {"times": times, "held_back": chaos.held_back}


async def homeserver_down(chaos: Chaos) -> dict[str, Any]:
    span = seconds("CHAOS_HS_DOWN_SECONDS", 30)
    hs = chaos.stack.synapse
    assert hs is not None
    await asyncio.to_thread(hs.stop)
    await asyncio.sleep(span)
    await asyncio.to_thread(hs.start)
    return {"down_s": span}


async def homeserver_slow(chaos: Chaos) -> dict[str, Any]:
    span = seconds("CHAOS_HS_SLOW_SECONDS", 30)
    assert chaos.stack.proxy is not None
    chaos.stack.proxy.delay = 2.0
    try:
        await asyncio.sleep(span)
    finally:
        chaos.stack.proxy.delay = 0.0
    return {"added_s": 2.0}


def provider(mode: str, name: str, default: float) -> Fault:
    async def fault(chaos: Chaos) -> dict[str, Any]:
        span = seconds(name, default)
        p = chaos.stack.provider
        calls = dict(p.calls)
        p.mode = mode  # type: ignore[assignment]
        try:
            await asyncio.sleep(span)
        finally:
            p.mode = "ok"
        return {"primary_calls": p.calls["openai"] - calls["openai"],
                "backup_calls": p.calls["anthropic"] - calls["anthropic"]}
    return fault


async def half_open_listen(chaos: Chaos) -> dict[str, Any]:
    span = seconds("CHAOS_HALF_OPEN_SECONDS", 30)
    listen = chaos.stack.listen
    assert listen is not None
    listen.silence()
    silenced = listen.dead
    await asyncio.sleep(span)
    listen.speak()
    return {"connections_silenced": silenced, "still_dead_at_end": listen.dead,
            "poll_seconds": chaos.stack.s.poll}


SCENARIOS = [
    Scenario("crash", "SIGKILL one worker mid-step, restart it", crash),
    Scenario("repeated-kills", "SIGKILL a random worker every 4 s for a minute", repeated_kills),
    Scenario("pg-restart-fast", "PostgreSQL restarted, fast shutdown", restart("fast")),
    Scenario("pg-restart-immediate", "PostgreSQL restarted, immediate shutdown (crash recovery)", restart("immediate")),
    Scenario("backend-kills", "pg_terminate_backend on summon's connections, 2 a second", backend_kills),
    Scenario("pool-exhaustion", "every free connection slot taken by someone else", pool_exhaustion),
    Scenario("held-xmin", "a REPEATABLE READ transaction left idle (xmin held)", held_xmin),
    Scenario("concurrent-readers", "3 long REPEATABLE READ scans beside the load", concurrent_readers),
    Scenario("burst", "10x the steady rate", burst),
    Scenario("homeserver-down", "Synapse stopped, then started", homeserver_down),
    Scenario("homeserver-slow", "every homeserver response to summon +2 s", homeserver_slow),
    Scenario("provider-failing", "the primary provider fails every call (fallback to the backup)",
             provider("fail", "CHAOS_PROVIDER_FAIL_SECONDS", 60)),
    Scenario("provider-hanging", "the primary provider's calls never answer", provider("hang", "CHAOS_PROVIDER_HANG_SECONDS", 30)),
    Scenario("half-open-listen", "the LISTEN connections silently dead (no FIN, no RST)", half_open_listen),
]
