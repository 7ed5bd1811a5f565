"""A database a year old: what a busy deployment holds after a year, and what summon costs on it.

    .venv/bin/python -m tests.bench.year        (YEAR_SCALE=0.05 by default; 1 = the full year)

At YEAR_SCALE=1 the database holds 100,000 rooms, 10,000,000 lines, 2,000,000 finished runs (7 steps each, as a
run that calls a tool holds them), their 2,000,000 outbox rows and 2,000,000 ledger rows. Everything is made by
set-based SQL (``INSERT … SELECT … FROM generate_series``), cloned from rows summon itself wrote for real runs at
the start (so every payload, context and row is the shape summon writes), spread over a year of timestamps. One
room holds a thread of YEAR_THREAD (5,000) lines: the long thread a context read meets. Memories are not made
here: ``make bench-scale``'s recall bench (tests/bench/recall.py) measures a million of them.

The stack is tests/chaos's (real Synapse, PostgreSQL, `summon serve`, workers, the fake provider answering at once),
on ports of its own (PostgreSQL 56050, Synapse 8350, 29750-29753; YEAR_PG_PORT … to move them). Measured on the
fresh database, at a quarter of the scale and at the full scale, so what grows with the tables shows:

- mention → answer p50/p99 (people mentioning through Synapse, as in make chaos), and every statement on the
  mention's path summon runs against the big tables, each timed alone (p50/p99 over YEAR_REPS runs):
  the claim, the context read of the long thread and of a timeline, ``summon runs`` for one room, the health
  snapshot, the outbox's next due, the sweep, a person's live runs and spend window;
- ingest: events/s of a homeserver transaction of 100 lines PUT to summon's appservice endpoint;
- pruning: what deleting one day of the year (its finished runs with their steps, outbox and ledger rows, and its
  lines) costs, in a transaction rolled back (summon prunes none of these today: see the closing lines);
- size on disk, per table, and per million mentions.

Prints the figures and writes ``.dev/bench/year.json``. Asserts nothing about speed.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any

import aiohttp
import asyncpg

from engine.store.queries import Queries
from tests.bench.results import BENCH_DIR
from tests.chaos.people import People
from tests.chaos.stack import Settings, Stack
from tests.faults.support import REPO

SCALE = float(os.environ.get("YEAR_SCALE", 0.05))
ROOMS, LINES, RUNS = 100_000, 10_000_000, 2_000_000
THREAD = int(os.environ.get("YEAR_THREAD", 5000))
REPS = int(os.environ.get("YEAR_REPS", 50))
MENTIONS = int(os.environ.get("YEAR_MENTIONS", 30))
DAY0 = "now() - interval '365 days'"


def settings() -> Settings:
    e = os.environ.get
    s = Settings(pg=int(e("YEAR_PG_PORT", 56050)), hs=int(e("YEAR_HS_PORT", 8350)), as_=int(e("YEAR_AS_PORT", 29750)),
                 people=int(e("YEAR_PEOPLE_PORT", 29751)), proxy=int(e("YEAR_PROXY_PORT", 29752)),
                 listen=int(e("YEAR_LISTEN_PORT", 29753)), workers=1, run=REPO / ".dev" / "year-run",
                 work=REPO / ".dev" / "year")
    return s


# --- the generator: set-based clones of rows summon wrote ------------------------------------------------

GROW = [
    # Rooms: clones of a room summon knows (its settings, its power levels), under new ids.
    """INSERT INTO rooms (room_id, encrypted, room_version, create_content, create_sender, power_levels,
                          history_visibility, settings, created_at, join_rule, direct)
       SELECT '!year' || g || ':localhost', t.encrypted, t.room_version, t.create_content, t.create_sender,
              t.power_levels, t.history_visibility, t.settings, {day0} + (g % 365) * interval '1 day', t.join_rule,
              t.direct
         FROM generate_series($1::bigint, $2::bigint) g, (SELECT * FROM rooms WHERE room_id = $3) t""",
    # Lines: people's messages, $4 per room, a year of timestamps; ordinary lines in the main timeline.
    """INSERT INTO room_events (event_id, room_id, sender, event_type, ts, content, said, stored_at)
       SELECT '$year' || g || ':localhost', '!year' || (g % ($2::bigint - $1::bigint + 1) + $1::bigint) || ':localhost',
              '@person' || (g % 20000) || ':localhost', 'm.room.message',
              (extract(epoch FROM {day0}) * 1000)::bigint + g * 3,
              jsonb_build_object('msgtype', 'm.text', 'body', 'a line said ' || g || ' about the weather and a train'),
              'a line said ' || g || ' about the weather and a train', {day0} + (g % 365) * interval '1 day'
         FROM generate_series($1::bigint * $3::bigint, ($2::bigint + 1) * $3::bigint - 1) g""",
    # Runs: clones of a finished run ($3: its context, limits, answer) in the rooms $1..$2, numbered $4..$5, a year
    # of them.
    """INSERT INTO agent_runs (bot, surface, place, thread, trigger_event, asked_by, subject, prompt, context, limits,
                               status, ending, answer, attempts, max_attempts, created_at, started_at, updated_at,
                               finished_at, turn)
       SELECT t.bot, t.surface, CASE WHEN g % 50 = 0 THEN '!year0:localhost'  -- a busy room: 2% of every run
                                     ELSE '!year' || (g % ($2::bigint - $1::bigint + 1) + $1::bigint) || ':localhost' END,
              NULL,
              '$yearrun' || g,
              '@person' || (g % 20000) || ':localhost', t.subject, t.prompt, t.context, t.limits, 'done', NULL,
              t.answer, 1, t.max_attempts, c, c, c + interval '3 seconds', c + interval '3 seconds', 0
         FROM generate_series($4::bigint, $5::bigint) g
        CROSS JOIN LATERAL (SELECT {day0} + (g - $4::bigint) * (interval '365 days' / greatest($5::bigint - $4::bigint + 1, 1))
                            AS c) at,
              (SELECT * FROM agent_runs WHERE id = $3::bigint) t""",
]
STEPS = """INSERT INTO agent_steps (run_id, seq, kind, payload, provider, model, tokens_in, tokens_out, cost_usd, worker,
                                    created_at)
           SELECT r.id, s.seq, s.kind, s.payload, s.provider, s.model, s.tokens_in, s.tokens_out, s.cost_usd, s.worker,
                  r.created_at
             FROM agent_runs r, agent_steps s
            WHERE r.id > $1 AND s.run_id = $2"""
OUTBOX = """INSERT INTO outbox (txn_id, run_id, room_id, sender, event_type, content, status, attempts, next_attempt_at,
                                event_id, created_at, sent_at)
            SELECT 'summon.run' || r.id || '.answer', r.id, r.place, o.sender, o.event_type, o.content, 'sent', 1,
                   r.finished_at, '$yearsent' || r.id, r.finished_at, r.finished_at
              FROM agent_runs r, (SELECT * FROM outbox WHERE run_id = $2 AND txn_id LIKE '%.answer') o
             WHERE r.id > $1"""
LEDGER = """INSERT INTO spend_ledger (who, bot, run_id, usd, reserved, at, spent, drawn, pool)
            SELECT NULL, r.bot, r.id, 0.0004, false, r.finished_at, 0.0004, 0, NULL
              FROM agent_runs r WHERE r.id > $1"""
LONG_THREAD = """INSERT INTO room_events (event_id, room_id, sender, event_type, ts, content, said, thread_root, stored_at)
                 SELECT '$yearthread' || g || ':localhost', $1, '@person' || (g % 50) || ':localhost', 'm.room.message',
                        (extract(epoch FROM now()) * 1000)::bigint - 100000 + g,
                        jsonb_build_object('msgtype', 'm.text', 'body', 'reply ' || g),
                        'reply ' || g || ' in a thread that never ends', $2, now()
                   FROM generate_series(1, $3) g"""


async def grow(conn: asyncpg.Connection, template: dict[str, Any], have: dict[str, int], scale: float) -> float:
    """Grow the database to ``scale`` of a year (from ``have``); the seconds it took."""
    began = time.perf_counter()
    rooms, runs = int(ROOMS * scale), int(RUNS * scale)
    per_room = max(1, LINES // ROOMS)
    if rooms > have["rooms"]:
        first, last = have["rooms"], rooms - 1
        await conn.execute(GROW[0].format(day0=DAY0), first, last, template["room"])
        await conn.execute(GROW[1].format(day0=DAY0), first, last, per_room)
        top = await conn.fetchval("SELECT coalesce(max(id), 0) FROM agent_runs")
        await conn.execute(GROW[2].format(day0=DAY0), 0, rooms - 1, template["run"], have["runs"], runs - 1)
        await conn.execute(STEPS, top, template["run"])
        await conn.execute(OUTBOX, top, template["run"])
        await conn.execute(LEDGER, top)
        have.update(rooms=rooms, runs=runs)
    await conn.execute("ANALYZE")
    return time.perf_counter() - began


# --- the figures ----------------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def timed(conn: asyncpg.Connection, sql: str, args: list[Any], reps: int, *, rollback: bool = False,
                before: str | None = None) -> dict[str, float]:
    """``sql``'s time alone; ``rollback``: each in a transaction rolled back, after ``before`` (untimed) in it."""
    times = []
    for _ in range(reps):
        if rollback:
            tx = conn.transaction()
            await tx.start()
            if before:
                await conn.execute(before)
            t = time.perf_counter()
            await conn.fetch(sql, *args)
            times.append((time.perf_counter() - t) * 1000)
            await tx.rollback()
        else:
            t = time.perf_counter()
            await conn.fetch(sql, *args)
            times.append((time.perf_counter() - t) * 1000)
    # The pages it touched (shared buffers hit + read), once: unlike its time, the same on a busy machine as on a
    # quiet one, so what grows with the tables shows plainly.
    tx = conn.transaction()
    await tx.start()
    try:
        if before:
            await conn.execute(before)
        plan = json.loads(await conn.fetchval("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, *args))[0]["Plan"]
    finally:
        await tx.rollback()
    return {"p50_ms": round(statistics.median(times), 3), "p99_ms": round(pct(times, 0.99), 3),
            "pages": int(plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0))}


async def statements(conn: asyncpg.Connection, template: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Each statement of the mention's path (and of `summon runs`), alone, on the tables as they are now."""
    q = Queries()
    room = template["thread_room"]
    person = template["person"]
    # A queued run to claim (inserted and claimed inside a rolled-back transaction each time).
    queued = ("INSERT INTO agent_runs (bot, surface, place, prompt, limits, status) VALUES "
              f"('helper', 'rooms', '{room}', 'claim me', '{{}}'::jsonb, 'queued')")
    return {
        "claim (a queued run among the year's, rolled back)": await timed(
            conn, q["claim_runs"], ["bench:1:x", 90.0, 8], REPS, rollback=True, before=queued),
        f"context read: a thread of {THREAD} lines (newest 50)": await timed(
            conn, q["context_thread"], [room, template["thread_root"], None, person, 50], REPS),
        "context read: a room's timeline (newest 50)": await timed(
            conn, q["context_timeline"], ["!year7:localhost", None, person, 50], REPS),
        "summon runs: the busy room's latest 20 (2% of every run)": await timed(
            conn, q["room_runs"], ["!year0:localhost", 20], REPS),
        "health snapshot (summon status, /metrics)": await timed(conn, q["health_snapshot"], [30.0], REPS),
        "outbox: next due": await timed(conn, q["next_outbox_due"], [], REPS),
        "sweep of expired leases": await timed(conn, q["sweep_expired"], [1000], REPS, rollback=True),
        "a person's live runs (their cap)": await timed(conn, q["live_runs_of"], [person], REPS),
    }


async def prune_day(conn: asyncpg.Connection, *, indexed: bool = False) -> dict[str, Any]:
    """Delete the year's oldest day (finished runs with their steps, outbox and ledger rows; its lines), rolled back.
    ``indexed``: with indexes on outbox(run_id) and memories(run_id) made first in the same transaction (so rolled
    back too): each run deleted has its referencing rows checked (foreign keys), which without them is a scan of
    both tables per run."""
    tx = conn.transaction()
    await tx.start()
    if indexed:
        await conn.execute("CREATE INDEX year_outbox_run ON outbox (run_id)")
        await conn.execute("CREATE INDEX year_memories_run ON memories (run_id)")
    t = time.perf_counter()
    try:
        ids = [r["id"] for r in await conn.fetch(
            "SELECT id FROM agent_runs WHERE status IN ('done', 'failed', 'cancelled')"
            " AND finished_at < (SELECT min(finished_at) FROM agent_runs) + interval '1 day'")]
        await conn.execute("DELETE FROM outbox WHERE run_id = ANY($1)", ids)
        await conn.execute("DELETE FROM spend_ledger WHERE run_id = ANY($1)", ids)
        await conn.execute("UPDATE memories SET run_id = NULL WHERE run_id = ANY($1)", ids)
        await conn.execute("DELETE FROM agent_runs WHERE id = ANY($1)", ids)  # steps cascade
        lines = await conn.fetchval(
            "WITH d AS (DELETE FROM room_events WHERE stored_at < (SELECT min(stored_at) FROM room_events)"
            " + interval '1 day' AND room_id LIKE '!year%' RETURNING 1) SELECT count(*) FROM d")
        took = time.perf_counter() - t
    finally:
        await tx.rollback()
    return {"runs": len(ids), "lines": lines, "seconds": round(took, 2)}


async def sizes(conn: asyncpg.Connection) -> dict[str, Any]:
    rows = await conn.fetch(
        "SELECT c.relname, pg_total_relation_size(c.oid) AS bytes FROM pg_class c JOIN pg_namespace n ON"
        " n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r' ORDER BY 2 DESC LIMIT 8")
    runs = await conn.fetchval("SELECT count(*) FROM agent_runs")
    total = await conn.fetchval("SELECT pg_database_size(current_database())")
    return {"tables_mb": {r["relname"]: round(r["bytes"] / 2**20, 1) for r in rows},
            "database_mb": round(total / 2**20, 1), "runs": runs}


async def mention_latency(people: People, n: int) -> dict[str, float]:
    got = []
    for k in range(n):
        person = people.free()[0]
        m = await people.mention(person, k)
        assert m is not None
        deadline = time.monotonic() + 30
        while not m.answers and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        if m.latency is not None:
            got.append(m.latency * 1000)
    return {"answered": len(got), "p50_ms": round(statistics.median(got), 1), "p99_ms": round(pct(got, 0.99), 1)}


async def ingest(stack: Stack, room: str) -> float:
    url = f"http://127.0.0.1:{stack.s.as_}/_matrix/app/v1/transactions"
    headers = {"Authorization": f"Bearer {stack.env['SUMMON_HS_TOKEN']}"}
    ts = int(time.time() * 1000)
    bodies = [{"events": [{"type": "m.room.message", "room_id": room, "sender": f"@bridge_{n % 40}:localhost",
                           "event_id": f"${uuid.uuid4().hex}:localhost", "origin_server_ts": ts + n,
                           "content": {"msgtype": "m.text", "body": f"backfilled line {n}"}}
                          for n in range(b * 100, b * 100 + 100)]} for b in range(20)]
    async with aiohttp.ClientSession() as http:
        t = time.perf_counter()
        for body in bodies:
            async with http.put(f"{url}/{uuid.uuid4().hex}", json=body, headers=headers) as resp:
                assert resp.status == 200, await resp.text()
        return round(2000 / (time.perf_counter() - t), 0)


async def measure(stack: Stack, conn: asyncpg.Connection, template: dict[str, Any], label: str) -> dict[str, Any]:
    assert stack.people is not None
    out: dict[str, Any] = {"mention_to_answer": await mention_latency(stack.people, MENTIONS),
                           "statements": await statements(conn, template),
                           "ingest_events_per_s": await ingest(stack, template["thread_room"]),
                           "size": await sizes(conn)}
    if label != "fresh":
        out["prune_one_day"] = await prune_day(conn)
        out["prune_one_day_indexed"] = await prune_day(conn, indexed=True)
    print(f"\n{label}: {out['size']['runs']} runs, {out['size']['database_mb']} MB; mention → answer p50 "
          f"{out['mention_to_answer']['p50_ms']} ms, p99 {out['mention_to_answer']['p99_ms']} ms; ingest "
          f"{out['ingest_events_per_s']:.0f} events/s", flush=True)
    for what, fig in out["statements"].items():
        if fig:
            print(f"  {what}: p50 {fig['p50_ms']} ms, p99 {fig['p99_ms']} ms, {fig['pages']} pages")
    if "prune_one_day" in out:
        print(f"  pruning one day: {out['prune_one_day']}; with outbox(run_id) and memories(run_id) indexed: "
              f"{out['prune_one_day_indexed']}")
    print(f"  sizes (MB): {out['size']['tables_mb']}")
    return out


async def main() -> int:
    stack = Stack(settings())
    stack.provider.first = stack.provider.second = 0.0  # the model answers at once: what is left is summon's
    began = time.time()
    load = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    print(f"year: YEAR_SCALE={SCALE} ({int(ROOMS * SCALE)} rooms, {int(ROOMS * SCALE) * (LINES // ROOMS)} lines, "
          f"{int(RUNS * SCALE)} runs); {platform.node()}, {os.cpu_count()} cores; {load}", flush=True)
    out: dict[str, Any] = {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": platform.node(),
                           "cores": os.cpu_count(), "uptime_before": load, "scale": SCALE}
    try:
        await stack.up()
        assert stack.people is not None and stack.admin is not None
        await stack.people.gather(2, 20)
        await mention_latency(stack.people, 5)  # warm, and the template rows written by summon itself
        conn = await asyncpg.connect(stack.env["SUMMON_DSN"], server_settings={"application_name": "chaos-harness"})
        try:
            room = next(iter(stack.people.rooms))
            template = dict(await conn.fetchrow(
                "SELECT r.id AS run, r.place AS room, r.asked_by AS person FROM agent_runs r"
                " WHERE r.status = 'done' AND EXISTS (SELECT 1 FROM outbox o WHERE o.run_id = r.id) ORDER BY id LIMIT 1"))
            root = await conn.fetchval("SELECT event_id FROM room_events WHERE room_id = $1 AND said <> ''"
                                       " ORDER BY seq LIMIT 1", room)
            await conn.execute(LONG_THREAD, room, root, THREAD)
            template.update(thread_room=room, thread_root=root)
            out["fresh"] = await measure(stack, conn, template, "fresh")
            have = {"rooms": 0, "runs": 0}
            for step, label in ((0.25, "a quarter"), (1.0, "full")):
                took = await grow(conn, template, have, SCALE * step)
                print(f"\ngrew to {label} of YEAR_SCALE in {took:.0f} s", flush=True)
                out[label] = {"grow_seconds": round(took, 1), **await measure(stack, conn, template, label)}
        finally:
            await conn.close()
    finally:
        await stack.down()
    out["uptime_after"] = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    out["minutes"] = round((time.time() - began) / 60, 1)
    growth = {}
    for what, fig in out["full"]["statements"].items():
        small = out["a quarter"]["statements"].get(what)
        if fig and small:
            growth[what] = {"p50": round(fig["p50_ms"] / max(small["p50_ms"], 0.001), 2),
                            "pages": round(fig["pages"] / max(small["pages"], 1), 2)}
    out["growth_full_over_quarter"] = growth
    grown = out["full"]["size"]["runs"] - out["fresh"]["size"]["runs"]
    out["mb_per_million_mentions"] = round(
        (out["full"]["size"]["database_mb"] - out["fresh"]["size"]["database_mb"]) / max(grown, 1) * 1e6)
    print(f"\non disk: {out['mb_per_million_mentions']} MB per million mentions (each with its run, 7 steps, outbox and "
          f"ledger rows, and {LINES // RUNS} lines of the room's talk)")
    print("\nat the full scale over a quarter of it (4× the rows; 1.0 = flat, 4.0 = linear): pages touched, p50")
    for what, g in growth.items():
        print(f"  {g['pages']:5.2f}×  {g['p50']:5.2f}×  {what}")
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    (BENCH_DIR / "year.json").write_text(json.dumps(out, indent=1, default=str))
    print(f"\n{out['uptime_after']}; {out['minutes']} min; figures in {BENCH_DIR / 'year.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
