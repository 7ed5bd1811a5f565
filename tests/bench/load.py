"""Load against its floor: 200 mentions across 50 rooms with a 500 ms model, on a real Synapse — first to
the echo appservice sleeping 500 ms before each reply (the floor: Synapse under the same load, with nothing
of summon's), then to summon with a scripted 500 ms model, in the same run on the same Synapse.

Each room holds ``PER_ROOM`` people of its own and each mentions the bot once (200 people): one person's
second mention while their run works would join that run (one answer to both), and one person's 50 would
meet the per-person caps (live runs, spend ceilings) — neither is what this measures. Latency runs
from each mention's send to its answer's own timestamp, so one client reading all rooms after the fact is
enough. Prints p50/p95/max for both and summon's p50 over the echo's (target ≤ 1.2×); writes
``.dev/bench/load.json``. Asserts nothing about speed. Run: ``python -m tests.bench.load``.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from nio import AsyncClient, RegisterResponse, RoomMessagesResponse, RoomSendResponse

import tests.bench.__main__ as bench
from appservice.app import Service
from appservice.config import load_config
from appservice.matrix.tables.rooms import RoomTables
from tests.bench.echo_as import EchoAS
from tests.bench.results import Ratio, write
from tests.book import BOOK

ROOMS, PER_ROOM, LATENCY = 50, 4, 0.5
TARGET = 1.2
bench.RUN = bench.REPO / ".dev" / "bench-load-run"
bench.PORTS = {"SUMMON_PG_PORT": "55436", "SUMMON_HS_PORT": "8012", "SUMMON_AS_PORT": "29337"}


async def rooms_with(people: list[AsyncClient], puppet: str, joined: Callable[[], Awaitable[int]]) -> list[str]:
    """Room i is made by person ``PER_ROOM * i`` with the puppet and the next ``PER_ROOM - 1`` people in it."""
    groups = [people[i * PER_ROOM:(i + 1) * PER_ROOM] for i in range(ROOMS)]

    async def made(group: list[AsyncClient]) -> str:
        resp = await group[0].room_create(invite=[puppet, *(str(p.user_id) for p in group[1:])])
        room = str(resp.room_id)  # type: ignore[union-attr]
        await asyncio.gather(*(p.join(room) for p in group[1:]))
        return room

    rooms = list(await asyncio.gather(*(made(g) for g in groups)))
    deadline = time.monotonic() + 120
    while await joined() < ROOMS:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{puppet} joined only {await joined()} of {ROOMS} rooms")
        await asyncio.sleep(0.1)
    return rooms


async def storm(people: list[AsyncClient], rooms: list[str], puppet: str, name: str) -> list[float]:
    """Every person mentions the bot once in every room, all at once; each mention's latency to its answer."""
    sent: dict[str, float] = {}

    async def mention(room: int, n: int) -> None:
        content: dict[str, Any] = {"msgtype": "m.text", "body": f"Helper: load {n}",
                                   "m.mentions": {"user_ids": [puppet]}}
        BOOK.say(content["body"], [{"text": f"done {n}", "delay": LATENCY}])
        at = time.time()
        resp = await people[room * PER_ROOM + n].room_send(rooms[room], "m.room.message", content)
        assert isinstance(resp, RoomSendResponse), resp
        sent[str(resp.event_id)] = at

    started = time.monotonic()
    await asyncio.gather(*(mention(room, n) for n in range(PER_ROOM) for room in range(ROOMS)))
    latencies: dict[str, float] = {}
    deadline = time.monotonic() + 120
    while len(latencies) < len(sent) and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        for i, room in enumerate(rooms):
            page = await people[i * PER_ROOM].room_messages(room, limit=50)
            assert isinstance(page, RoomMessagesResponse), page
            for ev in page.chunk:
                rel = (ev.source.get("content") or {}).get("m.relates_to") or {}
                asked = (rel.get("m.in_reply_to") or {}).get("event_id")
                if asked in sent and asked not in latencies and ev.source.get("sender") == puppet:
                    latencies[asked] = ev.source["origin_server_ts"] / 1000 - sent[asked]
    values = sorted(latencies.values())
    print(f"{name}: {len(sent)} mentions across {ROOMS} rooms, {len(values)} answered in "
          f"{time.monotonic() - started:.1f} s")
    if len(values) < len(sent):
        raise RuntimeError(f"{name}: only {len(values)} of {len(sent)} mentions were answered")
    print(f"  mention → answer: p50 {statistics.median(values) * 1000:.0f} ms, p95 {p95(values) * 1000:.0f} ms, "
          f"max {values[-1] * 1000:.0f} ms")
    return values


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, int(len(values) * 0.95) - 1)]


