"""The deployment keeps the puppet prefix it started with: remembered by its first start (a deployment from
before the setting had @bot_…), and a start with another is refused in one sentence before anything is done."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest
import yaml

from appservice.app import Service
from appservice.config import parse_config
from engine.errors import ConfigError
from engine.store.migrate import migrate, migration_files
from tests.db.test_arrival_migration import blank, migrations_up_to  # noqa: F401 (a fixture)
from tests.store import TestStore
from tests.unit.test_config import minimal

pytestmark = pytest.mark.db
REPO = Path(__file__).resolve().parents[2]
PROFILES = "0027_profiles"


async def test_the_first_prefix_is_remembered(db: TestStore) -> None:
    assert await db.profiles.puppet_prefix("ai_") == "ai_"
    assert await db.profiles.puppet_prefix("bot_") == "ai_"


async def test_two_processes_starting_at_once_both_read_the_prefix_one_of_them_remembered(db: TestStore) -> None:
    """`summon serve` and `summon worker` started together on a new database: the one whose insert loses the
    race waits for the other's commit, and then reads the prefix it recorded (not nothing)."""
    async with db.pool.acquire() as first:
        remembering = first.transaction()
        await remembering.start()
        await first.execute("INSERT INTO deployment (puppet_prefix) VALUES ('ai_')")
        second = asyncio.create_task(db.profiles.puppet_prefix("ai_"))
        await asyncio.sleep(0.3)
        assert not second.done()  # waiting on the first one's row
        await remembering.commit()
        assert await asyncio.wait_for(second, 10) == "ai_"


async def test_a_deployment_from_before_the_setting_has_bot_(blank: str, tmp_path: Path) -> None:  # noqa: F811
    before = max(p.stem for p in migration_files() if p.stem < PROFILES)
    await migrate(blank, migrations_up_to(tmp_path / "sql", before))
    conn = await asyncpg.connect(blank)
    try:
        await conn.execute("INSERT INTO bots (slug, name, puppet, surfaces, compiled, published_at) "
                           "VALUES ('helper', 'Helper', '@bot_helper:hs', '{rooms}', '{}', now())")
        await migrate(blank, migrations_up_to(tmp_path / "sql", PROFILES))
        assert await conn.fetchval("SELECT puppet_prefix FROM deployment") == "bot_"
    finally:
        await conn.close()


async def test_a_fresh_database_takes_the_configured_prefix(blank: str) -> None:  # noqa: F811
    await migrate(blank)
    conn = await asyncpg.connect(blank)
    try:
        assert await conn.fetchval("SELECT count(*) FROM deployment") == 0
    finally:
        await conn.close()


async def test_a_start_with_another_prefix_is_refused_in_a_sentence(dsn: str, db: TestStore) -> None:
    assert await db.profiles.puppet_prefix("bot_") == "bot_"  # the deployment started with the default
    raw = minimal()
    raw["database"]["dsn"] = dsn
    raw["appservice"]["puppet_prefix"] = "ai_"
    service = Service(parse_config(raw, {}))
    with pytest.raises(ConfigError) as caught:
        await service.start()
    assert str(caught.value) == (
        "config: appservice.puppet_prefix: this deployment's puppets are @bot_<slug>, and rooms know them by "
        "those ids, so it cannot become 'ai_'; set it back to 'bot_' (a new prefix needs a new database)")
    assert await db.pool.fetchval("SELECT count(*) FROM bots") == 0  # refused before anything was published


async def test_summon_publish_with_another_prefix_is_refused_too(dsn: str, db: TestStore, tmp_path: Path) -> None:
    assert await db.profiles.puppet_prefix("bot_") == "bot_"
    raw = minimal()
    raw["database"]["dsn"] = dsn
    raw["appservice"]["puppet_prefix"] = "ai_"
    raw["content"] = {"dir": str(REPO / "content")}
    config = tmp_path / "summon.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    refused = subprocess.run([sys.executable, "-m", "appservice", "-c", str(config), "publish"], cwd=REPO,
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2  # a configuration error, as for any other
    assert "appservice.puppet_prefix: this deployment's puppets are @bot_<slug>" in refused.stderr
    assert await db.pool.fetchval("SELECT count(*) FROM bots") == 0
