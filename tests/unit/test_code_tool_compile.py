"""Code tools at compile time (issue 6, item 5): the module a tool names is read (``run``, ``PARAMETERS``)
and imported, and a module that will not serve fails the compile as ``path:line: message`` naming it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from appservice.kinds import KINDS
from engine.content import Registry, compile_sources
from engine.content.files import compile_content

SERVER = "example.org"
TOOL = "---\ndescription: The weather in a city.\nmodule: tools/w.py\n---\n"
PREFIX = "tools/w.md:3: module: tools/w.py does not load: "


def compile_on_disk(tmp_path: Path, module: str, tool: str = TOOL) -> Registry | list[str]:
    (tmp_path / "tools").mkdir(exist_ok=True)
    (tmp_path / "tools" / "w.md").write_text(tool, encoding="utf-8")
    (tmp_path / "tools" / "w.py").write_text(module, encoding="utf-8")
    compiled = compile_content(tmp_path, kinds=KINDS, server_name=SERVER, kit=None, fetch_spec=None)
    return compiled if isinstance(compiled, Registry) else [str(e) for e in compiled]


REFUSALS = [
    pytest.param("def run(run, arguments)\n    return 'x'\n", "SyntaxError at its line 1: expected ':'", id="syntax"),
    pytest.param("def helper(run, arguments):\n    return 'x'\n",
                 "it defines no run function (run(run, arguments) -> str)", id="no-run"),
    pytest.param("async def run(arguments):\n    return 'x'\n",
                 "its run (its line 1) must take two arguments: run(run, arguments) -> str", id="one-argument"),
    pytest.param("def run(run, arguments, extra):\n    return 'x'\n",
                 "its run (its line 1) must take two arguments: run(run, arguments) -> str", id="three-arguments"),
    pytest.param("import os\nimport nope_not_a_module_here\n\ndef run(run, arguments):\n    return 'x'\n",
                 "ModuleNotFoundError at its line 2: No module named 'nope_not_a_module_here'", id="import-error"),
    pytest.param("RATE = 1 / 0\n\ndef run(run, arguments):\n    return 'x'\n",
                 "ZeroDivisionError at its line 1: division by zero", id="raises-at-import"),
    pytest.param("import sys\nsys.exit(3)\ndef run(run, arguments):\n    return 'x'\n",
                 "SystemExit at its line 2: 3", id="exits-at-import"),
    pytest.param("run = 42\n", "it defines no run function (run(run, arguments) -> str)", id="run-not-callable"),
    pytest.param("run = lambda arguments: 'x'\n",
                 "its run must take two arguments: run(run, arguments) -> str", id="run-lambda-wrong-arity"),
    pytest.param("FIELDS = {}\nPARAMETERS = dict(FIELDS)\ndef run(run, arguments):\n    return 'x'\n",
                 "PARAMETERS (its line 2) is not written out as a literal dict (the compile reads it unrun)",
                 id="parameters-not-literal"),
    pytest.param("PARAMETERS = {'type': 'array'}\ndef run(run, arguments):\n    return 'x'\n",
                 "PARAMETERS (its line 1) is not a JSON Schema object like"
                 " {'type': 'object', 'properties': {'city': {'type': 'string'}}}", id="parameters-not-an-object"),
]


@pytest.mark.parametrize(("module", "why"), REFUSALS)
def test_a_bad_module_fails_the_compile_naming_it(tmp_path: Path, module: str, why: str) -> None:
    assert compile_on_disk(tmp_path, module) == [PREFIX + why]


def test_a_good_module_compiles_and_is_not_left_imported(tmp_path: Path) -> None:
    module = (
        "from dataclasses import dataclass\n\n@dataclass\nclass City:\n    name: str\n\n"
        "PARAMETERS = {'properties': {'city': {'type': 'string'}}, 'required': ['city']}\n\n"
        "async def run(run, arguments, *, units='metric'):\n    return City(arguments['city']).name\n"
    )
    registry = compile_on_disk(tmp_path, module)
    assert isinstance(registry, Registry)
    tool = registry.tools["w"]
    assert tool.kind == "module" and tool.parameters == {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    assert not [name for name in sys.modules if name.startswith("summon_check_")]


def test_words_come_from_the_file_or_runs_docstring(tmp_path: Path) -> None:
    bare = "---\nmodule: tools/w.py\n---\n"
    documented = compile_on_disk(tmp_path, 'def run(run, arguments):\n    """Today\'s weather."""\n', bare)
    assert isinstance(documented, Registry) and documented.tools["w"].doc == "Today's weather."
    assert compile_on_disk(tmp_path, "def run(run, arguments):\n    return ''\n", bare) == [
        "tools/w.md:2: a code tool needs words a model reads to decide to use it: description: here, or a"
        " docstring on run in tools/w.py"
    ]


def test_the_pure_compile_reads_the_module_without_running_it() -> None:
    """Handed the text (as a test or ``summon check`` without a disk would), the compile still refuses
    what it can see; only the import is the reader's."""
    compiled = compile_sources({"tools/w.md": TOOL}, kinds=KINDS, server_name=SERVER,
                               referenced={"tools/w.py": "raise SystemExit\ndef run(run, arguments): ...\n"})
    assert isinstance(compiled, Registry)
    refused = compile_sources({"tools/w.md": TOOL}, kinds=KINDS, server_name=SERVER, referenced={"tools/w.py": "def run(:\n"})
    assert isinstance(refused, list) and str(refused[0]).startswith(PREFIX + "SyntaxError at its line 1")


def test_a_module_the_text_refuses_is_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    module = f"open({str(marker)!r}, 'w').close()\nPARAMETERS = dict()\ndef run(run, arguments): ...\n"
    assert compile_on_disk(tmp_path, module) == [
        PREFIX + "PARAMETERS (its line 2) is not written out as a literal dict (the compile reads it unrun)"]
    assert not marker.exists()