async def main() -> int:
    os.environ["SUMMON_AGENT_MOCK"] = "1"  # the stand-in answers, by choice (no provider, no bots otherwise)
    stack = bench.up()
    service: Service | None = None
    people: list[AsyncClient] = []
    try:
        async def register() -> AsyncClient:
            person = AsyncClient(stack["SUMMON_HS_URL"], f"load{uuid.uuid4().hex[:8]}")
            assert isinstance(await person.register(person.user, "pw-" + uuid.uuid4().hex), RegisterResponse)
            return person

        for _ in range(ROOMS):
            people.extend(await asyncio.gather(*(register() for _ in range(PER_ROOM))))
        puppet = f"@bot_helper:{stack['SUMMON_SERVER_NAME']}"
        print(f"load: {ROOMS * PER_ROOM} mentions across {ROOMS} rooms, model latency {LATENCY * 1000:.0f} ms, "
              f"{os.cpu_count()} cores; the floor is the echo appservice sleeping as long, under the same load")

        # The floor: Synapse carrying the same storm, answered by the echo appservice after the same 500 ms.
        echo = EchoAS(hs_url=stack["SUMMON_HS_URL"], as_token=stack["SUMMON_AS_TOKEN"],
                      hs_token=stack["SUMMON_HS_TOKEN"], host="127.0.0.1", port=int(stack["SUMMON_AS_PORT"]),
                      puppets=[puppet], delay=LATENCY)
        await echo.start()
        try:
            async def echo_joined() -> int:
                return len(echo.joined)

            echo_rooms = await rooms_with(people, puppet, echo_joined)
            floor = await storm(people, echo_rooms, puppet, "echo (floor)")
        finally:
            await echo.stop()

        config = load_config(Path(stack["SUMMON_CONFIG"]), os.environ)
        config = config.model_copy(update={
            "worker": config.worker.model_copy(update={"slots": 64}),
            "database": config.database.model_copy(update={"pool_max": 30}),
        })
        service = Service(config, stand_in=BOOK)
        await service.start()
        svc = service
        # The echo phase's rooms are summon's too now (the puppet is in them): count only new joins.
        before = len(await svc.store.of(RoomTables).joined_by(puppet))

        async def new_joins() -> int:
            return len(await svc.store.of(RoomTables).joined_by(puppet)) - before

        rooms = await rooms_with(people, puppet, new_joins)
        values = await storm(people, rooms, puppet, "summon")
        f50, s50 = statistics.median(floor), statistics.median(values)
        write("load", [Ratio("p50 mention → answer under load", s50 * 1000, f50 * 1000, "ms", TARGET),
                       Ratio("p95 mention → answer under load", p95(values) * 1000, p95(floor) * 1000, "ms",
                             TARGET * 1.25)],
              {"echo_ms": [round(v * 1000, 1) for v in floor], "summon_ms": [round(v * 1000, 1) for v in values],
               "rooms": ROOMS, "per_room": PER_ROOM, "model_latency_s": LATENCY})
        return 0
    finally:
        for person in people:
            await person.close()
        if service is not None:
            await service.stop()
        bench.down()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
