"""The engine knows no Matrix: a surface made of nothing but memory (``tests/surfaces/memory.py``) takes a
summons through the one door in, a worker claims the run and steps it (a tool, then the model's answer),
and the answer is delivered to that surface — in a process where the Matrix surface and mautrix are never
imported. This is the example the desk (and every surface after it) follows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.db
REPO = Path(__file__).resolve().parents[2]


def test_summon_claim_steps_and_answer_through_a_surface_that_knows_no_matrix(dsn: str) -> None:
    done = subprocess.run([sys.executable, "-m", "tests.surfaces.seam", dsn], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["answer"] == "We open at nine."
    assert seen["delivered_to"] == ["desk"]
    assert seen["steps"] == ["model_started", "model", "tool_call", "tool_result", "model_started", "model", "answer"]
    assert seen["tool_result"] == f"hours: 09:00-17:00 (run {seen['run']} on desk)"
    assert [on for _, on in seen["working"]] == [True, False]
    assert seen["matrix_modules"] == [], f"the engine pulled in the Matrix surface: {seen['matrix_modules']}"
