"""Fault tests: real processes killed, real PostgreSQL restarted, the real Synapse stopped.

The session fixtures (`stack`, `template_dsn`, `dsn`, `db`) come from tests/conftest.py; `registry` and
`published` are copied from tests/db/conftest.py (conftest files are per folder). Every process a test
starts is killed at the end of the test, pass or fail, and PostgreSQL and Synapse are left answering for
the tests after these.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from appservice.kinds import KINDS
from engine.content import Registry
from engine.content.files import compile_content
from engine.run.publish import publish
from tests.faults.support import REPO, Postgres, Processes, Synapse, alive
from tests.store import TestStore


@pytest.fixture
def registry() -> Registry:
    result = compile_content(REPO / "content", kinds=KINDS, server_name="localhost", fetch_spec=None)
    assert isinstance(result, Registry), result
    return result


@pytest.fixture
async def published(db: TestStore, registry: Registry) -> Registry:
    """The shipped bots, published, with a live worker that can answer."""
    await publish(db, registry)
    await db.workers.beat("test-worker", usable=True, mode="stand-in: no key", providers=[])
    return registry


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    procs = Processes(tmp_path)
    try:
        yield procs
    finally:
        procs.close()


@pytest.fixture(scope="module")
def synapse_after_postgres(stack: dict[str, str]) -> Iterator[list[bool]]:
    """Synapse shares the restarted PostgreSQL, and its connection pool keeps the dead connections, each
    failing one request with a 500 before it is replaced. So once a module has restarted PostgreSQL,
    Synapse is restarted too (fresh connections) for the tests after it."""
    restarted: list[bool] = []
    yield restarted
    if restarted:
        hs = Synapse(stack)
        hs.stop()
        hs.start()
        assert hs.using_its_database()


@pytest.fixture
def postgres(stack: dict[str, str], synapse_after_postgres: list[bool]) -> Iterator[Postgres]:
    """The session's PostgreSQL, to restart; running again at the end of the test whatever happened."""
    pg = Postgres(Path(stack["SUMMON_RUN_DIR"]))
    options = pg.options()
    synapse_after_postgres.append(True)
    try:
        yield pg
    finally:
        if not pg.running():
            pg.start(options)


@pytest.fixture
def synapse(stack: dict[str, str]) -> Iterator[Synapse]:
    """The session's Synapse, to stop; answering again at the end of the test whatever happened, so the
    tests after this one find it up."""
    hs = Synapse(stack)
    try:
        yield hs
    finally:
        if not hs.answering():
            if hs.pid_file.exists() and alive(hs.pid()):
                hs.stop()
            hs.start()
