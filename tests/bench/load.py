"""Load: 200 mentions across 50 rooms with a 500 ms scripted model latency, on a real Synapse.

Each room holds ``PER_ROOM`` people and each mentions the bot once: one person's second mention while
their run works would join that run (one answer to both), which is not what this measures.

Prints p50/p95/max from each mention to its answer (found by the answer's own timestamp, so one client
reading all rooms after the fact is enough), against the issue's yardstick: 1.5 × (model latency +
echo floor). Asserts nothing about speed. Run: ``python -m tests.bench.load``.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from nio import AsyncClient, RegisterResponse, RoomMessagesResponse, RoomSendResponse

import tests.bench.__main__ as bench
from appservice.app import Service
from appservice.config import load_config
from appservice.dev import SCRIPT_KEY, scripted_turns

ROOMS, PER_ROOM, LATENCY = 50, 4, 0.5
ECHO_FLOOR = 0.15  # seconds: the echo appservice's p50 measured by `python -m tests.bench`
bench.RUN = bench.REPO / ".dev" / "bench-load-run"
bench.PORTS = {"SUMMON_PG_PORT": "55436", "SUMMON_HS_PORT": "8012", "SUMMON_AS_PORT": "29337"}


async def main() -> int:
    os.environ["SUMMON_AGENT_MOCK"] = "1"  # the stand-in answers, by choice (no provider, no bots otherwise)
    stack = bench.up()
    service: Service | None = None
    client: AsyncClient | None = None
    people: list[AsyncClient] = []
    try:
        config = load_config(Path(stack["SUMMON_CONFIG"]), os.environ)
        config = config.model_copy(update={
            "worker": config.worker.model_copy(update={"slots": 64}),
            "database": config.database.model_copy(update={"pool_max": 30}),
        })
        service = Service(config, scripts=scripted_turns)
        await service.start()
        for _ in range(PER_ROOM):
            person = AsyncClient(stack["SUMMON_HS_URL"], f"load{uuid.uuid4().hex[:8]}")
            assert isinstance(await person.register(person.user, "pw-" + uuid.uuid4().hex), RegisterResponse)
            people.append(person)
        client = people[0]
        puppet = f"@bot_helper:{stack['SUMMON_SERVER_NAME']}"
        others = [str(p.user_id) for p in people[1:]]
        rooms = [str((await client.room_create(invite=[puppet, *others])).room_id) for _ in range(ROOMS)]  # type: ignore[union-attr]
        await asyncio.gather(*(p.join(room) for p in people[1:] for room in rooms))
        while len(await service.store.rooms.joined_by(puppet)) < ROOMS:
            await asyncio.sleep(0.1)

        sent: dict[str, float] = {}

        async def mention(room: str, n: int) -> None:
            content: dict[str, Any] = {"msgtype": "m.text", "body": f"Helper: load {n}",
                                       "m.mentions": {"user_ids": [puppet]},
                                       SCRIPT_KEY: [{"text": f"done {n}", "delay": str(LATENCY)}]}  # no floats in events
            at = time.time()
            resp = await people[n].room_send(room, "m.room.message", content)
            assert isinstance(resp, RoomSendResponse), resp
            sent[str(resp.event_id)] = at

        started = time.monotonic()
        await asyncio.gather(*(mention(room, n) for n in range(PER_ROOM) for room in rooms))
        latencies: dict[str, float] = {}
        deadline = time.monotonic() + 120
        while len(latencies) < len(sent) and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            for room in rooms:
                page = await client.room_messages(room, limit=50)
                assert isinstance(page, RoomMessagesResponse), page
                for ev in page.chunk:
                    rel = (ev.source.get("content") or {}).get("m.relates_to") or {}
                    asked = (rel.get("m.in_reply_to") or {}).get("event_id")
                    if asked in sent and asked not in latencies:
                        latencies[asked] = ev.source["origin_server_ts"] / 1000 - sent[asked]
        took = time.monotonic() - started
        values = sorted(latencies.values())
        yardstick = 1.5 * (LATENCY + ECHO_FLOOR)
        print(f"load: {len(sent)} mentions across {ROOMS} rooms, model latency {LATENCY * 1000:.0f} ms, "
              f"{os.cpu_count()} cores; {len(values)} answered in {took:.1f} s")
        if values:
            p95 = values[int(len(values) * 0.95) - 1]
            print(f"mention → answer: p50 {statistics.median(values) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
                  f"max {values[-1] * 1000:.0f} ms; yardstick 1.5 × (model + echo floor) = {yardstick * 1000:.0f} ms; "
                  f"within it: {sum(v <= yardstick for v in values)}/{len(values)}")
        return 0 if len(values) == len(sent) else 1
    finally:
        for person in people:
            await person.close()
        if service is not None:
            await service.stop()
        bench.down()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
