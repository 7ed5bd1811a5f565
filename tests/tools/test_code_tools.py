"""Code tools at run time (issue 6, item 5): a site's module run with the run (never a person) and the
model's arguments; a sync ``run`` in a thread; every failure a ``ToolError``; a changed file reloaded."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from engine.content import Registry
from engine.content.files import compile_content
from engine.content.parts import Tool
from engine.errors import ToolError
from engine.tools.base import RunRef
from engine.tools.code import CodeTools

RUN = RunRef(id=42, bot="clerk", surface="rooms", room_id="!r:example.org")


def tool(root: Path, module: str, name: str = "w") -> Tool:
    (root / "tools").mkdir(exist_ok=True)
    (root / "tools" / f"{name}.md").write_text(f"---\ndescription: It.\nmodule: tools/{name}.py\n---\n")
    (root / "tools" / f"{name}.py").write_text(module)
    registry = compile_content(root, server_name="example.org", kit=None, fetch_spec=None)
    assert isinstance(registry, Registry), registry
    return registry.tools[name]


async def test_an_async_run_gets_the_run_and_the_arguments(tmp_path: Path) -> None:
    weather = tool(tmp_path, "PARAMETERS = {'properties': {'city': {'type': 'string'}}, 'required': ['city']}\n"
                             "async def run(run, arguments):\n"
                             "    return f\"{run.bot} in {run.room_id} #{run.id}: sun in {arguments['city']}\"\n")
    out = await CodeTools(tmp_path).call(weather, RUN, {"city": "Oslo"})
    assert out == "clerk in !r:example.org #42: sun in Oslo"


async def test_a_sync_run_runs_in_a_thread(tmp_path: Path) -> None:
    where = tool(tmp_path, "import threading\ndef run(run, arguments):\n    return threading.current_thread().name\n")
    assert await CodeTools(tmp_path).call(where, RUN, {}) != threading.current_thread().name


@pytest.mark.parametrize(
    ("module", "arguments", "said"),
    [
        ("from engine.tools.base import ToolError\n"
         "def run(run, arguments):\n    raise ToolError('no city called Atlantis; ask which city they mean')\n",
         {}, "no city called Atlantis; ask which city they mean"),
        ("def run(run, arguments):\n    return {}['x']\n", {},
         "w failed (KeyError: 'x'); tell the person it did not work"),
        ("def run(run, arguments):\n    return 42\n", {}, "w is broken: it returned int, not text"),
        ("PARAMETERS = {'properties': {'city': {}}, 'required': ['city']}\ndef run(run, arguments):\n    return ''\n",
         {}, "w needs city (it takes: city)"),
        ("PARAMETERS = {'properties': {'city': {}}, 'additionalProperties': False}\n"
         "def run(run, arguments):\n    return ''\n", {"user": "@a:b"}, "w takes no user (it takes: city)"),
        ("import asyncio\nasync def run(run, arguments):\n    await asyncio.sleep(5)\n    return ''\n", {},
         "w did not finish within 0.2s; try again later"),
        # A tool that exits (argparse on bad input, sys.exit) is contained: asyncio would otherwise let
        # SystemExit out of the event loop and stop the whole service.
        ("import sys\ndef run(run, arguments):\n    sys.exit(2)\n", {},
         "w failed (it tried to exit); tell the person it did not work"),
        ("async def run(run, arguments):\n    raise SystemExit(1)\n", {},
         "w failed (it tried to exit); tell the person it did not work"),
        ("def run(run, arguments):\n    raise KeyboardInterrupt\n", {},
         "w failed (it tried to exit); tell the person it did not work"),
    ],
    ids=["tool-error-passes-through", "exception", "not-text", "missing-argument", "unknown-argument", "timeout",
         "sys-exit-sync", "system-exit-async", "keyboard-interrupt"],
)
async def test_failures_are_tool_errors(tmp_path: Path, module: str, arguments: dict[str, object], said: str) -> None:
    broken = tool(tmp_path, module)
    with pytest.raises(ToolError) as failed:
        await CodeTools(tmp_path, timeout=0.2).call(broken, RUN, arguments)
    assert str(failed.value) == said


async def test_a_changed_module_is_loaded_again_and_a_broken_one_says_so(tmp_path: Path) -> None:
    counter = tool(tmp_path, "def run(run, arguments):\n    return 'one'\n")
    tools = CodeTools(tmp_path)
    assert await tools.call(counter, RUN, {}) == "one"
    file = tmp_path / "tools" / "w.py"
    file.write_text("def run(run, arguments):\n    return 'two!'\n")
    os.utime(file, ns=(file.stat().st_mtime_ns + 10**9,) * 2)
    assert await tools.call(counter, RUN, {}) == "two!"
    file.write_text("def run(run, arguments):\n    return 'three'\nimport nope_not_here\n")
    with pytest.raises(ToolError, match=r"w is broken: tools/w.py does not load \(ModuleNotFoundError at its line 3"):
        await tools.call(counter, RUN, {})
    file.unlink()
    with pytest.raises(ToolError, match=r"w is broken: its module tools/w\.py is not there"):
        await tools.call(counter, RUN, {})
