"""A schedule `in:` a room known to be encrypted is refused when content is published (SPEC §4, §6)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from appservice.matrix.tables.rooms import RoomTables
from tests.store import TestStore

pytestmark = pytest.mark.db
REPO = Path(__file__).resolve().parents[2]

MORNING = """---
name: Morning
hears:
  - schedule: {every: day, at: '08:00'}
    in: "!secret:localhost"
    ask: Say good morning.
---
You say good morning.
"""


async def test_publish_refuses_a_schedule_into_an_encrypted_room(db: TestStore, dsn: str, tmp_path: Path) -> None:
    (tmp_path / "content" / "bots").mkdir(parents=True)
    (tmp_path / "content" / "bots" / "morning.md").write_text(MORNING)
    config = tmp_path / "summon.yaml"
    config.write_text(yaml.safe_dump({
        "homeserver": {"url": "http://127.0.0.1:9", "server_name": "localhost"},
        "appservice": {"address": "http://127.0.0.1:9", "as_token": "a" * 20, "hs_token": "h" * 20},
        "database": {"dsn": dsn}, "content": {"dir": str(tmp_path / "content")},
    }))

    def publish() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "appservice", "-c", str(config), "publish"], cwd=REPO,
                              capture_output=True, text=True, timeout=60)

    assert publish().returncode == 0  # not known to be encrypted (yet)
    await db.of(RoomTables).ensure("!secret:localhost")
    await db.of(RoomTables).mark_encrypted("!secret:localhost")
    refused = publish()
    assert refused.returncode == 1
    assert "morning.md:" in refused.stderr and "!secret:localhost" in refused.stderr
