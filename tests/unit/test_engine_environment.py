"""The engine reads no environment: the providers, the buying switch, the speech endpoints and the variables a
code tool is handed are read at the root (``appservice.config``) and handed in as typed settings, so the engine
runs the same whatever process it is in. Checked on the source with ``ast``: ``os.environ`` (or ``environb``),
``os.getenv``, under any name ``os`` is imported as, and ``from os import environ``, anywhere in a module; and
no variable of summon's looked up by its name in a mapping handed in (``env.get("SUMMON_PROVIDERS")``,
``env["AGENTS_LIVE"]``): parsing the environment is the root's, even from a copy of it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENGINE_MODULES = sorted((ROOT / "engine").rglob("*.py"))
READERS = frozenset({"environ", "environb", "getenv", "getenvb"})
VARIABLE = re.compile(r"^(?:SUMMON|AGENTS)_[A-Z0-9_]+$")  # one of summon's variables, named whole


def _names_a_variable(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and bool(VARIABLE.match(node.value))


def environment_reads(source: str) -> list[int]:
    """The lines of ``source`` that read the process's environment."""
    tree = ast.parse(source)
    names_for_os = {"os"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names_for_os.update(alias.asname or alias.name for alias in node.names if alias.name == "os")
    found: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "os" and any(a.name in READERS for a in node.names):
            found.append(node.lineno)
        elif (isinstance(node, ast.Attribute) and node.attr in READERS and isinstance(node.value, ast.Name)
              and node.value.id in names_for_os):
            found.append(node.lineno)
        elif isinstance(node, ast.Call) and node.args and _names_a_variable(node.args[0]):
            found.append(node.lineno)  # env.get("SUMMON_X"), or a helper's get("SUMMON_X")
        elif isinstance(node, ast.Subscript) and _names_a_variable(node.slice):
            found.append(node.lineno)
    return sorted(found)


@pytest.mark.parametrize(("source", "lines"), [
    ("import os\nkey = os.environ['K']\n", [2]),
    ("import os\nkey = os.getenv('K')\n", [2]),
    ("import os as o\ndef f():\n    return o.environ.get('K')\n", [3]),
    ("from os import environ\n", [1]),
    ("from os import getenv as g\n", [1]),
    ("import os\nos.environb\n", [2]),
    ("import os\npath = os.path.join('a', 'b')\nenv = {'PATH': '/bin'}\n", []),
    ("def environment(given):\n    return given.environ\n", []),
    ("def f(env):\n    return env.get('SUMMON_PROVIDERS', '')\n", [2]),
    ("def f(env):\n    return env['AGENTS_LIVE']\n", [2]),
    ("log.info('choose the stand-in with SUMMON_AGENT_MOCK=1')\nraise E(f'SUMMON_PRICES: {p}')\n", []),
])
def test_the_check_catches_what_it_should(source: str, lines: list[int]) -> None:
    assert environment_reads(source) == lines


def test_the_engine_is_checked() -> None:
    checked = {p.relative_to(ROOT).as_posix() for p in ENGINE_MODULES}
    assert {"engine/sandbox/box.py", "engine/providers/config.py", "engine/memory/embedder.py"} <= checked


@pytest.mark.parametrize("module", ENGINE_MODULES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_engine_reads_no_environment(module: Path) -> None:
    lines = environment_reads(module.read_text(encoding="utf-8"))
    assert lines == [], f"{module.name} reads the environment (lines {lines}): take it from the root instead"
