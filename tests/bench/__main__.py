"""Mention → reply latency, as a real Matrix client sees it: a bare echo appservice (the floor) against
summon, in one run, on the same Synapse.

    .venv/bin/python -m tests.bench [--rounds 40] [--warmup 5]

It starts the real stack with ``synapse-dev/up`` on ports of its own (PostgreSQL 55434, Synapse 8010, the
appservice 29335; ``make dev`` and the tests use others) and always stops it with ``synapse-dev/down``.
Phase A runs ``echo_as`` on the appservice's port and registration; phase B runs summon there, in this
process, on the mock model with a zero-latency script, so its figure is summon's engine + Matrix overhead.
In each phase a person (matrix-nio) invites ``@bot_helper`` to a new room and mentions it, one round at
a time, timing the send call until their own /sync shows the reply. After summon's Matrix rounds the same
service's desk is measured too (``tests/bench/desk.py``): a contact's message posted → the bot's answer on
the conversation's event stream, printed beside the Matrix figure.

It prints figures and ratios and asserts nothing about speed: exit 0 when it ran, 1 when something
broke (the stack did not start, a reply did not come within 30 s, ...). Logs go to
``.dev/bench-run/bench.log``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import logging
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nio import (
    AsyncClient,
    RegisterResponse,
    RoomCreateResponse,
    RoomGetStateEventResponse,
    RoomSendResponse,
    SyncResponse,
)

from appservice.app import Service
from appservice.config import Desk, load_config
from tests.bench import desk as desk_bench
from tests.bench.desk import DeskRound
from tests.bench.echo_as import EchoAS
from tests.bench.results import Ratio, write
from tests.book import BOOK

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / ".dev" / "bench-run"
PORTS = {"SUMMON_PG_PORT": "55434", "SUMMON_HS_PORT": "8010", "SUMMON_AS_PORT": "29335"}
SLUG = "helper"
ROUND_TIMEOUT = 30.0
TARGET_P50, TARGET_P95 = 1.10, 1.15  # summon's over the echo's, measured in the same run

log = logging.getLogger("bench")


class BenchError(Exception):
    """The benchmark could not run (not: it ran slowly)."""


# --- the stack ----------------------------------------------------------------------------------------

def stack_env() -> dict[str, str]:
    return {**os.environ, **PORTS, "SUMMON_RUN_DIR": str(RUN)}


def up() -> dict[str, str]:
    try:
        proc = subprocess.run([str(REPO / "synapse-dev" / "up")], env=stack_env(), capture_output=True,
                              text=True, timeout=240, check=False)
    except subprocess.TimeoutExpired as exc:
        raise BenchError("synapse-dev/up did not finish within 240 s") from exc
    if proc.returncode != 0:
        raise BenchError(f"synapse-dev/up failed:\n{proc.stderr.strip()}")
    env_file = Path(proc.stdout.strip().splitlines()[-1])
    out: dict[str, str] = {}
    for line in env_file.read_text().splitlines():
        k, _, v = line.partition("=")
        if k:
            out[k] = v
    return out


def down() -> None:
    subprocess.run([str(REPO / "synapse-dev" / "down")], env=stack_env(), timeout=60, check=False)


# --- marks: when each step of a round happened (time.monotonic) ----------------------------------------

@dataclass
class Marks:
    """Per key (an event id, or a run id for summon's engine steps), label -> time.monotonic()."""
    at: dict[Any, dict[str, float]] = field(default_factory=dict)
    run_of: dict[str, int] = field(default_factory=dict)  # trigger event id -> summon run id

    def mark(self, key: Any, label: str, t: float | None = None) -> None:
        self.at.setdefault(key, {}).setdefault(label, time.monotonic() if t is None else t)


# summon's INFO lines about a run, turned into marks at the moment they are logged.
LOG_LABELS = {"summoned run %s": "summoned", "holding run %s": "held", "run %s finished: %s": "finished",
              "outbox: sent %s": "outbox logged"}


class LogMarks(logging.Handler):
    def __init__(self, marks: Marks) -> None:
        super().__init__(logging.INFO)
        self.marks = marks

    def emit(self, record: logging.LogRecord) -> None:
        label = LOG_LABELS.get(str(record.msg))
        run = getattr(record, "run", None)
        if label and run is not None:
            self.marks.mark(("run", run), label)


# --- the person -------------------------------------------------------------------------------------

@dataclass
class Round:
    sent_at: float
    send_returned: float
    seen_at: float
    event_id: str

    @property
    def ms(self) -> float:
        return (self.seen_at - self.sent_at) * 1000


class Person:
    def __init__(self, hs_url: str) -> None:
        self.client = AsyncClient(hs_url, f"bench{uuid.uuid4().hex[:10]}")
        self.filter: dict[str, Any] = {}

    async def register(self) -> None:
        resp = await self.client.register(self.client.user, "pw-" + uuid.uuid4().hex)
        if not isinstance(resp, RegisterResponse):
            raise BenchError(f"could not register a person: {resp}")

    async def room_with(self, puppet: str) -> str:
        resp = await self.client.room_create(name=f"bench {uuid.uuid4().hex[:6]}", invite=[puppet])
        if not isinstance(resp, RoomCreateResponse):
            raise BenchError(f"could not create a room: {resp}")
        room = str(resp.room_id)
        deadline = time.monotonic() + ROUND_TIMEOUT
        while True:
            state = await self.client.room_get_state_event(room, "m.room.member", puppet)
            if isinstance(state, RoomGetStateEventResponse) and state.content.get("membership") == "join":
                break
            if time.monotonic() > deadline:
                raise BenchError(f"{puppet} did not join {room} within {ROUND_TIMEOUT:.0f} s")
            await asyncio.sleep(0.05)
        # Only this room's timeline: no presence, account data, typing or receipts to wake the sync.
        self.filter = {"presence": {"not_types": ["*"]}, "account_data": {"not_types": ["*"]},
                       "room": {"rooms": [room], "timeline": {"limit": 50}, "ephemeral": {"not_types": ["*"]},
                                "account_data": {"not_types": ["*"]}, "state": {"lazy_load_members": True}}}
        await self._sync(0)  # the starting point: only what comes after counts
        return room

    async def _sync(self, timeout_ms: int) -> SyncResponse:
        resp = await self.client.sync(timeout=timeout_ms, sync_filter=self.filter, full_state=False)
        if not isinstance(resp, SyncResponse):
            raise BenchError(f"/sync failed: {resp}")
        return resp

    async def round(self, room: str, puppet: str, i: int) -> Round:
        content = {"msgtype": "m.text", "body": f"Helper: ping {i}", "m.mentions": {"user_ids": [puppet]}}
        BOOK.say(content["body"], [{"text": f"pong {i}"}])
        sent_at = time.monotonic()
        resp = await self.client.room_send(room, "m.room.message", content)
        send_returned = time.monotonic()
        if not isinstance(resp, RoomSendResponse):
            raise BenchError(f"could not send round {i}: {resp}")
        event_id = str(resp.event_id)
        while True:
            sync = await self._sync(1000)
            joined = sync.rooms.join.get(room)
            for ev in joined.timeline.events if joined else []:
                rel = (ev.source.get("content") or {}).get("m.relates_to") or {}
                if (rel.get("m.in_reply_to") or {}).get("event_id") == event_id:
                    return Round(sent_at, send_returned, time.monotonic(), event_id)

    async def close(self) -> None:
        await self.client.close()


async def measure(name: str, hs_url: str, puppet: str, rounds: int, warmup: int, pause: float) -> list[Round]:
    person = Person(hs_url)
    try:
        await person.register()
        room = await person.room_with(puppet)
        out: list[Round] = []
        for i in range(warmup + rounds):
            try:
                r = await asyncio.wait_for(person.round(room, puppet, i), ROUND_TIMEOUT)
            except TimeoutError:
                raise BenchError(f"{name}: no reply to round {i} within {ROUND_TIMEOUT:.0f} s") from None
            if i >= warmup:
                out.append(r)
            await asyncio.sleep(pause)
        return out
    finally:
        await person.close()


# --- the two phases ---------------------------------------------------------------------------------

def puppet_id(stack: dict[str, str]) -> str:
    return f"@bot_{SLUG}:{stack['SUMMON_SERVER_NAME']}"


async def phase_echo(stack: dict[str, str], args: argparse.Namespace, marks: Marks) -> list[Round]:
    puppet = puppet_id(stack)
    echo = EchoAS(hs_url=stack["SUMMON_HS_URL"], as_token=stack["SUMMON_AS_TOKEN"],
                  hs_token=stack["SUMMON_HS_TOKEN"], host="127.0.0.1", port=int(stack["SUMMON_AS_PORT"]),
                  puppets=[puppet])
    try:
        await echo.start()
        rounds = await measure("echo", stack["SUMMON_HS_URL"], puppet, args.rounds, args.warmup, args.pause)
    finally:
        await echo.stop()
    for event_id, t in echo.seen.items():
        marks.mark(event_id, "txn in", t)
    for event_id, t in echo.replied.items():
        marks.mark(event_id, "reply PUT returned", t)
    return rounds


def instrument(service: Any, marks: Marks) -> Callable[[], None]:
    """Wrap three of summon's seams to timestamp a round's steps (nothing in summon is changed). Call
    before ``start()``; call what it returns after."""
    on_transaction = service.on_transaction

    async def timed_transaction(txn_id: str, events: list[dict[str, Any]], ephemeral: list[dict[str, Any]]) -> bool:
        t = time.monotonic()
        try:
            return bool(await on_transaction(txn_id, events, ephemeral))
        finally:
            for e in events:
                if isinstance(e.get("event_id"), str):
                    marks.mark(e["event_id"], "txn in", t)
                    marks.mark(e["event_id"], "txn stored")
    service.on_transaction = timed_transaction  # before start(): the endpoint binds it there

    def after_start() -> None:
        working = service.surface.working
        sender = service.outbox.sender
        send = sender.send

        async def timed_working(run: Any, on: bool) -> None:
            label = "typing on" if on else "typing off"
            marks.mark(("run", run.id), f"{label} PUT start")
            await working(run, on)
            marks.mark(("run", run.id), f"{label} PUT returned")

        async def timed_send(room_id: str, event_type: str, content: dict[str, Any], txn_id: str, who: str) -> str:
            run = int(txn_id.removeprefix("summon.run").split(".", 1)[0]) if txn_id.startswith("summon.run") else None
            trigger = ((content.get("m.relates_to") or {}).get("m.in_reply_to") or {}).get("event_id")
            if run is not None and trigger:
                marks.run_of[trigger] = run
                marks.mark(("run", run), "outbox PUT start")
            event_id = str(await send(room_id, event_type, content, txn_id, who))
            if run is not None:
                marks.mark(("run", run), "outbox PUT returned")
            return event_id

        service.surface.working = timed_working
        sender.send = timed_send
    return after_start


async def phase_summon(stack: dict[str, str], args: argparse.Namespace,
                       marks: Marks) -> tuple[list[Round], list[DeskRound]]:
    """summon's Matrix rounds, then the desk's (a message → the bot's answer on the event stream) on the same
    service and the same scripted model."""
    env = {**os.environ, "SUMMON_AS_TOKEN": stack["SUMMON_AS_TOKEN"], "SUMMON_HS_TOKEN": stack["SUMMON_HS_TOKEN"],
           "SUMMON_DATABASE_DSN": stack["SUMMON_DSN"]}
    config = load_config(Path(stack["SUMMON_CONFIG"]), env)
    config = config.model_copy(update={"desk": Desk.model_validate({
        "listen": {"host": "127.0.0.1", "port": 0}, "secret": uuid.uuid4().hex * 2,
        "inboxes": {"bench": {"title": "Bench", "staff_key": uuid.uuid4().hex, "bots": [desk_bench.SLUG],
                              "daily_spend": 1000.0}},
        "messages_per_minute": 100_000,
    })})
    service = Service(config, stand_in=BOOK)
    after_start = instrument(service, marks)
    try:
        await service.start()
        after_start()
        puppet = service.registry().get(SLUG).user_id
        rounds = await measure("summon", stack["SUMMON_HS_URL"], puppet, args.rounds, args.warmup, args.pause)
        assert service.desk is not None
        try:
            desk = await desk_bench.measure(service.desk.address, "bench", args.rounds, args.warmup, args.pause)
        except desk_bench.DeskBenchError as exc:
            raise BenchError(f"desk: {exc}") from exc
        return rounds, desk
    finally:
        await service.stop()


# --- figures ----------------------------------------------------------------------------------------

def percentile(values: list[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    xs = sorted(values)
    k = (len(xs) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def environment() -> str:
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    try:
        synapse = importlib.metadata.version("matrix-synapse")
    except importlib.metadata.PackageNotFoundError:
        synapse = "?"
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"environment: {os.cpu_count()} cores ({usable} usable), load {load}, Python {platform.python_version()}, "
            f"{platform.system()} {platform.machine()}, Synapse {synapse} on PostgreSQL")


def stage_lines(name: str, rounds: list[Round], marks: Marks, labels: list[str]) -> list[str]:
    """The median time of each step after the send call (ms), over the measured rounds."""
    cols: dict[str, list[float]] = {"send returned": [(r.send_returned - r.sent_at) * 1000 for r in rounds]}
    for r in rounds:
        steps = dict(marks.at.get(r.event_id, {}))
        run = marks.run_of.get(r.event_id)
        if run is not None:
            steps.update(marks.at.get(("run", run), {}))
        for label in labels:
            if label in steps:
                cols.setdefault(label, []).append((steps[label] - r.sent_at) * 1000)
    cols["reply seen"] = [r.ms for r in rounds]
    parts = [f"{label} {statistics.median(v):.1f}" for label, v in cols.items() if v]
    return [f"  {name}: " + " → ".join(parts)]


SYNAPSE_SEND = re.compile(r"\{@bot_[^}]*\} Processed request: (?P<sec>[0-9.]+)sec/[0-9.]+sec "
                          r"ru=\((?P<cpu>[0-9.]+)sec.*\"PUT \S+/send/m\.room\.message/(?P<txn>\S+?)\?")


def synapse_send_lines() -> list[str]:
    """What Synapse's access log says about the puppet's PUT /send: wall and CPU time, medians."""
    got: dict[str, tuple[list[float], list[float]]] = {"echo": ([], []), "summon": ([], [])}
    try:
        text = (RUN / "synapse" / "homeserver.log").read_text(errors="replace")
    except OSError:
        return []
    for m in SYNAPSE_SEND.finditer(text):
        wall, cpu = got["summon" if m["txn"].startswith("summon.") else "echo"]
        wall.append(float(m["sec"]) * 1000)
        cpu.append(float(m["cpu"]) * 1000)
    return [f"  {name}: Synapse's puppet PUT /send {statistics.median(wall):.1f} (CPU {statistics.median(cpu):.1f}), "
            f"{len(wall)} sends" for name, (wall, cpu) in got.items() if wall]


def dump_rounds(echo: list[Round], summon: list[Round], marks: Marks) -> Path:
    """Every measured round's steps, in ms after its send call, for a closer look."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name, rounds in (("echo", echo), ("summon", summon)):
        out[name] = []
        for r in rounds:
            steps = dict(marks.at.get(r.event_id, {}))
            run = marks.run_of.get(r.event_id)
            if run is not None:
                steps.update(marks.at.get(("run", run), {}))
            steps |= {"send returned": r.send_returned, "reply seen": r.seen_at}
            out[name].append({"event_id": r.event_id, "run": run,
                              "ms": {k: round((t - r.sent_at) * 1000, 2) for k, t in sorted(steps.items(), key=lambda kv: kv[1])}})
    path = RUN / "bench-rounds.json"
    path.write_text(json.dumps(out, indent=1))
    return path


def report(echo: list[Round], summon: list[Round], marks: Marks, warmup: int,
           desk: list[DeskRound] | None = None) -> None:
    def row(name: str, rs: list[Round] | list[DeskRound]) -> str:
        ms = [r.ms for r in rs]
        return (f"{name:<8}{percentile(ms, 50):>9.1f}{percentile(ms, 95):>9.1f}"
                f"{min(ms):>9.1f}{max(ms):>9.1f}")

    e = [r.ms for r in echo]
    s = [r.ms for r in summon]
    r50 = percentile(s, 50) / percentile(e, 50)
    r95 = percentile(s, 95) / percentile(e, 95)
    print(environment())
    print(f"mention sent → reply seen in the person's /sync, ms; {len(echo)} rounds each after {warmup} warm-up, "
          "one Synapse")
    print(f"{'':<8}{'p50':>9}{'p95':>9}{'min':>9}{'max':>9}")
    print(row("echo", echo))
    print(row("summon", summon))
    if desk:
        print(row("desk", desk) + "   (a desk message posted → the bot's answer on its event stream, same model)")
    print(f"summon/echo: p50 {r50:.2f}x, p95 {r95:.2f}x")
    write("mention", [Ratio("p50 mention → answer", percentile(s, 50), percentile(e, 50), "ms", TARGET_P50),
                      Ratio("p95 mention → answer", percentile(s, 95), percentile(e, 95), "ms", TARGET_P95)],
          {"echo_ms": [round(x, 2) for x in e], "summon_ms": [round(x, 2) for x in s], "warmup": warmup})
    print("where the time goes (median ms after the send call):")
    for line in stage_lines("echo", echo, marks, ["txn in", "reply PUT returned"]):
        print(line)
    for line in stage_lines("summon", summon, marks, [
            "txn in", "txn stored", "held", "typing on PUT returned", "finished", "outbox PUT start",
            "typing off PUT returned", "outbox PUT returned"]):
        print(line)
    for line in synapse_send_lines():
        print(line)
    print(f"(every round's steps: {dump_rounds(echo, summon, marks)})")
    sys.stdout.flush()


# --- main -------------------------------------------------------------------------------------------

def setup_logging() -> None:
    handler = logging.FileHandler(RUN / "bench.log")
    handler.setFormatter(logging.Formatter("%(asctime)s.%(msecs)03d %(name)s %(levelname)s %(message)s",
                                           "%H:%M:%S"))
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    root.addHandler(handler)
    for noisy in ("mautrix", "nio", "aiohttp.access", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


async def bench(stack: dict[str, str], args: argparse.Namespace) -> None:
    marks = Marks()
    logging.getLogger().addHandler(LogMarks(marks))
    log.info("phase A: the echo appservice")
    echo = await phase_echo(stack, args, marks)
    log.info("phase B: summon")
    summon, desk = await phase_summon(stack, args, marks)
    report(echo, summon, marks, args.warmup, desk)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40, help="measured rounds per phase (default 40)")
    parser.add_argument("--warmup", type=int, default=5, help="warm-up rounds per phase, not counted (default 5)")
    parser.add_argument("--pause", type=float, default=0.1, help="seconds between rounds (default 0.1)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.warmup < 0:
        parser.error("--rounds must be at least 1 and --warmup at least 0")
    started = time.monotonic()
    os.environ["SUMMON_AGENT_MOCK"] = "1"  # the stand-in answers, by choice (no provider, no bots otherwise)
    try:
        stack = up()
        setup_logging()
        asyncio.run(bench(stack, args))
    except BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 1
    except Exception:
        traceback.print_exc()
        print("bench: broke (see above and .dev/bench-run/bench.log)", file=sys.stderr)
        return 1
    finally:
        down()
    print(f"(whole run {time.monotonic() - started:.1f} s; logs in {RUN / 'bench.log'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
