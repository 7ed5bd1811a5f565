"""Ingest: a bridge-style backfill — 10,000 events in 100-event transactions, PUT to summon's appservice
endpoint one transaction after another as the homeserver sends them (its token, its body), each stored as
a line (one database transaction per homeserver transaction, a savepoint per event) and heard by the line
handler (mentions looked for, nobody summoned). Prints events/s (target ≥ 2,000/s); writes
``.dev/bench/ingest.json``. Asserts nothing about speed. Run: ``python -m tests.bench.ingest``.

Ports 55438/8014/29339 (PostgreSQL, Synapse, the appservice); a real Synapse is started because the service
registers its puppets there on start.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

import tests.bench.__main__ as bench
from appservice.app import Service
from appservice.config import load_config
from tests.bench.results import Ratio, write

EVENTS, PER_TXN = 10_000, 100
TARGET = 2000.0
bench.RUN = bench.REPO / ".dev" / "bench-ingest-run"
bench.PORTS = {"SUMMON_PG_PORT": "55438", "SUMMON_HS_PORT": "8014", "SUMMON_AS_PORT": "29339"}


def backfill(room: str, server: str, start: int, count: int, ts: int) -> list[dict[str, Any]]:
    """A bridge's history: people on the other side saying ordinary things (a few naming nobody we host)."""
    return [{"type": "m.room.message", "room_id": room, "sender": f"@bridge_{n % 40}:{server}",
             "event_id": f"${uuid.uuid4().hex}:{server}", "origin_server_ts": ts + n,
             "content": {"msgtype": "m.text", "body": f"backfilled line {n}: the weather was fine and the train late"}}
            for n in range(start, start + count)]


async def main() -> int:
    os.environ["SUMMON_AGENT_MOCK"] = "1"
    stack = bench.up()
    service: Service | None = None
    try:
        config = load_config(Path(stack["SUMMON_CONFIG"]), os.environ)
        service = Service(config)
        await service.start()
        server = stack["SUMMON_SERVER_NAME"]
        room = f"!backfill{uuid.uuid4().hex[:8]}:{server}"
        url = f"http://127.0.0.1:{stack['SUMMON_AS_PORT']}/_matrix/app/v1/transactions"
        headers = {"Authorization": f"Bearer {stack['SUMMON_HS_TOKEN']}"}
        ts = int(time.time() * 1000)
        bodies = [{"events": backfill(room, server, n, PER_TXN, ts)} for n in range(0, EVENTS, PER_TXN)]
        async with aiohttp.ClientSession() as http:
            started = time.perf_counter()
            for body in bodies:
                async with http.put(f"{url}/{uuid.uuid4().hex}", json=body, headers=headers) as resp:
                    if resp.status != 200:
                        raise RuntimeError(f"transaction refused: {resp.status} {await resp.text()}")
            took = time.perf_counter() - started
        lines = await count_lines(stack["SUMMON_DSN"], room)
        rate = lines / took
        print(f"ingest: {EVENTS} events in {EVENTS // PER_TXN} transactions of {PER_TXN}: {lines} stored in "
              f"{took:.2f} s = {rate:.0f} events/s ({took / (EVENTS // PER_TXN) * 1000:.1f} ms a transaction); "
              f"{os.cpu_count()} cores")
        write("ingest", [Ratio("backfill events/s (stored and heard)", rate, None, "events/s", TARGET, "at_least")],
              {"events": EVENTS, "per_transaction": PER_TXN, "stored": lines, "seconds": took})
        return 0 if lines == EVENTS else 1
    finally:
        if service is not None:
            await service.stop()
        bench.down()


async def count_lines(dsn: str, room: str) -> int:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM room_events WHERE room_id = $1", room))
    finally:
        await conn.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
