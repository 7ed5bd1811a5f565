"""`make door-check`: the door as voice front ends use it — Pipecat's ``OpenAILLMService``, LiveKit Agents'
``openai.LLM`` (``timeout=8``), the Vercel AI SDK's default ``openai("helper")`` (the Responses API) and its
``createOpenAICompatible`` (chat completions), and openai-python — each unchanged, from its own environment
(door-check/.venv, door-check/node_modules), against `make dev`'s door in front of a slow fake provider.

It starts the fake provider (tests/providers/fake_provider.py: the real chat-completions wire, streamed word by
word, recording when a caller goes away), then ``summon dev`` on ports and a run directory of its own (so a
`make dev` of yours keeps running) with that provider switched on, asks the start route for a grant as the demo
user, and drives each client through:

- **works**: one streamed turn, read to its end: the whole answer, every word once;
- **first content**: ms from the client's request to the first words it was handed (the provider says its
  first word 300 ms after being asked), and how it splits: the client's request to the provider's, the
  provider's 300, its first word to the client's;
- **9 s silence**: a turn whose first word comes 9 s after the request (LiveKit's read timeout here is 8 s): the
  door's keep-alives hold the client's stream open;
- **barge-in**: three turns in a row, each abandoned by the client's own way of stopping (a closed stream, an
  interruption, an aborted signal) at its first words, then a fourth at once: it must be answered (the person
  has three live-run places, so a cancel that did not free its place at once would refuse it), and the provider
  must have seen each of the three callers go (how long after the client stopped, worst of three).

One line per client, then the table docs/door.md keeps. Exit status 1 when any client failed a check.

    make door-check                 # installs door-check's environments, then runs this
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from tests.providers.fake_provider import FakeProvider, openai_text  # noqa: E402

RUN_DIR = REPO / ".dev" / "door-check-run"
PORTS = {"SUMMON_PG_PORT": "55490", "SUMMON_HS_PORT": "8050", "SUMMON_AS_PORT": "29390",
         "SUMMON_DOOR_PORT": "29391", "SUMMON_DESK_PORT": "29392"}
PYTHON = HERE / ".venv" / "bin" / "python"
FIRST = 0.3  # the provider's first word, after the request
ANSWER = " ".join(f"word{n}" for n in range(1, 31)) + "."  # 30 words, 0.1 s apart: the answer takes 3.2 s
SLOW = replace(openai_text(ANSWER, completion=31), first=FIRST, pace=0.1)
SILENT = replace(SLOW, first=9.0)
LONG = replace(openai_text(" ".join(f"long{n}" for n in range(1, 81)), completion=81), first=FIRST, pace=0.2)
BARGES = 3
WARM = 3  # turns after a client's first, for its figures


@dataclass(frozen=True)
class Client:
    name: str
    argv: tuple[str, ...]


CLIENTS = (
    Client("Pipecat 1.14 OpenAILLMService", (str(PYTHON), "clients/pipecat_client.py")),
    Client("LiveKit Agents 1.8.9 openai.LLM(timeout=8)", (str(PYTHON), "clients/livekit_client.py")),
    Client('AI SDK 7 openai("helper") (Responses API)', ("node", "clients/aisdk.mjs", "responses")),
    Client("AI SDK 7 createOpenAICompatible", ("node", "clients/aisdk.mjs", "compatible")),
    Client("openai-python 3.60", (str(PYTHON), "clients/openai_client.py")),
)


async def drive(client: Client, env: dict[str, str], *args: str, limit: float = 90) -> dict[str, Any]:
    """Run one client script; its one JSON line, or why there was none."""
    proc = await asyncio.create_subprocess_exec(*client.argv, *args, cwd=HERE, env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), limit)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return {"error": f"no answer within {limit:.0f} s", "turns": []}
    lines = [line for line in out.decode().splitlines() if line.startswith("{")]
    if not lines:
        tail = err.decode().strip().splitlines()[-3:]
        return {"error": f"exit {proc.returncode}, printed nothing: {' | '.join(tail)}", "turns": []}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def whole(result: dict[str, Any], expected: str) -> str | None:
    """None when every turn was answered with exactly ``expected``; else what went wrong."""
    if "error" in result:
        return str(result["error"])
    for turn in result["turns"]:
        if turn["text"].strip() != expected:
            return f"answered {turn['text'][:60]!r}…"
    return None


async def check(client: Client, fake: FakeProvider, env: dict[str, str]) -> tuple[dict[str, str], bool]:
    row: dict[str, str] = {"client": client.name}
    good = True

    # The first turn is the client's first request in its process (its own imports and connection included);
    # the figures are the median of the WARM turns after it.
    fake.always("openai", SLOW)
    asked = len(fake.arrivals)
    result = await drive(client, env, "turn", str(1 + WARM))
    wrong = whole(result, ANSWER)
    row["works"] = "yes" if wrong is None else f"no: {wrong}"
    good &= wrong is None
    row["first"] = row["asked"] = "-"
    arrivals, said = fake.arrivals[asked:], fake.first_sent[-(1 + WARM):]
    if wrong is None and len(arrivals) == 1 + WARM == len(result["turns"]):
        turns = result["turns"]
        # Cross-process, one clock: CLOCK_MONOTONIC in the client and in this process. Each turn split in three:
        # the client's request to the provider's, the provider's own wait, its first word to the client's.
        ask = [(at - turn["sent_at"]) * 1000 for at, turn in zip(arrivals, turns, strict=True)]
        wait = [(word - at) * 1000 for word, at in zip(said, arrivals, strict=True)]
        told = [turn["first_ms"] - a - w for turn, a, w in zip(turns, ask, wait, strict=True)]
        first = statistics.median(turn["first_ms"] for turn in turns[1:])
        row["first"] = f"{first:.0f} ms (its process's first {turns[0]['first_ms']:.0f})"
        row["asked"] = " + ".join(f"{statistics.median(part[1:]):.0f}" for part in (ask, wait, told)) + " ms"

    fake.always("openai", SILENT)
    wrong = whole(await drive(client, env, "turn"), ANSWER)
    row["silence"] = "answered" if wrong is None else f"failed: {wrong}"
    good &= wrong is None

    fake.always("openai", SLOW)
    fake.queue("openai", *[LONG] * BARGES)
    seen = len(fake.drops)
    result = await drive(client, env, "barge", str(BARGES))
    closed = [turn["closed_at"] for turn in result["turns"] if "closed_at" in turn]
    if "error" in result or len(closed) < BARGES:
        row["barge"] = f"failed: {result.get('error', 'a turn was not stopped')}"
        row["dropped"] = "-"
        return row, False
    then = await drive(client, env, "turn")  # at once: the three places must be free
    wrong = whole(then, ANSWER)
    row["barge"] = "next turn answered" if wrong is None else f"next turn failed: {wrong}"
    good &= wrong is None
    deadline = time.monotonic() + 2
    while len(fake.drops) < seen + BARGES and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    drops = fake.drops[seen:seen + BARGES]
    if len(drops) < BARGES:
        row["dropped"] = f"{len(drops)} of {BARGES} seen going"
        return row, False
    after = max((drop - stop) * 1000 for drop, stop in zip(drops, closed, strict=True))
    row["dropped"] = f"all {BARGES}, ≤ {max(after, 0):.0f} ms after the client stopped"
    return row, good


async def dev(env: dict[str, str]) -> asyncio.subprocess.Process:
    """``summon dev`` on the door-check's ports, the fake switched on; returns once its demo is written."""
    demo = RUN_DIR / "demo.json"
    demo.unlink(missing_ok=True)
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    log = (RUN_DIR.parent / "door-check-dev.log").open("wb")
    proc = await asyncio.create_subprocess_exec(str(REPO / ".venv" / "bin" / "summon"), "dev", cwd=REPO, env=env,
                                                stdout=log, stderr=log)
    deadline = time.monotonic() + 180
    while not demo.is_file():
        if proc.returncode is not None or time.monotonic() > deadline:
            sys.exit(f"door-check: summon dev did not come up (see {log.name} in .dev/)")
        await asyncio.sleep(0.25)
    return proc


