"""memory: person+recall's cost, on the real stack's PostgreSQL (pgvector) with the shipped embedding model.

    .venv/bin/python -m tests.bench.recall [--rounds 200] [--others 990000] [--skip-rss]

``make bench`` runs it with ``--others 0`` (the 10,000 memories of one person, and the RSS); the million across
people, whose index build alone takes minutes, is ``make bench-scale``.

1. Recall latency — embed the question, then the nearest-neighbour read exactly as a worker does it (the tools
   role answering for the run's person, the floor and the count) — p50/p99 over ``rounds`` questions, with
   10,000 memories for one person (real sentences, embedded by the model), then again with 1,000,000 across
   people (the others' vectors random: they are other people's rows, which the read must never touch). The
   read's plan is printed, and its answers checked against an exact scan. The floor, measured in the same
   rounds: the same nearest-neighbour statement sent raw (no transaction, no role, no row-level security) for
   the same vector; the ratio is summon's read against it.
2. The worker's idle resident memory (``summon worker``: ``Service(http=False)``, as a process of its own), before
   and after its embedder is loaded.

It starts the stack with ``synapse-dev/up`` on ports of its own (PostgreSQL 55441, Synapse 8016, the appservice
29341; ``SUMMON_BENCH_PG_PORT`` / ``_HS_PORT`` / ``_AS_PORT`` to move them), prints figures and asserts nothing
about speed. Exit 0 when it ran.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg

from engine.memory.embedder import Embedder
from engine.memory.recall import Recall
from engine.store import Store, migrate
from engine.store.memories import vector_text
from tests.bench.results import Ratio, write

REPO = Path(__file__).resolve().parents[2]
RUN_DIR = REPO / ".dev" / "bench-recall-run"
PORTS = {
    "SUMMON_PG_PORT": os.environ.get("SUMMON_BENCH_PG_PORT", "55441"),
    "SUMMON_HS_PORT": os.environ.get("SUMMON_BENCH_HS_PORT", "8016"),
    "SUMMON_AS_PORT": os.environ.get("SUMMON_BENCH_AS_PORT", "29341"),
}
PERSON = "@ann:localhost"
BOB = "@bob:localhost"
BOT = "rememberer"
OWN = 10_000
REAL = 500
THINGS = ["dog", "cat", "car", "flat", "sister", "brother", "job", "bike", "garden", "piano", "flight", "doctor",
          "school", "boss", "neighbour", "holiday", "diet", "team", "phone", "laptop"]
FACTS = ["is called {n}", "was born in {y}", "is {c}", "needs fixing before {m}", "cost {p} euros",
         "lives {k} km away", "starts on the {d}th", "is my favourite thing", "worries me", "was a gift from {n}"]
NAMES = ["Biscuit", "Rex", "Lena", "Omar", "Yuki", "Paolo", "Ines", "Tariq", "Mila", "Jonas"]
COLOURS = ["blue", "red", "green", "old", "new", "broken", "shiny", "tiny", "huge", "noisy"]
MONTHS = ["March", "June", "September", "December"]
QUESTIONS = [f"What did I tell you about my {t}?" for t in THINGS] + [
    "When was my sister born?", "What is my dog called?", "How far away does my brother live?",
    "Explain how photosynthesis works.", "What's the difference between TCP and UDP?"]


def sentences(n: int, rng: random.Random) -> list[str]:
    out: list[str] = []
    for i in itertools.count():
        if len(out) == n:
            break
        fact = rng.choice(FACTS).format(n=rng.choice(NAMES), y=1950 + i % 70, c=rng.choice(COLOURS),
                                        m=rng.choice(MONTHS), p=10 + i % 990, k=1 + i % 300, d=1 + i % 28)
        out.append(f"My {rng.choice(THINGS)} {fact} (note {i}).")
    return out


def nudged(vector: list[float], rng: random.Random) -> list[float]:
    moved = [v + rng.gauss(0, 0.01) for v in vector]
    norm = sum(v * v for v in moved) ** 0.5
    return [v / norm for v in moved]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def running_run(pool: asyncpg.Pool, person: str) -> Any:
    return await pool.fetchval(
        "INSERT INTO agent_runs (bot, surface, place, asked_by, subject, prompt, context, limits, status, "
        "started_at) VALUES ($1, 'rooms', '!dm:localhost', $2, $2, 'q', '{}'::jsonb, '{}'::jsonb, 'running', now()) "
        "RETURNING id", BOT, person)


RAW_READ = ("SELECT m.id FROM memories m WHERE m.person = $1 AND m.bot = $2 AND (m.embedding <=> $3::text::vector) "
            "<= $4 ORDER BY m.embedding <=> $3::text::vector LIMIT $5")


async def measure(store: Store, pool: asyncpg.Pool, recall: Recall, run_id: int, rounds: int, label: str,
                  person: str = PERSON) -> dict[str, float]:
    row = await store.runs.get(run_id)
    assert row is not None
    embed_ms, read_ms, total_ms, raw_ms, found = [], [], [], [], []
    for n in range(rounds):
        question = QUESTIONS[n % len(QUESTIONS)]
        t0 = time.perf_counter()
        vector = await recall.embedder.query(question)
        t1 = time.perf_counter()
        async with store.transaction("bench_recall") as tx:
            await tx.people.become(run_id)
            await tx.people.as_tools()
            got = await tx.memories.recall(BOT, vector, floor=recall.settings.floor, count=recall.settings.count,
                                           place=None)
        t2 = time.perf_counter()
        await pool.fetch(RAW_READ, person, BOT, vector_text(vector), recall.settings.floor, recall.settings.count)
        raw_ms.append((time.perf_counter() - t2) * 1000)
        embed_ms.append((t1 - t0) * 1000)
        read_ms.append((t2 - t1) * 1000)
        total_ms.append((t2 - t0) * 1000)
        found.append(len(got))
    print(f"{label}: recall p50 {pct(total_ms, .5):.1f} ms / p99 {pct(total_ms, .99):.1f} ms "
          f"(embed p50 {pct(embed_ms, .5):.1f} / p99 {pct(embed_ms, .99):.1f} ms; read p50 {pct(read_ms, .5):.1f} / "
          f"p99 {pct(read_ms, .99):.1f} ms; the raw statement p50 {pct(raw_ms, .5):.1f} / p99 {pct(raw_ms, .99):.1f} "
          f"ms); {statistics.mean(found):.1f} memories recalled a question on average")
    # The plan, and the answers against an exact scan (no index): the read must lose nothing to the index.
    probe = vector_text(await recall.embedder.query(QUESTIONS[1]))
    query = RAW_READ
    async with pool.acquire() as conn:
        plan = await conn.fetch("EXPLAIN " + query, person, BOT, probe, recall.settings.floor, recall.settings.count)
        indexed = [r["id"] for r in await conn.fetch(query, person, BOT, probe, recall.settings.floor,
                                                     recall.settings.count)]
        async with conn.transaction():
            await conn.execute("SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off")
            exact = [r["id"] for r in await conn.fetch(query, person, BOT, probe, recall.settings.floor,
                                                       recall.settings.count)]
    scan = next((str(r[0]).strip() for r in plan if "Scan" in str(r[0])), "?")
    print(f"  plan: {scan}; answers {'match' if indexed == exact else 'DIFFER from'} an exact scan "
          f"({len(indexed)} vs {len(exact)})")
    return {"recall_p50_ms": pct(total_ms, .5), "recall_p99_ms": pct(total_ms, .99),
            "embed_p50_ms": pct(embed_ms, .5), "read_p50_ms": pct(read_ms, .5), "read_p99_ms": pct(read_ms, .99),
            "raw_p50_ms": pct(raw_ms, .5), "raw_p99_ms": pct(raw_ms, .99), "recalled_mean": statistics.mean(found)}


async def recall_phases(dsn: str, rounds: int, others: int) -> None:
    await migrate(dsn)
    store = await Store.connect(dsn, min_size=1, max_size=4)
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    assert pool is not None
    try:
        why = await store.memories.ready()
        assert why is None, why
        recall = Recall(Embedder(threads=1))
        rng = random.Random(15)
        t0 = time.perf_counter()
        model = await recall.embedder._loaded()
        own = sentences(OWN, rng)
        # REAL sentences are embedded by the model; the rest are those vectors moved a little (embedding 10,000
        # takes minutes on a busy machine, and the read costs the same for any vector).
        real = [[float(x) for x in v] for v in await asyncio.to_thread(model.passage, own[:REAL])]
        vectors = [real[i] if i < REAL else nudged(real[i % REAL], rng) for i in range(OWN)]
        print(f"embedded {REAL} memories (and moved them to make {OWN}) in {time.perf_counter() - t0:.0f} s")
        await store.content.upsert_bot(BOT, "Rememberer", "@bot_rememberer:localhost", ["rooms"], {})
        await pool.executemany(
            "INSERT INTO memories (person, bot, said, embedding) VALUES ($1, $2, $3, $4::text::vector)",
            [(PERSON, BOT, s, vector_text(v)) for s, v in zip(own, vectors, strict=True)])
        await pool.execute("ANALYZE memories")
        run_id = await running_run(pool, PERSON)
        one = await measure(store, pool, recall, run_id, rounds, f"{OWN:,} memories, one person")
        many: dict[str, Any] | None = None
        few: dict[str, Any] | None = None
        if others:  # the scale phase (`make bench-scale`): a million memories across people
            t0 = time.perf_counter()
            await pool.execute("DROP INDEX memories_near")
            await pool.execute(
                "INSERT INTO memories (person, bot, said, embedding) "
                "SELECT 'person-' || (g / 100), $1, 'memory ' || g, "
                "       (SELECT array_agg(random() - 0.5) FROM generate_series(1, 384) s WHERE g > 0)::vector "
                "  FROM generate_series(1, $2) g", BOT, others)
            print(f"inserted {others:,} other people's memories in {time.perf_counter() - t0:.0f} s")
            t0 = time.perf_counter()
            async with pool.acquire() as conn:
                await conn.execute("SET maintenance_work_mem = '3GB'")
                await conn.execute("CREATE INDEX memories_near ON memories USING hnsw (embedding vector_cosine_ops)")
            await pool.execute("ANALYZE memories")
            print(f"built the HNSW index over {OWN + others:,} memories in {time.perf_counter() - t0:.0f} s")
            many = await measure(store, pool, recall, run_id, rounds,
                                 f"{OWN + others:,} memories across people, one with {OWN:,}")
            # Bob: 100 memories of his own (the same kind of sentences) among the million.
            await pool.executemany(
                "INSERT INTO memories (person, bot, said, embedding) VALUES ($1, $2, $3, $4::text::vector)",
                [(BOB, BOT, s, vector_text(nudged(v, rng))) for s, v in zip(own[:100], real[:100], strict=True)])
            await pool.execute("ANALYZE memories")
            few = await measure(store, pool, recall, await running_run(pool, BOB), rounds,
                                f"{OWN + others + 100:,} memories across people, one with 100", person=BOB)
        # The read through summon (a transaction answering for the run's person under row-level security: BEGIN,
        # become, SET ROLE, the read, COMMIT — five round trips where the raw statement is one; the target says
        # the security may cost those trips and no more) against the same statement sent raw; the whole recall
        # (embedding included) as a figure of its own.
        print()
        ratios = [Ratio(f"recall read p50, {OWN:,} memories of one person", one["read_p50_ms"], one["raw_p50_ms"], "ms",
                        4.0),
                  Ratio(f"recall p99 (embed + read), {OWN:,} memories of one person", one["recall_p99_ms"], None,
                        "ms", 250.0)]
        if many is not None:
            ratios += [
                Ratio(f"recall read p50, {OWN + others:,} across people", many["read_p50_ms"], many["raw_p50_ms"], "ms",
                      4.0),
                Ratio(f"recall p99 (embed + read), {OWN + others:,} across people", many["recall_p99_ms"], None, "ms",
                      250.0)]
        write("recall", ratios, {"one_person": one, "across_people": many, "one_with_100": few, "rss": RSS})
    finally:
        await pool.close()
        await store.close()


RSS_PROBE = """
import asyncio, os, sys
from pathlib import Path
from appservice.app import Service
from appservice.config import load_config

