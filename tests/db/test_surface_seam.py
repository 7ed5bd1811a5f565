"""The engine names no surface: a surface it has never heard of (the ``counter``, registered in
``tests/surfaces/seam.py``, outside ``engine/``, with a built-in tool and a string section of its own) takes a
summons through the one door in, a worker claims the run and steps it (its tool, then the model's answer),
and the answer is delivered to that surface signed with its own words — in a process where the service,
mautrix and nio are never imported. docs/adding-a-surface.md walks it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.db
REPO = Path(__file__).resolve().parents[2]


def test_a_surface_the_engine_never_heard_of_runs_a_bot_with_its_own_tool_and_words(dsn: str) -> None:
    done = subprocess.run([sys.executable, "-m", "tests.surfaces.seam", dsn], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["answer"] == "We open at nine.\n— clerk, at the counter"  # its own section's words
    assert seen["delivered_to"] == ["counter"]
    assert seen["steps"] == ["model_started", "model", "tool_call", "tool_result", "model_started", "model", "answer"]
    assert seen["tool_result"] == f"hours: 09:00-17:00 (run {seen['run']} on counter)"  # its own built-in, run
    assert len(seen["refused_elsewhere"]) == 1 and "'opening_hours' is not a tool" in seen["refused_elsewhere"][0]
    assert [on for _, on in seen["working"]] == [True, False]
    assert seen["matrix_modules"] == [], f"the engine pulled in the Matrix surface: {seen['matrix_modules']}"
