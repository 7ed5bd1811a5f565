"""`summon grant`: an operator mints a door grant on the command line; it is printed, recorded, and verifies."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest
import yaml

from appservice.door.grants import verify
from tests.door.conftest import KEYS, door_sources

pytestmark = pytest.mark.db
REPO = Path(__file__).resolve().parents[2]


def write_config(tmp_path: Path, dsn: str, *, door: bool = True) -> Path:
    content = tmp_path / "content"
    for name, text in door_sources().items():
        (content / name).parent.mkdir(parents=True, exist_ok=True)
        (content / name).write_text(text)
    config: dict[str, object] = {
        "homeserver": {"url": "http://127.0.0.1:1", "server_name": "localhost"},
        "appservice": {"address": "http://127.0.0.1:2", "as_token": "a" * 20, "hs_token": "h" * 20},
        "database": {"dsn": dsn}, "content": {"dir": str(content)},
    }
    if door:
        config["door"] = {"keys": KEYS, "signing_key": "k2"}
    path = tmp_path / "summon.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def grant(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "appservice", "-c", str(config), "grant", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


async def test_an_operator_mints_a_grant(tmp_path: Path, dsn: str) -> None:
    done = grant(write_config(tmp_path, dsn), "--bot", "caller", "--person", "@bob:localhost", "--minutes", "5")
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip()
    assert token.startswith("sg1.k2.")
    got = verify(token, KEYS, audience="summon-door:localhost", now=datetime.now(UTC))
    assert (got.bot, got.person, got.room, got.minted_by) == ("caller", "@bob:localhost", None, "operator")
    assert (got.expires_at - got.issued_at).total_seconds() == 300
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow("SELECT bot, person, key_id, minted_by FROM door_grants WHERE id = $1", got.id)
    finally:
        await conn.close()
    assert dict(row) == {"bot": "caller", "person": "@bob:localhost", "key_id": "k2", "minted_by": "operator"}


@pytest.mark.parametrize(("args", "said"), [
    (["--bot", "roomy", "--person", "@bob:localhost"], "no bot on the voice surface (those that are: caller)"),
    (["--bot", "caller", "--person", "bob"], "@name:server"),
    (["--bot", "caller", "--person", "@bob:localhost", "--minutes", "45"], "at most 30 minutes"),
])
def test_a_grant_that_cannot_be_is_one_line(tmp_path: Path, dsn: str, args: list[str], said: str) -> None:
    done = grant(write_config(tmp_path, dsn), *args)
    assert done.returncode == 2 and done.stdout == ""
    assert said in done.stderr and done.stderr.strip().count("\n") == 0


def test_no_door_no_grant(tmp_path: Path, dsn: str) -> None:
    done = grant(write_config(tmp_path, dsn, door=False), "--bot", "caller", "--person", "@bob:localhost")
    assert done.returncode == 2
    assert "door: is not configured" in done.stderr