async def main() -> int:
    fake = FakeProvider()
    await fake.start()
    env = {**os.environ, **PORTS, "SUMMON_RUN_DIR": str(RUN_DIR),
           "SUMMON_PROVIDERS": "openai", "SUMMON_PROVIDER_OPENAI_URL": fake.openai_url,
           "SUMMON_PROVIDER_OPENAI_KEY": "door-check", "SUMMON_PROVIDER_OPENAI_MODEL": "gpt-4o-mini",
           "AGENTS_LIVE": "1"}
    env.pop("SUMMON_AGENT_MOCK", None)
    proc = await dev(env)
    failed = False
    try:
        demo = json.loads((RUN_DIR / "demo.json").read_text(encoding="utf-8"))
        async with httpx.AsyncClient() as http:
            started = await http.post(f"{demo['door_url']}/door/start", json={"bot": "helper"},
                                      headers={"Authorization": f"Bearer {demo['token']}"})
        started.raise_for_status()
        client_env = {**os.environ, "DOOR_URL": demo["door_url"], "DOOR_GRANT": started.json()["grant"],
                      "DOOR_MODEL": "helper"}
        fake.always("openai", SLOW)
        await drive(CLIENTS[-1], client_env, "turn")  # the stack's own first turn (its provider client's first call)
        rows = []
        print(f"door-check: summon dev's door at {demo['door_url']}, a fake provider saying its first word "
              f"{FIRST * 1000:.0f} ms after each request (load {os.getloadavg()[0]:.2f})", flush=True)
        for client in CLIENTS:
            row, good = await check(client, fake, client_env)
            failed |= not good
            rows.append(row)
            print(f"{'ok  ' if good else 'FAIL'} {row['client']}: works {row['works']}; first content {row['first']} "
                  f"({row['asked']}); "
                  f"9 s silence {row['silence']}; barge-in ×{BARGES}: {row['barge']}, the provider saw {row['dropped']}",
                  flush=True)
        print("\n| client | works | first content | of which: asking, the provider, its word to the client | "
              "first word after 9 s | barge-in ×3, then a turn | the provider saw its caller go |")
        print("|---|---|---|---|---|---|---|")
        for row in rows:
            print(f"| {row['client']} | {row['works']} | {row['first']} | {row['asked']} | {row['silence']} | {row['barge']} | "
                  f"{row['dropped']} |")
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            await asyncio.wait_for(proc.wait(), 60)
        except TimeoutError:
            proc.kill()
        await fake.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
