"""End-to-end helpers: a whole stack of a test's own (PostgreSQL and Synapse by synapse-dev/up, on free
ports, in a run directory of its own), summon's own processes, and a person who talks to the bots through
the homeserver's client API. Everything a test starts is stopped by PID when it ends, pass or fail."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mautrix.client import ClientAPI
from mautrix.types import EventType, MessageType, PaginationDirection, RoomID, TextMessageEventContent, UserID

from appservice.dev import register_or_login
from tests.faults.support import alive

REPO = Path(__file__).resolve().parents[2]
RUNS = REPO / ".dev" / "e2e"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ports() -> dict[str, str]:
    return {"SUMMON_PG_PORT": str(free_port()), "SUMMON_HS_PORT": str(free_port()),
            "SUMMON_AS_PORT": str(free_port())}


def read_env(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


@contextmanager
def own_stack(name: str) -> Iterator[dict[str, str]]:
    """PostgreSQL + Synapse of this test's own, on free ports; the env synapse-dev/up wrote (plus the run
    dir), stopped by synapse-dev/down at the end."""
    run = RUNS / f"{name}-{uuid.uuid4().hex[:6]}"
    env = {**os.environ, **ports(), "SUMMON_RUN_DIR": str(run)}
    up = subprocess.run([str(REPO / "synapse-dev" / "up")], env=env, capture_output=True, text=True, timeout=240)
    assert up.returncode == 0, up.stderr
    try:
        yield {**env, **read_env(run / "env")}
    finally:
        subprocess.run([str(REPO / "synapse-dev" / "down")], env=env, timeout=120, check=False)
        shutil.rmtree(run, ignore_errors=True)


class Summon:
    """A ``summon`` process (serve, worker, dev …), its output in a file; stopped with SIGINT, then killed.
    ``program`` is how summon is started: by default this checkout's, through this Python."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path, cwd: Path = REPO,
                 program: list[str] | None = None) -> None:
        self.log = log
        self._out = log.open("w")
        start = program or [sys.executable, "-m", "appservice"]
        self.proc = subprocess.Popen([*start, *args], env=env, cwd=cwd,
                                     stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    async def wait_for(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output():
            assert self.proc.poll() is None, f"summon exited ({self.proc.returncode}):\n{self.output()[-3000:]}"
            assert time.monotonic() < deadline, f"no {text!r} within {timeout}s:\n{self.output()[-3000:]}"
            await asyncio.sleep(0.1)

    async def interrupt(self, timeout: float = 60) -> int:
        """SIGINT (Ctrl-C), and wait for it to exit; its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        return self.stop()

    def stop(self) -> int:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self._out.close()
        assert self.proc.returncode is not None
        return self.proc.returncode


class Person:
    """Someone on the homeserver, talking through its client API (what Element does)."""

    def __init__(self, client: ClientAPI) -> None:
        self.client = client

    @classmethod
    async def register(cls, hs_url: str, name: str) -> Person:
        return cls(await register_or_login(hs_url, f"{name}{uuid.uuid4().hex[:6]}", "pw-" + uuid.uuid4().hex))

    async def room_with(self, puppet: str, timeout: float = 60) -> RoomID:
        room = await self.client.create_room(name="e2e", invitees=[UserID(puppet)])
        deadline = time.monotonic() + timeout
        while UserID(puppet) not in await self.client.get_joined_members(room):
            assert time.monotonic() < deadline, f"{puppet} never joined"
            await asyncio.sleep(0.2)
        return room

    async def say(self, room: RoomID, text: str) -> str:
        content = TextMessageEventContent(msgtype=MessageType.TEXT, body=text)
        return str(await self.client.send_message_event(room, EventType.ROOM_MESSAGE, content))

    async def answers(self, room: RoomID, asked: list[str], timeout: float = 60) -> dict[str, str]:
        """The bot's notice replying to each of ``asked``, by the asking event id."""
        deadline = time.monotonic() + timeout
        found: dict[str, str] = {}
        while True:
            page = await self.client.get_messages(room, PaginationDirection.BACKWARD, limit=100)
            for ev in page.events:  # type: ignore[attr-defined]
                raw: dict[str, Any] = ev.serialize()
                content = raw.get("content") or {}
                replied = ((content.get("m.relates_to") or {}).get("m.in_reply_to") or {}).get("event_id")
                if content.get("msgtype") == "m.notice" and replied in asked:
                    found[replied] = str(content.get("body", ""))
            if len(found) == len(asked) or time.monotonic() > deadline:
                return found
            await asyncio.sleep(0.3)

    async def close(self) -> None:
        await self.client.api.session.close()


def gone(pid_file: Path) -> bool:
    return not pid_file.exists() or not alive(int(pid_file.read_text().strip()))
