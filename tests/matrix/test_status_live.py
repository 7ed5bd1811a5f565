"""`summon status` against the real stack: every part up exits 0; a part down says which and exits 1."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from appservice.app import Service
from tests.matrix.conftest import matrix_dsn

REPO = Path(__file__).resolve().parents[2]


async def status(config: Path, env: dict[str, str]) -> tuple[int, str]:
    # Run beside the service (not blocking the loop it serves on): the homeserver's ping reaches it.
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "appservice", "-c", str(config), "status", cwd=REPO, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode() + err.decode()


def parts(screen: str) -> dict[str, str]:
    return {line.split()[0]: line for line in screen.splitlines() if line.strip()}


async def test_status_with_everything_up_says_ok_and_exits_0(stack: dict[str, str], service: Service,
                                                             template_dsn: str) -> None:
    env = {**os.environ, "SUMMON_DATABASE_DSN": matrix_dsn(template_dsn)}
    code, screen = await status(Path(stack["SUMMON_CONFIG"]), env)
    assert code == 0, screen
    shown = parts(screen)
    for part in ("database", "homeserver", "appservice", "workers", "providers"):
        assert shown[part].split()[1] == "ok", screen
    assert "stand-in" in shown["providers"]
    assert "waiting" in shown["queue"] and "running" in shown["queue"]
    assert "unsent" in shown["outbox"]


async def test_status_says_what_is_down_and_exits_1(stack: dict[str, str], service: Service, template_dsn: str,
                                                    tmp_path: Path) -> None:
    # A homeserver nobody listens on, and a database that is not there: both DOWN, the rest unknown.
    text = Path(stack["SUMMON_CONFIG"]).read_text()
    text = text.replace(f"127.0.0.1:{stack['SUMMON_HS_PORT']}", "127.0.0.1:9")
    config = tmp_path / "summon.yaml"
    config.write_text(text)
    env = {**os.environ, "SUMMON_DATABASE_DSN": "postgresql://summon:s3cret-pw@127.0.0.1:9/summon"}
    code, screen = await status(config, env)
    assert code == 1, screen
    shown = parts(screen)
    assert shown["homeserver"].split()[1] == "DOWN"
    assert shown["database"].split()[1] == "DOWN"
    assert "s3cret-pw" not in screen  # the DSN is shown without its password
    assert shown["workers"].split()[1] == "DOWN"


async def test_status_says_no_worker_beats(stack: dict[str, str], service: Service, dsn: str) -> None:
    # The service's database has a beating worker; a fresh database (``dsn``) has none.
    env = {**os.environ, "SUMMON_DATABASE_DSN": dsn}
    code, screen = await status(Path(stack["SUMMON_CONFIG"]), env)
    assert code == 1, screen
    shown = parts(screen)
    assert shown["database"].split()[1] == "ok"
    assert shown["workers"].split()[1] == "DOWN" and "none has beaten" in shown["workers"]
    assert shown["providers"].split()[1] == "DOWN"
