"""docs/content.md cannot drift: its examples compile together, and every key the models accept is in
its tables."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from appservice.kinds import KINDS
from engine.content import BotFile, CommandFile, Registry, SkillFile, ToolFile, compile_sources
from engine.content.files import read_kit
from engine.content.parts import BUILTIN_TOOLS, Arg
from engine.content.strings import CATALOGUE

DOC = Path(__file__).resolve().parents[2] / "docs" / "content.md"
TEXT = DOC.read_text(encoding="utf-8")
BLOCK = re.compile(r"^```(\w+) file=(\S+)\n(.*?)^```$", re.M | re.S)


def examples() -> dict[str, str]:
    return {path: body for _, path, body in BLOCK.findall(TEXT)}


def test_every_example_compiles_together() -> None:
    found = examples()
    assert {"bots/scribe.md", "bots/support.md", "skills/note-taking.md", "tools/pets.md", "commands/minutes.md",
            "strings.md"} <= set(found)
    sources = {path: text for path, text in found.items() if path.endswith(".md")}
    referenced = {path: text for path, text in found.items() if not path.endswith(".md")}
    registry = compile_sources(sources, kinds=KINDS, server_name="example.org", kit=read_kit(), referenced=referenced)
    assert isinstance(registry, Registry), "\n".join(map(str, registry))
    scribe = registry.bots["scribe"]
    # The example shows every key a bot file may have (extends: in bots/support.md).
    assert set(BotFile.model_fields) - {"extends"} <= scribe.file.model_fields_set  # type: ignore[union-attr]
    assert registry.bots["support"].extends == "desk"
    assert {a.kind for a in registry.commands["minutes"].args} == {"span", "choice", "person", "boolean", "number", "text"}


@pytest.mark.parametrize(
    ("model", "section"),
    [(BotFile, "## Bots"), (SkillFile, "## Skills"), (ToolFile, "## Tools"), (CommandFile, "## Commands")],
)
def test_every_key_is_in_its_table(model: type[BotFile], section: str) -> None:
    part = TEXT.split(section, 1)[1].split("\n## ", 1)[0]
    for name, info in model.model_fields.items():
        key = info.alias or name
        assert f"| `{key}` |" in part, f"{key} is not documented under {section}"


def test_the_rest_is_named_too() -> None:
    for name in BUILTIN_TOOLS:
        assert f"`{name}`" in TEXT
    for name in Arg.model_fields:
        assert f"`{name}`" in TEXT
    for section, keys in CATALOGUE.items():
        line = next(line for line in TEXT.splitlines() if line.startswith(f"| `### {section}` |"))
        for key in keys:
            assert f"`{key}`" in line


def test_every_built_in_tool_and_each_of_its_arguments_is_in_the_reference() -> None:
    # A newcomer scripting the stand-in should not need the code: the table names each built-in's arguments.
    from engine.tools.base import BUILTIN_SPECS

    rows = {line.split("|")[1].strip(): line for line in TEXT.splitlines() if line.startswith("| `")}
    for name, spec in BUILTIN_SPECS.items():
        row = rows.get(f"`{name}`")
        assert row is not None, f"{name} has no row in docs/content.md's built-in table"
        for argument in (spec.parameters or {}).get("properties", {}):
            assert f'"{argument}"' in row, f"{name}'s argument {argument} is not in its row"
