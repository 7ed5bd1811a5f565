"""Many people at once (issue 18), against its floor: 200 mentions across 50 rooms with a 2 s model, on
**default** settings (``worker.slots``, ``database.pool_max``: nothing raised for the bench), on a real Synapse —
first to the echo appservice sleeping 2 s before each reply (the floor: Synapse carrying the same storm, with
nothing of summon's), then to summon with a scripted 2 s model, in the same run on the same Synapse.

Each room holds ``PER_ROOM`` people of its own and each mentions the bot once (200 people): one person's second
mention while their run works would join that run, and one person's fifty would meet the per-person caps —
neither is what this measures. Latency runs from each mention's send to its answer's own timestamp. Prints
p50/p95/max for both and summon's over the echo's, with the machine's load beside them. Asserts nothing about
speed. Run: ``python -m tests.bench.many [--ports PG,HS,AS]`` (ports of its own; never another stack's).
"""

from __future__ import annotations

import argparse
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
from appservice.matrix.tables.rooms import RoomTables
from tests.bench.echo_as import EchoAS
from tests.bench.load import PER_ROOM, ROOMS, p95, rooms_with  # the storm load.py makes; RUN/PORTS set below
from tests.book import BOOK
from tests.store import TestStore

LATENCY = 2
bench.RUN = bench.REPO / ".dev" / "bench-many-run"
PORTS = "55467,8047,29367"  # ports of its own (tests.bench.slots: 55465, tests.bench.permits: 55466)


