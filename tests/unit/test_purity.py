"""The pure core does no I/O and keeps no clock of its own (``now`` is handed in), and the engine never
reaches into the appservice. Checked on the source with ``ast``, so an import anywhere — even inside
a function — counts. (engine/content/ has its own purity test in test_content.py.)"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "engine"

FORBIDDEN = frozenset({
    "os", "pathlib", "io", "socket", "asyncio", "aiohttp", "asyncpg", "httpx", "mautrix", "openai",
    "anthropic", "frontmatter", "subprocess", "time",
})

# The pure core is every module under engine/core/, and these beside it (the commands' parsing and words and
# the house's schedule read the content's shapes, so they live in engine/content/: core < content).
PURE_BESIDE = ("providers/translate.py", "providers/worst.py", "tools/base.py", "tools/ref.py", "tools/schemas.py",
               "tools/fenced.py", "content/commands.py", "content/command_words.py", "content/schedule.py",
               "run/refusals.py", "content/kinds.py")
# Pure halves of a surface, held to the same rule (member bots' charter, its sealing and its card).
PURE_SURFACES = ("appservice/members/charter.py", "appservice/members/seal.py", "appservice/members/card.py",
                 "appservice/keys.py")
PURE_NOW = ("core/loop.py", "core/messages.py", "core/prompt.py", "core/choices.py", "content/schedule.py",
            "core/limits.py", "core/turns.py", "core/chunk.py", *PURE_BESIDE, *PURE_SURFACES)
PURE = sorted((ENGINE / "core").rglob("*.py")) + [ENGINE / name for name in PURE_BESIDE] + [
    ROOT / name for name in PURE_SURFACES]


def _named(path: Path) -> str:
    return path.relative_to(ENGINE if path.is_relative_to(ENGINE) else ROOT).as_posix()


def imported_modules(source: str) -> set[str]:
    """Every absolute module a source imports, in full (``a.b`` for ``from a.b import c``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "__import__"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value)
    return found


def forbidden_in(source: str) -> set[str]:
    return {name for name in imported_modules(source) if name.split(".")[0] in FORBIDDEN}


def test_the_check_catches_what_it_should() -> None:
    source = (
        "import os.path\n"
        "from time import monotonic\n"
        "import asyncio as aio\n"
        "def f():\n"
        "    import socket\n"
        "    return __import__('subprocess')\n"
        "from datetime import time, datetime\n"
        "from engine.core.messages import Step\n"
        "from . import sibling\n"
    )
    assert forbidden_in(source) == {"os.path", "time", "asyncio", "socket", "subprocess"}


def test_the_core_modules_are_checked() -> None:
    checked = {_named(p) for p in PURE}
    assert set(PURE_NOW) <= checked
    for path in PURE:
        assert path.is_file(), f"{path} is listed as pure but is missing"


@pytest.mark.parametrize("module", PURE, ids=_named)
def test_core_is_pure(module: Path) -> None:
    source = module.read_text(encoding="utf-8")
    assert forbidden_in(source) == set(), f"{module.name} does I/O or keeps a clock"
    tree = ast.parse(source)
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert "open" not in called, f"{module.name} opens files"
    assert "print" not in called, f"{module.name} prints"


ENGINE_MODULES = sorted(ENGINE.rglob("*.py"))


def test_the_engine_has_modules() -> None:
    assert ENGINE / "core" / "loop.py" in ENGINE_MODULES
    assert ENGINE / "content" / "compile.py" in ENGINE_MODULES


@pytest.mark.parametrize("module", ENGINE_MODULES, ids=lambda p: p.relative_to(ENGINE).as_posix())
def test_the_engine_does_not_import_the_appservice(module: Path) -> None:
    imported = imported_modules(module.read_text(encoding="utf-8"))
    assert {name for name in imported if name.split(".")[0] == "appservice"} == set()


# --- the engine knows no Matrix -------------------------------------------------------------------------

# Matrix's event types and fields, its proposals, its links, and a branch on which surface a run is on:
# what a surface knows, never the engine (it would run a Slack surface unchanged).
MATRIX = re.compile(
    r"\bm\.(?:room|mentions|relates_to|reaction|notice|thread|bot|poll|annotation|replace|in_reply_to)\b"
    r"|\bMSC ?\d{3,5}\b|\borg\.matrix\.|matrix\.to\b"
    r"|\bsurface\s*[!=]=\s*[\"']|[\"']\w*[\"']\s*[!=]=\s*[\w.]*surface\b"
    r"|[!=]=\s*[\"'](?:rooms|desk|voice|door)[\"']|[\"'](?:rooms|desk|voice|door)[\"']\s*[!=]=",
    re.IGNORECASE,
)


@pytest.mark.parametrize("line", [
    'if event["type"] == "m.room.member":', "mentions = content['m.mentions']", "# MSC4332 state",
    "see https://matrix.to/#/@a:b", 'if s.surface == "rooms":', 'if "rooms" == where:', "org.matrix.msc3381.poll",
    "if run.surface != 'desk':", 'if "desk" == run.surface:',
])
def test_the_matrix_check_catches(line: str) -> None:
    assert MATRIX.search(line)


@pytest.mark.parametrize("line", [
    'surfaces: [rooms, desk]', 'if "rooms" in bot.surfaces:', "the room's settings", "summon.run",
    "if run.surface != tool.needs:",
])
def test_the_matrix_check_lets_the_rest_be(line: str) -> None:
    assert not MATRIX.search(line)


@pytest.mark.parametrize("module", ENGINE_MODULES, ids=lambda p: p.relative_to(ENGINE).as_posix())
def test_the_engine_knows_no_matrix(module: Path) -> None:
    source = module.read_text(encoding="utf-8")
    found = [f"{n}: {line.strip()}" for n, line in enumerate(source.splitlines(), 1) if MATRIX.search(line)]
    assert found == [], f"Matrix under engine/ (a surface's to know): {found}"
    assert {name for name in imported_modules(source) if name.split(".")[0] in ("mautrix", "nio")} == set()


# --- one clock --------------------------------------------------------------------------------------------

CODE = sorted(p for top in ("engine", "appservice") for p in (ROOT / top).rglob("*.py"))
CLOCK = ENGINE / "clock.py"


@pytest.mark.parametrize("module", CODE, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_nothing_sleeps_or_times_a_wait_outside_the_clock(module: Path) -> None:
    if module == CLOCK:
        return
    source = module.read_text(encoding="utf-8")
    tree = ast.parse(source)
    timed = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "sleep":
            if isinstance(node.func.value, ast.Name) and node.func.value.id in ("asyncio", "time"):
                timed.append(node.lineno)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "wait_for"
                and node.args and isinstance(node.args[0], ast.Call) and isinstance(node.args[0].func, ast.Attribute)
                and node.args[0].func.attr == "wait"):
            timed.append(node.lineno)  # asyncio.wait_for(event.wait(), …): a timed pause; Clock.wait it is
    assert timed == [], f"{module.name} lines {timed}: wait through the Clock (engine/clock.py)"
