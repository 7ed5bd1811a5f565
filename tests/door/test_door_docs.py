"""docs/door.md's example runs as it is written, against the door (a grant given, as after the start route)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from tests.door.conftest import Harness
from tests.providers.fake_provider import openai_text

pytestmark = pytest.mark.db
DOC = Path(__file__).resolve().parents[2] / "docs" / "door.md"


def example() -> str:
    talking = DOC.read_text(encoding="utf-8").split("## Talking", 1)[1]
    found = re.search(r"```python\n(.*?)```", talking, re.DOTALL)
    assert found is not None, "docs/door.md has no python example under ## Talking"
    return found.group(1)


async def test_the_example_in_the_docs_runs(door: Harness, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    door.fake.queue("openai", openai_text("I am Caller."), openai_text("I answer questions. Briefly."))
    monkeypatch.setenv("SUMMON_DOOR_URL", door.url)
    monkeypatch.setenv("SUMMON_GRANT", door.grant())
    await asyncio.to_thread(exec, compile(example(), "docs/door.md", "exec"), {"__name__": "door_example"})
    printed = capsys.readouterr().out.splitlines()
    assert printed == ["['caller']", "I am Caller.", "I answer questions. Briefly."]
