"""Helpers for the fault tests: worker processes (forked warm by prefork.py), the session's PostgreSQL
restarted with pg_ctl and its Synapse stopped by PID and started again, both as synapse-dev/up runs
them, and a poll that rides out a database restart. The fixtures wrapping them are in conftest.py."""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import yaml

from engine.errors import StoreError

REPO = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    """Like synapse-dev/down: a zombie counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X")


@dataclass
class WorkerProcess:
    pid: int
    log: Path

    def alive(self) -> bool:
        return alive(self.pid)

    def kill(self) -> None:
        """SIGKILL, and wait until it is gone."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 10
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not self.alive(), f"worker {self.pid} survived SIGKILL"


class Processes:
    """`summon worker` processes started by one test, forked warm by tests/faults/prefork.py (each runs
    ``appservice.__main__.main(["-c", config, "worker"])`` in its own process and session). Every one is
    killed when the test ends, whatever happened, and so is the fork server."""

    def __init__(self, tmp_path: Path, *, env: dict[str, str | None] | None = None) -> None:
        """``env``: variables the workers are started with over the test's own (None: without that one)."""
        self.tmp_path = tmp_path
        self.env = env or {}
        self.started: list[WorkerProcess] = []
        self._server: subprocess.Popen[str] | None = None
        self._stderr: Any = None

    def worker_config(self, dsn: str, **worker: Any) -> Path:
        config = {
            "homeserver": {"url": "http://127.0.0.1:9", "server_name": "localhost"},
            "appservice": {"address": "http://127.0.0.1:9", "as_token": "a" * 20, "hs_token": "h" * 20},
            "database": {"dsn": dsn},
            "worker": worker,
            "content": {"dir": str(REPO / "content")},
        }
        path = self.tmp_path / "summon.yaml"
        path.write_text(yaml.safe_dump(config))
        return path

    def _fork_server(self) -> subprocess.Popen[str]:
        if self._server is None:
            # The mock model answers (a scripted run is never bought anyway), and the config file's DSN counts.
            env = {k: v for k, v in os.environ.items()
                   if not k.startswith(("SUMMON_PROVIDER", "AGENTS_LIVE", "SUMMON_DATABASE_DSN", "SUMMON_AS_TOKEN",
                                        "SUMMON_HS_TOKEN", "SUMMON_CONFIG"))}
            for key, value in self.env.items():
                if value is None:
                    env.pop(key, None)
                else:
                    env[key] = value
            self._stderr = (self.tmp_path / "prefork.log").open("wb")
            self._server = subprocess.Popen(
                [sys.executable, "-m", "tests.faults.prefork"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=self._stderr, text=True, env=env, cwd=REPO, start_new_session=True)
            assert self._server.stdout is not None
            ready = self._server.stdout.readline().strip()
            assert ready == "ready", (self.tmp_path / "prefork.log").read_text()
        return self._server

    def worker(self, config: Path) -> WorkerProcess:
        server = self._fork_server()
        assert server.stdin is not None and server.stdout is not None
        log = self.tmp_path / f"worker-{len(self.started)}.log"
        server.stdin.write(f"{config} {log}\n")
        server.stdin.flush()
        proc = WorkerProcess(int(server.stdout.readline()), log)
        self.started.append(proc)
        return proc

    def close(self) -> None:
        for proc in self.started:
            if proc.alive():
                proc.kill()
        if self._server is not None:
            for f in (self._server.stdin, self._server.stdout):
                if f is not None:
                    f.close()
            try:
                self._server.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self._server.pid, signal.SIGKILL)
                self._server.wait(10)
            self._stderr.close()