class SleepingEcho(EchoAS):
    """The echo appservice waiting as long as the model before each reply (a floor for a model's latency)."""

    def __init__(self, *, delay: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.delay = delay
        self.joined: set[str] = set()

    async def _join(self, room: str, puppet: str) -> None:
        await super()._join(room, puppet)
        self.joined.add(room)

    async def _reply(self, room: str, event_id: str, puppet: str) -> None:
        await asyncio.sleep(self.delay)
        await super()._reply(room, event_id, puppet)


async def storm(people: list[AsyncClient], rooms: list[str], puppet: str, name: str,
                sent: dict[str, float] | None = None) -> list[float]:
    """Every person mentions the bot once in their room, all at once; each mention's latency to its answer
    (``sent``, when given, is filled with each mention's event id and when it was sent)."""
    sent = {} if sent is None else sent
    room_of: dict[str, int] = {}

    async def mention(room: int, n: int) -> None:
        content: dict[str, Any] = {"msgtype": "m.text", "body": f"Helper: many {n}",
                                   "m.mentions": {"user_ids": [puppet]}}
        BOOK.say(content["body"], [{"text": f"done {n}", "delay": LATENCY}])
        at = time.time()
        resp = await people[room * PER_ROOM + n].room_send(rooms[room], "m.room.message", content)
        assert isinstance(resp, RoomSendResponse), resp
        sent[str(resp.event_id)] = at
        room_of[str(resp.event_id)] = room

    started = time.monotonic()
    await asyncio.gather(*(mention(room, n) for n in range(PER_ROOM) for room in range(ROOMS)))
    latencies: dict[str, float] = {}
    deadline = time.monotonic() + 180
    answered: set[int] = set()
    while len(latencies) < len(sent) and time.monotonic() < deadline:
        # Latency is read from the answers' own timestamps, so reading seldom costs no accuracy — and this
        # process is summon's too: reading fifty rooms twice a second took CPU from the service it measures.
        await asyncio.sleep(2.0)
        for i, room in enumerate(rooms):
            if i in answered:
                continue
            page = await people[i * PER_ROOM].room_messages(room, limit=50)
            assert isinstance(page, RoomMessagesResponse), page
            for ev in page.chunk:
                content = ev.source.get("content") or {}
                asked = ((content.get("m.relates_to") or {}).get("m.in_reply_to") or {}).get("event_id")
                # An answer from the bot to one of the mentions (its progress line says something else).
                if asked in sent and asked not in latencies and ev.source.get("sender") == puppet \
                        and content.get("body", "").startswith(("done", "pong")):
                    latencies[asked] = ev.source["origin_server_ts"] / 1000 - sent[asked]
            if sum(1 for asked, r in room_of.items() if r == i and asked in latencies) == PER_ROOM:
                answered.add(i)
    values = sorted(latencies.values())
    print(f"{name}: {len(values)} of {len(sent)} answered in {time.monotonic() - started:.1f} s; mention → answer "
          f"p50 {statistics.median(values):.2f} s, p95 {p95(values):.2f} s, max {values[-1]:.2f} s"
          if values else f"{name}: nothing answered")
    if len(values) < len(sent):
        raise RuntimeError(f"{name}: only {len(values)} of {len(sent)} mentions were answered")
    return values


async def breakdown(dsn: str, sent: dict[str, float]) -> None:
    """Where summon's time went, by the database's own times: mention sent → run created (Synapse's push and the
    ingest), → started (a slot took it), → finished (the model and the finishing commit), → answer sent (the
    outbox); and what else was said to the homeserver per answer."""
    db = await TestStore.open(dsn, min_size=1, max_size=1)
    try:
        rows = await db.pool.fetch(
            "SELECT r.trigger_event, extract(epoch FROM r.created_at) AS created, extract(epoch FROM r.started_at)"
            " AS started, extract(epoch FROM r.finished_at) AS finished, extract(epoch FROM o.sent_at) AS sent"
            " FROM agent_runs r JOIN outbox o ON o.txn_id = 'summon.run' || r.id || '.answer'"
            " WHERE r.trigger_event = ANY($1)", list(sent))
        stages: dict[str, list[float]] = {"mention → run created": [], "created → started": [],
                                          "started → finished": [], "finished → answer sent": []}
        for r in rows:
            at = [sent[r["trigger_event"]], *(float(r[k]) for k in ("created", "started", "finished", "sent"))]
            for spans, a, b in zip(stages.values(), at, at[1:], strict=False):
                spans.append(b - a)
        print("  summon's stages (p50 / max): " + "; ".join(
            f"{label} {statistics.median(v):.2f} / {max(v):.2f} s" for label, v in stages.items() if v))
        kinds = await db.pool.fetch(
            "SELECT CASE WHEN txn_id LIKE '%.answer' THEN 'answers' WHEN txn_id LIKE '%.progress' THEN 'progress lines'"
            " WHEN event_type = 'm.room.redaction' THEN 'redactions' WHEN of_txn IS NOT NULL THEN 'edits'"
            " ELSE 'other' END AS kind, count(*) AS n FROM outbox GROUP BY 1 ORDER BY 2 DESC")
        print("  sent to the homeserver: " + ", ".join(f"{r['n']} {r['kind']}" for r in kinds))
    finally:
        await db.close()


def load() -> str:
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ports", default=PORTS, help="PostgreSQL,Synapse,appservice ports of this bench's stack")
    pg, hs, as_ = parser.parse_args().ports.split(",")
    bench.PORTS = {"SUMMON_PG_PORT": pg, "SUMMON_HS_PORT": hs, "SUMMON_AS_PORT": as_}
    os.environ["SUMMON_AGENT_MOCK"] = "1"  # the stand-in answers, by choice (no provider, no bots otherwise)
    stack = bench.up()
    service: Service | None = None
    people: list[AsyncClient] = []
    try:
        async def register() -> AsyncClient:
            person = AsyncClient(stack["SUMMON_HS_URL"], f"many{uuid.uuid4().hex[:8]}")
            assert isinstance(await person.register(person.user, "pw-" + uuid.uuid4().hex), RegisterResponse)
            return person

        for _ in range(ROOMS):
            people.extend(await asyncio.gather(*(register() for _ in range(PER_ROOM))))
        puppet = f"@bot_helper:{stack['SUMMON_SERVER_NAME']}"
        config = load_config(Path(stack["SUMMON_CONFIG"]), os.environ)  # default settings: nothing raised
        print(f"many at once: {ROOMS * PER_ROOM} mentions across {ROOMS} rooms, model latency {LATENCY} s, "
              f"{os.cpu_count()} cores, worker.slots {config.worker.slots}, database.pool_max "
              f"{config.database.pool_max}; the floor is the echo appservice sleeping {LATENCY} s, same load")
        print(f"load average before: {load()}")

        echo = SleepingEcho(hs_url=stack["SUMMON_HS_URL"], as_token=stack["SUMMON_AS_TOKEN"],
                            hs_token=stack["SUMMON_HS_TOKEN"], host="127.0.0.1", port=int(stack["SUMMON_AS_PORT"]),
                            puppets=[puppet], delay=LATENCY)
        await echo.start()
        try:
            async def echo_joined() -> int:
                return len(echo.joined)

            floor = await storm(people, await rooms_with(people, puppet, echo_joined), puppet, "echo sleeping 2 s")
        finally:
            await echo.stop()

        service = Service(config, stand_in=BOOK)
        await service.start()
        svc = service
        before = len(await svc.store.of(RoomTables).joined_by(puppet))  # none of the echo's rooms is summon's

        async def new_joins() -> int:
            return len(await svc.store.of(RoomTables).joined_by(puppet)) - before

        mentions: dict[str, float] = {}
        values = await storm(people, await rooms_with(people, puppet, new_joins), puppet, "summon, 2 s model",
                             mentions)
        await breakdown(stack["SUMMON_DSN"], mentions)
        print(f"summon / echo under the same load: p50 {statistics.median(values) / statistics.median(floor):.2f}×, "
              f"p95 {p95(values) / p95(floor):.2f}×, max {values[-1] / floor[-1]:.2f}×; "
              f"load average after: {load()}")
        return 0
    finally:
        for person in people:
            await person.close()
        if service is not None:
            await service.stop()
        bench.down()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