def rss():
    return int(Path('/proc/self/status').read_text().split('VmRSS:')[1].split()[0]) / 1024

async def main():
    config = load_config(Path(sys.argv[1]), os.environ)
    svc = Service(config, http=False)
    await svc.start()
    await asyncio.sleep(10)
    print(f"idle worker RSS without the embedder: {rss():.0f} MiB", flush=True)
    t0 = asyncio.get_running_loop().time()
    await svc.worker.recall.embedder.query("warm up")
    took = asyncio.get_running_loop().time() - t0
    await asyncio.sleep(5)
    print(f"idle worker RSS with the embedder loaded: {rss():.0f} MiB (loading it and a first query took "
          f"{took * 1000:.0f} ms)", flush=True)
    await svc.stop()

asyncio.run(main())
"""


RSS: dict[str, float] = {}


def rss_phase(stack: dict[str, str], env: dict[str, str]) -> None:
    probe_env = {k: v for k, v in env.items() if not k.startswith(("SUMMON_PROVIDER", "AGENTS_LIVE"))}
    probe_env.update({"SUMMON_AGENT_MOCK": "1", "SUMMON_DATABASE_DSN": stack["SUMMON_DSN"]})
    out = subprocess.run([sys.executable, "-c", RSS_PROBE, stack["SUMMON_CONFIG"]], cwd=REPO, env=probe_env,
                         capture_output=True, text=True, timeout=300)
    print(out.stdout.strip() or out.stderr[-2000:])
    for line in out.stdout.splitlines():
        found = re.search(r"RSS (without|with) the embedder(?: loaded)?: (\d+) MiB", line)
        if found:
            RSS[f"worker_rss_{found[1]}_embedder_mib"] = float(found[2])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--others", type=int, default=1_000_000 - OWN)
    parser.add_argument("--skip-rss", action="store_true")
    args = parser.parse_args()
    env = {**os.environ, **PORTS, "SUMMON_RUN_DIR": str(RUN_DIR), "SUMMON_VENV": sys.prefix}
    up = subprocess.run([str(REPO / "synapse-dev" / "up")], env=env, capture_output=True, text=True)
    if up.returncode != 0:
        print(up.stderr, file=sys.stderr)
        return 1
    try:
        stack = dict(line.split("=", 1) for line in (RUN_DIR / "env").read_text().splitlines() if "=" in line)
        if not args.skip_rss:
            rss_phase(stack, env)
        dsn = stack["SUMMON_DSN"].rsplit("/", 1)[0] + "/summon_recall"

        async def prepare() -> None:
            admin = await asyncpg.connect(stack["SUMMON_DSN"].rsplit("/", 1)[0] + "/postgres")
            try:
                await admin.execute("DROP DATABASE IF EXISTS summon_recall")
                await admin.execute("CREATE DATABASE summon_recall")
            finally:
                await admin.close()

        asyncio.run(prepare())
        asyncio.run(recall_phases(dsn, args.rounds, args.others))
        return 0
    finally:
        subprocess.run([str(REPO / "synapse-dev" / "down")], env=env, check=False)


if __name__ == "__main__":
    sys.exit(main())
