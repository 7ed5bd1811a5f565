"""Code tools at run time (issue 6, item 5; issue 12, item 6): a site's module run with the run (never a person)
and the model's arguments, in a process of its own (so a sync ``run`` never holds up the loop); every failure a
``ToolError``; a changed file is what runs next. That process is handed none of the service's environment, is
limited in processor time, memory and file size, and is killed — with all it started — at its timeout; the
service itself never imports a site's module, not even to check it at compile time."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path

import pytest

import engine.errors
from appservice.kinds import KINDS
from engine.content import Registry
from engine.content.files import compile_content
from engine.content.parts import Tool
from engine.errors import ToolError
from engine.sandbox import jail
from engine.sandbox.box import CodeLimits, Sandbox
from engine.tools.base import RunRef
from engine.tools.code import CodeTools
from tests.support import eventually

RUN = RunRef(id=42, bot="clerk", surface="rooms", place="!r:example.org")


def tool(root: Path, module: str, name: str = "w") -> Tool:
    (root / "tools").mkdir(exist_ok=True)
    (root / "tools" / f"{name}.md").write_text(f"---\ndescription: It.\nmodule: tools/{name}.py\n---\n")
    (root / "tools" / f"{name}.py").write_text(module)
    registry = compile_content(root, kinds=KINDS, server_name="example.org", kit=None, fetch_spec=None)
    assert isinstance(registry, Registry), registry
    return registry.tools[name]


async def test_an_async_run_gets_the_run_and_the_arguments(tmp_path: Path) -> None:
    weather = tool(tmp_path, "PARAMETERS = {'properties': {'city': {'type': 'string'}}, 'required': ['city']}\n"
                             "async def run(run, arguments):\n"
                             "    return f\"{run.bot} in {run.place} #{run.id}: sun in {arguments['city']}\"\n")
    out = await CodeTools(tmp_path).call(weather, RUN, {"city": "Oslo"})
    assert out == "clerk in !r:example.org #42: sun in Oslo"


async def test_a_sync_run_runs_out_of_the_service(tmp_path: Path) -> None:
    """It used to be a worker thread of this process; now it is a process of its own (changed on purpose,
    issue 12 item 6): either way it cannot hold up the event loop."""
    where = tool(tmp_path, "import os\ndef run(run, arguments):\n    return str(os.getpid())\n")
    assert await CodeTools(tmp_path).call(where, RUN, {}) != str(os.getpid())


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


# --- out of the service's process (issue 12, item 6) ---------------------------------------------------------


async def test_it_is_handed_none_of_the_services_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUMMON_DATABASE_DSN", "postgresql://summon:hunter2@db/summon")
    monkeypatch.setenv("SUMMON_PROVIDER_OPENAI_KEY", "sk-live-hunter2")
    monkeypatch.setenv("WEATHER_API_KEY", "wk-123")
    nosy = tool(tmp_path, "import json, os\ndef run(run, arguments):\n    return json.dumps(dict(os.environ))\n")
    seen = json.loads(await CodeTools(tmp_path).call(nosy, RUN, {}))
    assert "hunter2" not in json.dumps(seen)
    assert set(seen) <= {"PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "LC_CTYPE", "PWD"}
    # Only what the operator names (tools.code.env) is handed on.
    given = json.loads(await CodeTools(tmp_path, sandbox=Sandbox(env=("WEATHER_API_KEY",), given=os.environ)).call(nosy, RUN, {}))
    assert given["WEATHER_API_KEY"] == "wk-123" and "SUMMON_DATABASE_DSN" not in given


async def test_the_service_never_runs_site_code_itself(tmp_path: Path) -> None:
    """Not to call it, and not to check it at compile time (the content watcher compiles on every change): its
    top level marks the engine it imported, and the service's own engine is never marked."""
    loud = tool(tmp_path, "import engine.errors\nengine.errors.SITE_CODE_RAN = True\n"
                          "def run(run, arguments):\n    return str(getattr(engine.errors, 'SITE_CODE_RAN', False))\n")
    assert await CodeTools(tmp_path).call(loud, RUN, {}) == "True"  # it ran, and its top level did too
    assert not hasattr(engine.errors, "SITE_CODE_RAN")  # …neither in this process: not the check, not the call
    assert not [name for name in sys.modules if name.startswith(("summon_tool_", "summon_check_"))]


