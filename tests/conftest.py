"""Shared fixtures. Unit tests need nothing; db and matrix tests start the real stack (PostgreSQL and
Synapse, by synapse-dev/up) once per session, on ports of their own so a running `make dev` is left
alone, and give each test a database cloned from a migrated template (milliseconds, and clean)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from engine.store import migrate
from engine.tools.quarantine import Quarantine
from tests.book import BOOK
from tests.providers.fake_provider import FakeProvider
from tests.store import TestStore

REPO = Path(__file__).resolve().parents[1]
# The tests choose the stand-in model, as an operator would (no provider, no bots otherwise): every service,
# worker and process they start answers through it. A test that buys passes its own environment.
os.environ["SUMMON_AGENT_MOCK"] = "1"
# Each pytest-xdist worker (`make test` runs several: the suite mostly waits) starts a stack of its own: its run
# directory beside the first, its ports 100 apart (gw0 on the ports given, gw1 100 up, …).
WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
_RUN = Path(os.environ.get("SUMMON_TEST_RUN_DIR") or REPO / ".dev" / "test-run")
TEST_RUN = _RUN if WORKER == 0 else _RUN.with_name(f"{_RUN.name}-gw{WORKER}")
PORTS = {
    "SUMMON_PG_PORT": str(int(os.environ.get("SUMMON_TEST_PG_PORT", "55433")) + 100 * WORKER),
    "SUMMON_HS_PORT": str(int(os.environ.get("SUMMON_TEST_HS_PORT", "8009")) + 100 * WORKER),
    "SUMMON_AS_PORT": str(int(os.environ.get("SUMMON_TEST_AS_PORT", "29334")) + 100 * WORKER),
}


# `make test` hands whole files to its workers, in the order collected (--no-loadscope-reorder): the longest
# first, so that no long file is left to start when the others are done and the run ends on one worker. These are
# the files measured longest (tens of seconds each: they wait on a Synapse down for a minute, a `summon dev`, a
# wheel installed elsewhere, three workers and a rate window), then the folders whose tests wait on a real
# Synapse or on processes, then the rest; within each, the order as collected.
LONGEST_FIRST = (
    "tests/faults/test_homeserver_down.py", "tests/matrix/test_social_live.py", "tests/e2e/test_dev.py",
    "tests/db/test_provider_limits.py",
    "tests/matrix/test_members_live.py", "tests/e2e/test_installed.py", "tests/matrix/test_voice_live.py",
    "tests/db/test_spend.py", "tests/matrix/test_spine.py", "tests/faults/test_postgres_restart.py",
    "tests/matrix/test_many_at_once_live.py", "tests/e2e/test_pgbouncer.py", "tests/matrix/test_desk_live.py",
    "tests/door/test_door_cli.py",
)
SLOW_FOLDERS = ("tests/faults/", "tests/e2e/", "tests/matrix/", "tests/fuzz/", "tests/db/", "tests/desk/",
                "tests/door/")


def _weight(path: str) -> tuple[int, int]:
    if path in LONGEST_FIRST:
        return 0, LONGEST_FIRST.index(path)
    folder = next((i for i, f in enumerate(SLOW_FOLDERS) if path.startswith(f)), len(SLOW_FOLDERS))
    return 1, folder


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: _weight(item.nodeid.split("::", 1)[0]))  # stable: each file's own order kept


def _read_env(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        k, _, v = line.partition("=")
        if k:
            out[k] = v
    return out


@pytest.fixture(scope="session")
def stack() -> Iterator[dict[str, str]]:
    """The real PostgreSQL + Synapse, up for the whole session and stopped by PID at its end."""
    # A second deployment with a puppet prefix of its own (tests/matrix/test_prefix_live.py), registered with
    # Synapse from its start; written beside the run dir, which `up` wipes.
    # And a fake social bridge (appservice/social/demo_bridge.py, as make dev's), an appservice of the tests' own.
    from appservice.social import demo_bridge
    from tests.matrix.prefixed import write_registration
    server_name = os.environ.get("SUMMON_SERVER_NAME", "localhost")
    extra, prefixed = write_registration(TEST_RUN.parent / (TEST_RUN.name + "-prefixed"), PORTS["SUMMON_HS_PORT"],
                                         server_name)
    bridge, bridged = demo_bridge.write_registration(TEST_RUN.parent / (TEST_RUN.name + "-fakebridge"), server_name)
    prefixed = {**prefixed, **bridged}
    env = {**os.environ, **PORTS, "SUMMON_RUN_DIR": str(TEST_RUN), "SUMMON_EXTRA_REGISTRATIONS": f"{extra} {bridge}"}
    up = subprocess.run([str(REPO / "synapse-dev" / "up")], env=env, capture_output=True, text=True, timeout=180)
    if up.returncode != 0:
        pytest.fail(f"synapse-dev/up failed:\n{up.stderr}", pytrace=False)
    try:
        yield {**_read_env(TEST_RUN / "env"), **prefixed}
    finally:
        subprocess.run([str(REPO / "synapse-dev" / "down")], env=env, timeout=60, check=False)


def _dsn(stack: dict[str, str], dbname: str) -> str:
    return f"postgresql://postgres@127.0.0.1:{stack['SUMMON_PG_PORT']}/{dbname}"


@pytest.fixture(scope="session")
async def template_dsn(stack: dict[str, str]) -> str:
    admin = await asyncpg.connect(_dsn(stack, "postgres"))
    try:
        await admin.execute("DROP DATABASE IF EXISTS summon_template")
        await admin.execute("CREATE DATABASE summon_template TEMPLATE template0 ENCODING 'UTF8'")
    finally:
        await admin.close()
    dsn = _dsn(stack, "summon_template")
    await migrate(dsn)
    return dsn


async def _clone(stack: dict[str, str]) -> str:
    """A new database cloned from the migrated template; its name."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(_dsn(stack, "postgres"))
    try:
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE summon_template')
    finally:
        await admin.close()
    return name