async def wait_for(check: Any, *, timeout: float, interval: float = 0.1, what: str = "condition") -> Any:
    """Poll ``check`` (async) until truthy; database errors while polling (PostgreSQL restarting) are
    retried, not raised: the raw pool's, and the store's (which has translated them)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: BaseException | None = None
    while True:
        try:
            result = await check()
            if result:
                return result
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, StoreError) as exc:
            last = exc
        if loop.time() > deadline:
            raise AssertionError(f"{what} not met within {timeout}s (last error: {last!r})")
        await asyncio.sleep(interval)


# --- PostgreSQL, stopped and started the way synapse-dev/up runs it -------------------------------------


def pg_bin(data: Path | None = None) -> Path:
    """The PostgreSQL that runs the cluster at ``data`` — its postmaster.opts names the server binary it was
    started with (synapse-dev/up may have taken pgserver's, another, or the system's) —; else the newest
    installed on the system."""
    opts = data / "postmaster.opts" if data is not None else None
    if opts is not None and opts.exists():
        words = shlex.split(opts.read_text(encoding="utf-8"))
        if words and (Path(words[0]).parent / "pg_ctl").exists():
            return Path(words[0]).parent
    found = sorted((d for d in Path("/usr/lib/postgresql").glob("*/bin") if (d / "postgres").exists()
                    and (d / "initdb").exists()), key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0)
    assert found, "no PostgreSQL server installed"
    return found[-1]


class Postgres:
    """The session's PostgreSQL (under SUMMON_TEST_RUN_DIR), restarted or stopped and started again with the
    options it was started with; pids/postgres.pid follows it so synapse-dev/down still stops it."""

    def __init__(self, run_dir: Path) -> None:
        self.run = run_dir
        self.data = run_dir / "pg" / "data"

    def _pg_ctl(self, *args: str) -> None:
        cmd = [str(pg_bin(self.data) / "pg_ctl"), "-D", str(self.data), "-l", str(self.run / "pg" / "postgres.log"), *args]
        if os.getuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=False)
        assert done.returncode == 0, f"{' '.join(cmd)}: {done.stdout}{done.stderr}"

    def _record_pid(self) -> None:
        pid = (self.data / "postmaster.pid").read_text().splitlines()[0]
        (self.run / "pids" / "postgres.pid").write_text(pid + "\n")

    def options(self) -> str:
        """The server's own options from postmaster.opts, without the binary and -D (pg_ctl adds those)."""
        argv = shlex.split((self.data / "postmaster.opts").read_text())[1:]
        if "-D" in argv:
            i = argv.index("-D")
            del argv[i:i + 2]
        return shlex.join(argv)

    def restart(self) -> None:
        self._pg_ctl("restart", "-m", "fast", "-w", "-t", "60")
        self._record_pid()

    def stop(self) -> str:
        options = self.options()
        self._pg_ctl("stop", "-m", "fast", "-w", "-t", "60")
        return options

    def start(self, options: str) -> None:
        self._pg_ctl("start", "-w", "-t", "60", "-o", options)
        self._record_pid()

    def running(self) -> bool:
        pid_file = self.data / "postmaster.pid"
        return pid_file.exists() and alive(int(pid_file.read_text().splitlines()[0]))


# --- Synapse, stopped by PID and started again exactly as synapse-dev/up starts it ---------------------


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except (OSError, ValueError):
        return False


class Synapse:
    def __init__(self, stack: dict[str, str]) -> None:
        self.run = Path(stack["SUMMON_RUN_DIR"])
        self.url = stack["SUMMON_HS_URL"]
        self.pid_file = self.run / "pids" / "synapse.pid"

    def pid(self) -> int:
        return int(self.pid_file.read_text().strip())

    def answering(self) -> bool:
        return http_ok(f"{self.url}/_matrix/client/versions")

    def using_its_database(self) -> bool:
        """A request Synapse answers from its database (not a cache): is the username taken?"""
        return http_ok(f"{self.url}/_matrix/client/v3/register/available?username=probe{uuid.uuid4().hex[:10]}")

    def stop(self) -> None:
        """SIGTERM by PID (as synapse-dev/down does), SIGKILL after 5 s; returns once it is gone."""
        pid = self.pid()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        assert b"synapse.app.homeserver" in cmdline, f"pid {pid} is not our Synapse: {cmdline!r}"
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
            while alive(pid):
                time.sleep(0.05)
        assert not self.answering()

    def start(self, timeout: float = 90) -> None:
        """The same command line as synapse-dev/up (setsid, detached, output to synapse/stdout.log, here
        appended), its PID in pids/synapse.pid, then wait for /_matrix/client/versions."""
        python = Path(os.environ.get("SUMMON_VENV") or REPO / ".venv") / "bin" / "python"
        config = self.run / "synapse" / "homeserver.yaml"
        script = (f'setsid {shlex.quote(str(python))} -m synapse.app.homeserver -c {shlex.quote(str(config))} '
                  f'>>{shlex.quote(str(self.run / "synapse" / "stdout.log"))} 2>&1 </dev/null & echo $!')
        out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30, check=True)
        pid = int(out.stdout.strip())
        self.pid_file.write_text(f"{pid}\n")
        deadline = time.monotonic() + timeout
        while not self.answering():
            assert alive(pid), "Synapse exited during start-up; see " + str(self.run / "synapse" / "stdout.log")
            assert time.monotonic() < deadline, f"Synapse was not ready within {timeout}s"
            time.sleep(0.1)
