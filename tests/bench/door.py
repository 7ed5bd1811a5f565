"""The door's first word: how long after a streamed request its first SSE content byte arrives, p50/p99, against
the same bot answering a mention in Matrix (mention sent → reply seen in the person's /sync), in the same run,
on the same stack, rounds alternating. Asserts nothing about speed.

    .venv/bin/python -m tests.bench.door [--rounds 60] [--warmup 5]

It starts the real stack with ``synapse-dev/up`` (ports 55439/8015/29340 by default; ``SUMMON_BENCH_PG_PORT`` /
``_HS_PORT`` / ``_AS_PORT`` move them) and always stops it. summon runs in this process on the stand-in model
(no script, so it answers at once in both: the figures are the door's and Matrix's own overhead), with the door
on a free port. A door round is one person's turn through a grant minted by the start route: the time to the
role chunk (the first byte) and to the first content delta. A Matrix round is a mention of the same bot in a
room of that person's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
import traceback
from pathlib import Path

import aiohttp

from appservice.app import Service
from appservice.config import Door, Listen, load_config
from tests.bench import __main__ as matrix_bench
from tests.bench import results
from tests.bench.__main__ import BenchError, Person, environment, percentile
from tests.bench.results import Ratio
from tests.book import BOOK

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / ".dev" / "bench-door-run"
PORTS = {
    "SUMMON_PG_PORT": os.environ.get("SUMMON_BENCH_PG_PORT", "55439"),
    "SUMMON_HS_PORT": os.environ.get("SUMMON_BENCH_HS_PORT", "8015"),
    "SUMMON_AS_PORT": os.environ.get("SUMMON_BENCH_AS_PORT", "29340"),
}
SLUG = "helper"
ROUND_TIMEOUT = 30.0


async def door_round(url: str, grant: str, i: int) -> tuple[float, float]:
    """(first byte, first content byte) of one streamed turn, in ms after the request was sent."""
    body = {"model": SLUG, "stream": True, "messages": [{"role": "user", "content": f"ping {i}"}]}
    async with aiohttp.ClientSession() as http:
        sent = time.monotonic()
        async with http.post(f"{url}/chat/completions", json=body,
                             headers={"Authorization": f"Bearer {grant}"}) as resp:
            if resp.status != 200:
                raise BenchError(f"door round {i}: {resp.status} {await resp.text()}")
            first_byte = first_content = None
            async for line in resp.content:
                now = time.monotonic()
                if first_byte is None:
                    first_byte = now
                text = line.decode().strip()
                if not text.startswith("data: ") or text == "data: [DONE]":
                    continue
                chunk = json.loads(text[6:])
                choices = chunk.get("choices") or []
                if first_content is None and choices and choices[0].get("delta", {}).get("content"):
                    first_content = now
        if first_byte is None or first_content is None:
            raise BenchError(f"door round {i}: no content came")
        return (first_byte - sent) * 1000, (first_content - sent) * 1000


async def bench(stack: dict[str, str], args: argparse.Namespace) -> None:
    env = {**os.environ, "SUMMON_AS_TOKEN": stack["SUMMON_AS_TOKEN"], "SUMMON_HS_TOKEN": stack["SUMMON_HS_TOKEN"],
           "SUMMON_DATABASE_DSN": stack["SUMMON_DSN"]}
    config = load_config(Path(stack["SUMMON_CONFIG"]), env)
    config = config.model_copy(update={"door": Door(
        keys={"bench": "bench-door-key-" + "b" * 32}, signing_key="bench",
        listen=Listen.model_construct(host="127.0.0.1", port=0))})
    service = Service(config, stand_in=BOOK)
    person = Person(stack["SUMMON_HS_URL"])
    try:
        await service.start()
        assert service.door is not None
        url = f"http://127.0.0.1:{service.door.port}/v1"
        await person.register()
        puppet = service.registry().get(SLUG).user_id
        room = await person.room_with(puppet)
        async with aiohttp.ClientSession() as http, http.post(
                f"{url}/door/start", json={"bot": SLUG},
                headers={"Authorization": f"Bearer {person.client.access_token}"}) as resp:
            started = await resp.json()
        if resp.status != 200:
            raise BenchError(f"the start route refused: {started}")
        grant = started["grant"]
        first_bytes: list[float] = []
        first_words: list[float] = []
        matrix: list[float] = []
        for i in range(args.warmup + args.rounds):
            byte_ms, word_ms = await asyncio.wait_for(door_round(url, grant, i), ROUND_TIMEOUT)
            mention = await asyncio.wait_for(matrix_round(person, room, puppet, i), ROUND_TIMEOUT)
            if i >= args.warmup:
                first_bytes.append(byte_ms)
                first_words.append(word_ms)
                matrix.append(mention)
            await asyncio.sleep(args.pause)
    finally:
        await person.close()
        await service.stop()
    report(first_bytes, first_words, matrix, args)


async def matrix_round(person: Person, room: str, puppet: str, i: int) -> float:
    """A mention without a script (the stand-in answers at once, as it does the door's turns)."""
    content = {"msgtype": "m.text", "body": f"Helper: ping {i}", "m.mentions": {"user_ids": [puppet]}}
    sent = time.monotonic()
    resp = await person.client.room_send(room, "m.room.message", content)
    event_id = str(getattr(resp, "event_id", ""))
    if not event_id:
        raise BenchError(f"could not send round {i}: {resp}")
    while True:
        sync = await person._sync(1000)
        joined = sync.rooms.join.get(room)
        for ev in joined.timeline.events if joined else []:
            rel = (ev.source.get("content") or {}).get("m.relates_to") or {}
            if (rel.get("m.in_reply_to") or {}).get("event_id") == event_id:
                return (time.monotonic() - sent) * 1000


def report(first_bytes: list[float], first_words: list[float], matrix: list[float], args: argparse.Namespace) -> None:
    def row(name: str, ms: list[float]) -> str:
        return (f"{name:<34}{percentile(ms, 50):>9.1f}{percentile(ms, 99):>9.1f}{min(ms):>9.1f}{max(ms):>9.1f}")

    print(environment())
    print(f"ms after the request (door) or the mention (Matrix); {args.rounds} rounds each after {args.warmup} "
          "warm-up, alternating, one stack, the stand-in model answering at once")
    print(f"{'':<34}{'p50':>9}{'p99':>9}{'min':>9}{'max':>9}")
    print(row("door: first byte (role chunk)", first_bytes))
    print(row("door: first SSE content byte", first_words))
    print(row("Matrix: mention → reply in /sync", matrix))
    print(f"door first content / Matrix answer: p50 {percentile(first_words, 50) / percentile(matrix, 50):.2f}x, "
          f"p99 {percentile(first_words, 99) / percentile(matrix, 99):.2f}x")
    # For make bench's table: a voice front end speaks from the first content byte, so it should come well
    # before the whole answer reaches a Matrix client through the same engine (the floor, same run).
    results.write("door", [
        Ratio("first SSE content byte p50 vs a Matrix answer", percentile(first_words, 50), percentile(matrix, 50),
              "ms", 0.5),
        Ratio("first SSE content byte p99 vs a Matrix answer", percentile(first_words, 99), percentile(matrix, 99),
              "ms", 0.5),
    ], {"first_byte_p50_ms": percentile(first_bytes, 50), "rounds": args.rounds})
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.door", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=60, help="measured rounds of each (default 60)")
    parser.add_argument("--warmup", type=int, default=5, help="warm-up rounds, not counted (default 5)")
    parser.add_argument("--pause", type=float, default=0.1, help="seconds between rounds (default 0.1)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.warmup < 0:
        parser.error("--rounds must be at least 1 and --warmup at least 0")
    matrix_bench.RUN = RUN
    matrix_bench.PORTS = PORTS
    RUN.mkdir(parents=True, exist_ok=True)
    os.environ["SUMMON_AGENT_MOCK"] = "1"  # the stand-in answers, by choice
    started = time.monotonic()
    try:
        stack = matrix_bench.up()
        logging.basicConfig(filename=RUN / "bench.log", level=logging.INFO,
                            format="%(asctime)s %(name)s %(levelname)s %(message)s")
        asyncio.run(bench(stack, args))
    except BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 1
    except Exception:
        traceback.print_exc()
        print(f"bench: broke (see above and {RUN / 'bench.log'})", file=sys.stderr)
        return 1
    finally:
        matrix_bench.down()
    print(f"(whole run {time.monotonic() - started:.1f} s; logs in {RUN / 'bench.log'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
