"""The mention's path, counted (`make mention-path`): the product files a mention's transaction passes through,
from the homeserver's PUT to the run row, and how often it goes back to a file it had left.

A pytest plugin (``-p tests.bench.mention_path``) around the spine test's first mention: while the test runs, a
profile hook notes each function *entered* (a coroutine resumed is not entered again) in a file under engine/ or
appservice/, by asyncio task. The transaction's task is cut at each ``transaction`` call of the endpoint; the
first piece that reaches ``engine/run/summon.py`` is the mention's path. Consecutive entries in one file are one
visit; a return is a visit to a file the path had already left. Counted twice: with everything, and without the
plumbing every path touches (the store and its families, the clock, the log, the task group).

It measures structure, not speed; the figures are the same on every run of the same code.
"""

from __future__ import annotations

import asyncio
import dis
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLUMBING = ("engine/store/", "engine/clock", "engine/log", "engine/tasks", "appservice/matrix/tables/",
            "appservice/logs")
TEST = "test_a_mention_in_a_room_gets_one_answer_from_the_puppet_as_a_reply"
ENDPOINT = ("appservice/matrix/inbound/transactions.py", "transaction")
REACHED = "engine/run/summon.py"


def figures(path: Sequence[str], *, plumbing: bool = True) -> dict[str, Any]:
    """Files visited and returns to a file already left, over ``path`` (a file per function entered)."""
    kept = [f for f in path if plumbing or not f.startswith(PLUMBING)]
    visits = [f for i, f in enumerate(kept) if i == 0 or kept[i - 1] != f]
    seen: set[str] = set()
    returns = 0
    for f in visits:
        returns += f in seen
        seen.add(f)
    return {"files": len(seen), "returns": returns, "visits": visits}


def pieces(entered: Sequence[tuple[str, str]]) -> list[list[str]]:
    """A task's entries cut at each call of the transaction endpoint (a connection kept alive serves several)."""
    cut: list[list[str]] = [[]]
    for rel, name in entered:
        if (rel, name) == ENDPOINT and cut[-1]:
            cut.append([])
        cut[-1].append(rel)
    return cut


class Tracer:
    def __init__(self) -> None:
        self.by_task: dict[object, list[tuple[str, str]]] = {}
        self._first: dict[CodeType, int] = {}
        self._prefix = f"{ROOT}/"

    def hook(self, frame: FrameType, event: str, arg: object) -> None:
        if event != "call" or not frame.f_code.co_filename.startswith(self._prefix):
            return
        rel = frame.f_code.co_filename[len(self._prefix):]
        if not rel.startswith(("engine/", "appservice/")):
            return
        code = frame.f_code
        first = self._first.get(code)
        if first is None:
            first = self._first[code] = next((i.offset for i in dis.get_instructions(code) if i.opname == "RESUME"), 0)
        if frame.f_lasti > first:  # a coroutine resumed, not entered
            return
        try:
            task: object = asyncio.current_task()
        except RuntimeError:
            task = None
        self.by_task.setdefault(task, []).append((rel, code.co_name))

    def mention(self) -> list[str] | None:
        found = [p for entered in self.by_task.values() for p in pieces(entered) if REACHED in p]
        return found[0] if found else None


TRACER = Tracer()


def pytest_runtest_call(item: pytest.Item) -> None:
    if item.name == TEST:
        sys.setprofile(TRACER.hook)


def pytest_runtest_teardown(item: pytest.Item) -> None:
    sys.setprofile(None)


def pytest_unconfigure(config: pytest.Config) -> None:
    path = TRACER.mention()
    if path is None:
        print("mention-path: no transaction reached the run row (was the spine test run?)", file=sys.stderr)
        return
    every, product = figures(path), figures(path, plumbing=False)
    out = ROOT / ".dev" / "bench" / "mention_path.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"every": every, "product": product}, indent=1), encoding="utf-8")
    for name, f in (("every file", every), ("without plumbing", product)):
        print(f"mention-path, {name}: {f['files']} files, {f['returns']} returns to a file already left")
    print(f"mention-path: the visits, in order, are in {out.relative_to(ROOT)}")