async def test_a_tool_that_overruns_is_killed_with_all_it_started(tmp_path: Path) -> None:
    """Even what it started in a session of its own (``setsid``), which a process-group kill missed: the jail's
    pid namespace dies with it."""
    marker = f"61.{uuid.uuid4().int % 10**9}"
    # The escapee lets go of its pipes too, as one that means to outlive its tool does.
    stuck = tool(tmp_path, "import subprocess, time\n"
                           "def run(run, arguments):\n"
                           f"    subprocess.Popen(['setsid', 'sleep', '{marker}'], stdin=subprocess.DEVNULL,\n"
                           "                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
                           f"    subprocess.Popen(['sleep', '{marker}'])\n"
                           "    while True:\n"
                           "        time.sleep(0.05)\n")
    call = asyncio.ensure_future(CodeTools(tmp_path, timeout=1.5).call(stuck, RUN, {}))
    await eventually(lambda: len(running_with(marker)) == 2, timeout=10)  # both started, seen from out here
    with pytest.raises(ToolError, match=r"w did not finish within 1.5s; try again later"):
        await call
    assert running_with(marker) == []
    assert jailed() == []  # not the tool's own process either: nothing of the jail's uid is left


def running_with(argument: str) -> list[int]:
    """The processes on this machine (seen from outside any jail) with ``argument`` on their command line."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argument.encode() in argv and _running(int(entry.name)):
                found.append(int(entry.name))
    return found


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def jailed() -> list[int]:
    """The processes on this machine running as one of the uids the jail gives a call when the service is root."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                uid = entry.stat().st_uid
            except OSError:
                continue
            if jail.FIRST_UID <= uid < jail.FIRST_UID + jail.UIDS and _running(int(entry.name)):
                found.append(int(entry.name))
    return found


async def test_memory_past_its_limit_fails_the_tool(tmp_path: Path) -> None:
    greedy = tool(tmp_path, "def run(run, arguments):\n    block = bytearray(2 * 1024 ** 3)\n    return 'took 2 GiB'\n")
    small = Sandbox(CodeLimits(memory_bytes=512 * 1024 ** 2))
    with pytest.raises(ToolError, match=r"^w failed \(MemoryError"):
        await CodeTools(tmp_path, sandbox=small).call(greedy, RUN, {})


async def test_processor_time_past_its_limit_stops_the_tool(tmp_path: Path) -> None:
    spinning = tool(tmp_path, "import time\ndef run(run, arguments):\n    end = time.monotonic() + 20\n"
                              "    while time.monotonic() < end:\n        pass\n    return 'spun'\n")
    frugal = Sandbox(CodeLimits(seconds=30, cpu_seconds=1))
    with pytest.raises(ToolError, match=r"w was stopped \(it used more than 1s of processor time\)"):
        await CodeTools(tmp_path, sandbox=frugal).call(spinning, RUN, {})


async def test_a_tool_cannot_forge_its_answer_by_printing(tmp_path: Path) -> None:
    forger = tool(tmp_path, "import json\nprint(json.dumps({'loaded': True}))\n"
                            "def run(run, arguments):\n    print(json.dumps({'result': 'forged'}))\n    return 'real'\n")
    assert await CodeTools(tmp_path).call(forger, RUN, {}) == "real"


def test_a_module_that_hangs_at_its_import_fails_the_compile(tmp_path: Path) -> None:
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "w.md").write_text("---\ndescription: It.\nmodule: tools/w.py\n---\n")
    (tmp_path / "tools" / "w.py").write_text("import time\ntime.sleep(60)\ndef run(run, arguments):\n    return ''\n")
    errors = compile_content(tmp_path, kinds=KINDS, server_name="example.org", kit=None, fetch_spec=None,
                             sandbox=Sandbox(CodeLimits(load_seconds=1)))
    assert [str(e) for e in errors] == [  # type: ignore[union-attr]
        "tools/w.md:3: module: tools/w.py does not load: it did not load within 1s"]