async def _drop(stack: dict[str, str], name: str) -> None:
    admin = await asyncpg.connect(_dsn(stack, "postgres"))
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


class Clones:
    """Fresh databases, each cloned one ahead: while a test runs, PostgreSQL clones the next test's (a clone
    costs 0.3-1 s of PostgreSQL's time under load, the largest part of most db tests). Every test still gets a
    database nobody has opened, a copy of the migrated template as it stands (no test changes the template)."""

    def __init__(self, stack: dict[str, str]) -> None:
        self._stack = stack
        self._next: asyncio.Task[str] | None = None
        self._dropping: set[asyncio.Task[None]] = set()

    async def take(self) -> str:
        ahead, self._next = self._next, None
        name = None
        if ahead is not None:
            try:
                name = await ahead
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):  # PostgreSQL went away meanwhile (tests/faults restart it)
                name = None
        name = name or await _clone(self._stack)
        self._next = asyncio.get_running_loop().create_task(_clone(self._stack))
        return name

    def drop_later(self, name: str) -> None:
        """Drop a finished test's database while the next test runs (a drop waits on PostgreSQL 10-80 ms)."""
        task = asyncio.get_running_loop().create_task(self._drop(name))
        self._dropping.add(task)
        task.add_done_callback(self._dropping.discard)

    async def _drop(self, name: str) -> None:
        try:
            await _drop(self._stack, name)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):  # PostgreSQL went away (tests/faults): the cluster goes with the run
            pass

    async def close(self) -> None:
        await asyncio.gather(*self._dropping)
        if self._next is None:
            return
        try:
            name = await self._next
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
            return
        await _drop(self._stack, name)


@pytest.fixture(scope="session")
async def clones(stack: dict[str, str], template_dsn: str) -> AsyncIterator[Clones]:
    made = Clones(stack)
    yield made
    await made.close()


@pytest.fixture
async def dsn(stack: dict[str, str], clones: Clones) -> AsyncIterator[str]:
    """A fresh database for one test, cloned from the migrated template."""
    name = await clones.take()
    yield _dsn(stack, name)
    clones.drop_later(name)


@pytest.fixture
async def db(dsn: str) -> AsyncIterator[TestStore]:
    """The store on a fresh database, as the engine uses it — and, for the test's own checks, its raw pool
    (``db.pool``) and the test-only queries (``db.tests``)."""
    store = await TestStore.open(dsn, min_size=1, max_size=8)
    yield store
    await store.close()


@pytest.fixture(autouse=True)
def a_clean_book() -> Iterator[None]:
    """What a test said the stand-in says is that test's alone."""
    BOOK.clear()
    yield
    BOOK.clear()


# No test may reach the network beyond loopback: resolving any other host fails, and fails the test.
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


@pytest.fixture(autouse=True)
def only_loopback(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    reached: list[str] = []
    real = socket.getaddrinfo

    def guarded(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else str(host)
        if name not in LOOPBACK:
            reached.append(name)
            raise socket.gaierror(socket.EAI_NONAME, f"provider tests stay on loopback, not {name}")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", guarded)
    yield reached
    assert reached == [], f"a test tried to reach beyond loopback: {reached}"


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Any]:
    """Debian's Chromium under Playwright, one for the session (each test takes a fresh context)."""
    from tests.browser import chromium

    async with chromium() as launched:
        yield launched


async def _fake_provider() -> AsyncIterator[FakeProvider]:
    """A fake provider on 127.0.0.1 speaking the real OpenAI and Anthropic wire formats."""
    server = FakeProvider()
    await server.start()
    try:
        yield server
    finally:
        await server.close()


@pytest.fixture(scope="session")
async def quarantine() -> AsyncIterator[Quarantine]:
    """Where fetched pages and feeds are parsed: the service's own children, shared by the session's tests."""
    q = Quarantine()
    try:
        yield q
    finally:
        await q.close()


# ``fake``, and ``fake2`` for a chain of two.
fake = pytest.fixture(_fake_provider, name="fake")
fake2 = pytest.fixture(_fake_provider, name="fake2")
