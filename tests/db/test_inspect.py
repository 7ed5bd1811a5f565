"""`summon runs`: an operator sees each run's outcome and every step, from the rows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from appservice.matrix.voice_tables import VoiceTables
from engine.content import Registry
from engine.surface import RunInfo
from tests.db.runs import insert_run
from tests.db.test_worker import RecordingSurface, make_worker
from tests.store import TestStore

pytestmark = pytest.mark.db
REPO = Path(__file__).resolve().parents[2]


async def test_runs_shows_the_outcome_and_every_step(db: TestStore, dsn: str, published: Registry, tmp_path: Path) -> None:
    async def lookup(run: RunInfo, arguments: dict[str, Any]) -> str:
        return "sunny"

    run_id = await insert_run(db, script=[
        {"tool_calls": [{"id": "c1", "name": "lookup", "arguments": {}}], "tokens_in": 12, "tokens_out": 3,
         "cost_usd": 0.0004},
        {"text": "It is sunny."},
    ])
    failed = await insert_run(db, script=[{"error": "The model is overloaded.", "error_class": "provider"}])
    worker = make_worker(db, published, RecordingSurface(), worker_id="w", tools={"lookup": lookup})
    while await worker.work_once():
        pass
    config = tmp_path / "summon.yaml"
    config.write_text(yaml.safe_dump({
        "homeserver": {"url": "http://127.0.0.1:9", "server_name": "localhost"},
        "appservice": {"address": "http://127.0.0.1:9", "as_token": "a" * 20, "hs_token": "h" * 20},
        "database": {"dsn": dsn},
    }))

    def runs(*args: str) -> str:
        out = subprocess.run([sys.executable, "-m", "appservice", "-c", str(config), "runs", *args], cwd=REPO,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout

    one = runs("--id", str(run_id)).splitlines()
    assert one[0].startswith(f"run {run_id} · helper · done (answered)")
    assert [line.split()[1] for line in one[1:]] == ["model_started", "model", "tool_call", "tool_result",
                                                     "model_started", "model", "answer"]
    assert "may cost up to $0.000400" in one[1]  # the scripted turn's cost, reserved before the call
    assert "tools: lookup" in one[2] and "in     12 out      3 $0.000400" in one[2]
    assert "sunny" in one[4]
    # A speech call paid for the run (a voice note heard, an answer said) is shown with it, after its steps.
    await db.of(VoiceTables).record_call(run_id, "transcription", 3.5, 0.00035)
    await db.of(VoiceTables).record_call(run_id, "speech", 12, 0.00018)
    spoken = runs("--id", str(run_id)).splitlines()
    assert spoken[1:-2] == one[1:]
    assert spoken[-2].split()[:5] == ["speech", "transcription", "3.5", "s", "heard"] and "$0.000350" in spoken[-2]
    assert spoken[-1].split()[:5] == ["speech", "speech", "12", "characters", "said"] and "$0.000180" in spoken[-1]
    both = runs("--bot", "helper")
    assert f"run {failed} · helper · failed (failed)" in both and "reason: The model is overloaded." in both
    assert runs("--bot", "nobody").strip() == "no runs"


async def test_a_refused_summons_is_recorded_and_shown(db: TestStore, dsn: str, published: Registry, tmp_path: Path) -> None:
    from engine.content.audience import AudienceFacts
    from engine.run.refusals import Refused
    from engine.run.summon import Summons, summon

    facts = AudienceFacts(user_id="@mallory:localhost", local_server="localhost")
    async with db.transaction("test") as tx:
        result = await summon(tx, published, Summons(
            bot="helper", surface="desk", prompt="hi", asked_by="@mallory:localhost", facts=facts,
            place="!r:localhost", trigger_event="$refused1"))
    assert isinstance(result, Refused) and result.reason == "not_on_surface"
    assert await db.pool.fetchval("SELECT count(*) FROM agent_runs") == 0
    config = tmp_path / "summon.yaml"
    config.write_text(yaml.safe_dump({
        "homeserver": {"url": "http://127.0.0.1:9", "server_name": "localhost"},
        "appservice": {"address": "http://127.0.0.1:9", "as_token": "a" * 20, "hs_token": "h" * 20},
        "database": {"dsn": dsn},
    }))
    out = subprocess.run([sys.executable, "-m", "appservice", "-c", str(config), "runs", "--room", "!r:localhost"],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "refused (no run was started):"
    assert "helper · not_on_surface · asked by @mallory:localhost in !r:localhost" in lines[1]
