"""What every Python client script shares: how it is told where the door is, and how it reports.

A client script is run as ``python clients/<name>.py turn`` (one streamed turn, read to its end) or
``python clients/<name>.py barge N`` (N turns in a row, each abandoned — the stream closed — the moment its first
words arrive, as a barge-in does). It prints one JSON line: ``{"turns": [...]}`` with, for each turn, its text,
``first_ms`` (from the request to the first content), ``sent_at`` (when it was asked) and, for a barge-in, ``closed_at`` (``time.monotonic()``,
CLOCK_MONOTONIC: the driver compares it with when the provider saw its caller go), or ``{"error": "..."}``."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

DOOR = os.environ["DOOR_URL"]
GRANT = os.environ["DOOR_GRANT"]
MODEL = os.environ.get("DOOR_MODEL", "helper")

Turn = Callable[[str, bool], Awaitable[dict[str, Any]]]


def now() -> float:
    return time.monotonic()


async def main(turn: Turn) -> None:
    mode = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    turns: list[dict[str, Any]] = []
    try:
        for n in range(count):
            turns.append(await turn(f"Tell me a long story, part {n + 1}.", mode == "barge"))
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:400], "turns": turns}), flush=True)
        return
    print(json.dumps({"turns": turns}), flush=True)
