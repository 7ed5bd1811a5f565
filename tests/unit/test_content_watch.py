"""The running service's watch on content/: a change is compiled and handed on; a bad edit keeps the last
good registry and says every error once; a failing publish is tried again."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from appservice.kinds import KINDS
from engine.content import Registry
from engine.content.watch import snapshot, watch

SERVER = "example.org"
INTERVAL = 0.02


def bot(name: str, body: str = "Be helpful.") -> str:
    return f"---\nname: {name}\n---\n{body}\n"


class Seen:
    def __init__(self) -> None:
        self.registries: list[Registry] = []
        self.errors: list[list[str]] = []
        self.fail_next = 0

    async def on_registry(self, registry: Registry) -> None:
        if self.fail_next:
            self.fail_next -= 1
            raise ConnectionError("the database is down")
        self.registries.append(registry)

    def on_errors(self, lines: list[str]) -> None:
        self.errors.append(lines)


def touch(path: Path, text: str) -> None:
    """``path`` changed in one step, as an editor saving it does: written beside it with a new mtime (even on a
    coarse clock), then moved into place — the watcher, looking from another thread, never sees it half-made
    (written but not yet re-timed: two states, two compiles, an error said twice)."""
    beside = path.with_name(f".{path.name}.new")
    beside.write_text(text, encoding="utf-8")
    previous = path.stat().st_mtime_ns if path.exists() else beside.stat().st_mtime_ns
    os.utime(beside, ns=(beside.stat().st_atime_ns, max(previous, beside.stat().st_mtime_ns) + 1_000_000_000))
    os.replace(beside, path)


async def until(check: Callable[[], bool], timeout: float = 2.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "not within 2 s"
        await asyncio.sleep(INTERVAL)


@pytest.fixture
async def watched(tmp_path: Path) -> AsyncIterator[tuple[Path, Seen]]:
    (tmp_path / "bots").mkdir()
    touch(tmp_path / "bots" / "helper.md", bot("Helper"))
    seen = Seen()
    task = asyncio.create_task(watch(tmp_path, None, SERVER, seen.on_registry, seen.on_errors, INTERVAL, kinds=KINDS, fetch_spec=None))
    await asyncio.sleep(INTERVAL * 3)  # its first look
    yield tmp_path, seen
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_nothing_changed_nothing_published(watched: tuple[Path, Seen]) -> None:
    _, seen = watched
    await asyncio.sleep(INTERVAL * 5)
    assert seen.registries == [] and seen.errors == []


async def test_a_change_is_live_within_two_seconds(watched: tuple[Path, Seen]) -> None:
    root, seen = watched
    touch(root / "bots" / "helper.md", bot("Helper Two"))
    await until(lambda: bool(seen.registries))
    assert seen.registries[-1].bots["helper"].name == "Helper Two"
    touch(root / "bots" / "echo.md", bot("Echo"))
    await until(lambda: len(seen.registries) == 2)
    assert list(seen.registries[-1].bots) == ["echo", "helper"]


async def test_a_bad_edit_keeps_the_last_good_registry_and_says_every_error_once(
    watched: tuple[Path, Seen], caplog: pytest.LogCaptureFixture
) -> None:
    root, seen = watched
    touch(root / "bots" / "helper.md", "---\nname: Helper\ncolour: red\nfor: vip\n---\nx\n")
    await until(lambda: bool(seen.errors))
    await asyncio.sleep(INTERVAL * 5)
    assert seen.registries == []
    assert len(seen.errors) == 1
    lines = seen.errors[0]
    assert [line.removeprefix(root.as_posix() + "/").split(": ")[0] for line in lines] == ["bots/helper.md:3", "bots/helper.md:4"]
    assert sum("content does not compile" in r.getMessage() for r in caplog.records) == 2
    touch(root / "bots" / "helper.md", bot("Helper fixed"))
    await until(lambda: bool(seen.registries))
    assert seen.registries[-1].bots["helper"].name == "Helper fixed"


async def test_a_publish_that_fails_is_tried_again(watched: tuple[Path, Seen]) -> None:
    root, seen = watched
    seen.fail_next = 2
    touch(root / "bots" / "helper.md", bot("Helper again"))
    await until(lambda: bool(seen.registries))
    assert seen.registries[-1].bots["helper"].name == "Helper again"


def test_snapshot_skips_hidden_files(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x").write_text("x")
    (tmp_path / ".swp").write_text("x")
    (tmp_path / "strings.md").write_text("x")
    assert list(snapshot(tmp_path, None, tmp_path / "missing")) == [(tmp_path / "strings.md").as_posix()]


async def test_an_edit_that_schedules_into_an_encrypted_room_is_refused(tmp_path: Path) -> None:
    (tmp_path / "bots").mkdir()
    touch(tmp_path / "bots" / "helper.md", bot("Helper"))
    seen = Seen()

    async def sealed() -> list[str]:
        return ["!sealed:example.org"]

    task = asyncio.create_task(watch(tmp_path, None, SERVER, seen.on_registry, seen.on_errors, INTERVAL,
                                     kinds=KINDS, fetch_spec=None, sealed_places=sealed))
    await asyncio.sleep(INTERVAL * 3)
    try:
        morning = ("---\nname: Helper\nhears:\n  - schedule: {every: day, at: '08:00'}\n"
                   "    in: '!sealed:example.org'\n    ask: Say good morning.\n---\nx\n")
        touch(tmp_path / "bots" / "helper.md", morning)
        await until(lambda: bool(seen.errors))
        assert seen.registries == []
        assert any("!sealed:example.org" in line and "encrypted" in line for line in seen.errors[0])
        touch(tmp_path / "bots" / "helper.md", morning.replace("!sealed", "!open"))
        await until(lambda: bool(seen.registries))
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_a_watch_ends_promptly_when_told_to_stop(tmp_path: Path) -> None:
    # The service waits for its loops to finish before it cancels them: a watch that only a cancel ended held
    # every `summon serve` up for the whole grace period (about ten seconds) after Ctrl-C.
    (tmp_path / "bots").mkdir()
    touch(tmp_path / "bots" / "a.md", bot("A"))
    seen = Seen()
    stop = asyncio.Event()
    task = asyncio.create_task(watch(tmp_path, None, SERVER, seen.on_registry, seen.on_errors, 60.0, kinds=KINDS, fetch_spec=None,
                                     stop=stop))
    await asyncio.sleep(0.1)
    stop.set()
    await asyncio.wait_for(task, timeout=2.0)
