"""The chaos run's stack, all real but the model: PostgreSQL and Synapse (synapse-dev/up, in a run directory and
on ports of its own), `summon serve` (the appservice, with no worker slots of its own) and three `summon worker`
processes (forked warm by tests/faults/prefork.py, so a killed one is replaced in well under a second), the
people's appservice, the fake provider, and the two proxies a scenario can turn on. Everything it starts is
stopped by PID at the end, whatever happened.

Ports (each overridable): CHAOS_PG_PORT 56010, CHAOS_HS_PORT 8310, CHAOS_AS_PORT 29710 (summon serve),
CHAOS_PEOPLE_PORT 29711, CHAOS_PROXY_PORT 29712 (the homeserver as summon sees it), CHAOS_LISTEN_PORT 29713
(PostgreSQL for summon's LISTEN connections)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import yaml

from tests.chaos.people import People, registration
from tests.chaos.provider import ChaosProvider
from tests.chaos.proxies import SilentTcp, SlowHomeserver
from tests.e2e.support import Summon
from tests.faults.support import REPO, Postgres, Processes, Synapse, WorkerProcess

RUN = REPO / ".dev" / "chaos-run"
WORK = REPO / ".dev" / "chaos"


def port(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


@dataclass
class Settings:
    pg: int = field(default_factory=lambda: port("CHAOS_PG_PORT", 56010))
    hs: int = field(default_factory=lambda: port("CHAOS_HS_PORT", 8310))
    as_: int = field(default_factory=lambda: port("CHAOS_AS_PORT", 29710))
    people: int = field(default_factory=lambda: port("CHAOS_PEOPLE_PORT", 29711))
    proxy: int = field(default_factory=lambda: port("CHAOS_PROXY_PORT", 29712))
    listen: int = field(default_factory=lambda: port("CHAOS_LISTEN_PORT", 29713))
    workers: int = 3
    run: Path = RUN  # synapse-dev/up's run directory: wiped on every start, so one of this stack's own
    work: Path = WORK  # configs, logs
    # The lease and sweep are shorter than the defaults (90 s, 10 s) so a run a dead worker held is taken up in
    # seconds, not a minute and a half; poll is the default (5 s): the NOTIFY backstop the half-open scenario meets.
    lease: float = field(default_factory=lambda: float(os.environ.get("CHAOS_LEASE_SECONDS", 10)))
    sweep: float = field(default_factory=lambda: float(os.environ.get("CHAOS_SWEEP_SECONDS", 2)))
    poll: float = field(default_factory=lambda: float(os.environ.get("CHAOS_POLL_SECONDS", 5)))
    provider_timeout: float = field(default_factory=lambda: float(os.environ.get("CHAOS_PROVIDER_TIMEOUT", 15)))


class Stack:
    def __init__(self, settings: Settings) -> None:
        self.s = settings
        self.env: dict[str, str] = {}
        self.provider = ChaosProvider()
        self.proxy: SlowHomeserver | None = None
        self.listen: SilentTcp | None = None
        self.people: People | None = None
        self.serve: Summon | None = None
        self.processes: Processes | None = None
        self.workers: list[WorkerProcess] = []
        self.worker_config: Path | None = None
        self.admin: asyncpg.Pool | None = None
        self.postgres = Postgres(settings.run)
        self.synapse: Synapse | None = None

    def _stack_env(self) -> dict[str, str]:
        return {**os.environ, "SUMMON_PG_PORT": str(self.s.pg), "SUMMON_HS_PORT": str(self.s.hs),
                "SUMMON_AS_PORT": str(self.s.as_), "SUMMON_RUN_DIR": str(self.s.run)}

    async def up(self) -> None:
        work = self.s.work
        work.mkdir(parents=True, exist_ok=True)
        for old in work.glob("*.log"):  # the workers' logs are appended to: start each run with none
            old.unlink()
        tokens = registration(work / "people.yaml", port=self.s.people, server_name="localhost")
        env = {**self._stack_env(), "SUMMON_EXTRA_REGISTRATIONS": str(work / "people.yaml")}
        up = subprocess.run([str(REPO / "synapse-dev" / "up")], env=env, capture_output=True, text=True,
                            timeout=300, check=False)
        if up.returncode != 0:
            raise RuntimeError(f"synapse-dev/up failed:\n{up.stderr}")
        self.env = dict(line.split("=", 1) for line in (self.s.run / "env").read_text().splitlines() if "=" in line)
        self.synapse = Synapse(self.env)
        self.admin = await asyncpg.create_pool(self.env["SUMMON_DSN"], min_size=1, max_size=4,
                                               server_settings={"application_name": "chaos-harness"})
        await self.provider.start()
        self.proxy = SlowHomeserver(self.env["SUMMON_HS_URL"], "127.0.0.1", self.s.proxy)
        await self.proxy.start()
        self.listen = SilentTcp("127.0.0.1", self.s.pg, "127.0.0.1", self.s.listen)
        await self.listen.start()
        puppet = "@bot_helper:localhost"
        self.people = People(hs_url=self.env["SUMMON_HS_URL"], tokens=tokens, port=self.s.people,
                             server_name="localhost", puppet=puppet)
        await self.people.start()

        summon_env = {**env, **self.provider_env()}
        self.serve = Summon(["-c", str(self.config("serve.yaml", slots=0)), "serve"], summon_env, work / "serve.log")
        await self.serve.wait_for("appservice listening", timeout=180)
        self.worker_config = self.config("worker.yaml", slots=None)
        self.processes = Processes(work, env=self.provider_env())
        self.workers = [self.processes.worker(self.worker_config) for _ in range(self.s.workers)]

    def provider_env(self) -> dict[str, str]:
        t = str(self.s.provider_timeout)
        return {"SUMMON_PROVIDERS": "primary,backup", "AGENTS_LIVE": "1",
                "SUMMON_PROVIDER_PRIMARY_KIND": "openai", "SUMMON_PROVIDER_PRIMARY_URL": self.provider.openai_url,
                "SUMMON_PROVIDER_PRIMARY_KEY": "sk-chaos", "SUMMON_PROVIDER_PRIMARY_MODEL": "gpt-test",
                "SUMMON_PROVIDER_PRIMARY_FREE": "1", "SUMMON_PROVIDER_PRIMARY_TIMEOUT": t,
                "SUMMON_PROVIDER_BACKUP_KIND": "anthropic", "SUMMON_PROVIDER_BACKUP_URL": self.provider.anthropic_url,
                "SUMMON_PROVIDER_BACKUP_KEY": "sk-chaos", "SUMMON_PROVIDER_BACKUP_MODEL": "claude-test",
                "SUMMON_PROVIDER_BACKUP_FREE": "1", "SUMMON_PROVIDER_BACKUP_TIMEOUT": t}

    def config(self, name: str, *, slots: int | None) -> Path:
        data: dict[str, Any] = yaml.safe_load((self.s.run / "summon.yaml").read_text())
        assert self.proxy is not None
        data["homeserver"]["url"] = self.proxy.url
        dsn = data["database"]["dsn"]
        data["database"] = {"dsn": dsn, "direct_dsn": f"postgresql://postgres@127.0.0.1:{self.s.listen}/summon"}
        worker: dict[str, Any] = {"lease_seconds": self.s.lease, "sweep_seconds": self.s.sweep,
                                  "poll_seconds": self.s.poll}
        if slots is not None:
            worker["slots"] = slots
        data["worker"] = worker
        path = self.s.work / name
        path.write_text(yaml.safe_dump(data))
        return path

    def replace(self, victim: WorkerProcess) -> WorkerProcess:
        """SIGKILL ``victim`` and start a worker in its place."""
        assert self.processes is not None and self.worker_config is not None
        victim.kill()
        fresh = self.processes.worker(self.worker_config)
        self.workers[self.workers.index(victim)] = fresh
        return fresh

    async def down(self) -> None:
        if self.processes is not None:
            self.processes.close()
        if self.serve is not None:
            await self.serve.interrupt(timeout=15)
        for part in (self.people, self.proxy, self.listen):
            if part is not None:
                await part.close()
        await self.provider.close()
        if self.admin is not None:
            await self.admin.close()
        subprocess.run([str(REPO / "synapse-dev" / "down")], env=self._stack_env(), timeout=120, check=False)
