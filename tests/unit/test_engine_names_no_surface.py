"""The engine names no surface (the seam issue): no surface's name — ``rooms``, ``desk``, ``voice``, ``members``
— and no Matrix concept — ``room_id``, ``thread_root``, ``power_levels``, ``mxc://`` — in the engine's code (its
names and its string literals; prose in docstrings and comments may explain where things come from). What a
surface brings is registered with the engine (``engine/content/kinds.py``; docs/adding-a-surface.md).

There is no allowance: a run's place is kept in the engine's own columns (``place``, ``thread``; migration 0075),
so any engine file naming one of these fails."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "engine"
NAMED = re.compile(r"\b(rooms|desk|voice|members|room_id|thread_root|power_levels)\b|mxc://")


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def names_in(source: str) -> list[str]:
    """Every surface name or Matrix concept in the code's names and string literals (docstrings aside)."""
    prose = _docstring_lines(ast.parse(source))
    found: list[str] = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.NAME or (token.type == tokenize.STRING and token.start[0] not in prose):
            found.extend(match.group(0) for match in NAMED.finditer(token.string))
    return found


def test_the_check_sees_names_and_literals_but_not_prose() -> None:
    code = '"""Rooms, the desk and voice are explained here."""\n# members, in a comment\n' \
           'def f(room_id: str) -> str:\n    return "desk"\n'
    assert names_in(code) == ["room_id", "desk"]
    assert names_in('x = "mxc://server/media"\nrooms_taken = 1\n') == ["mxc://"]
    assert names_in('place = record["room_id"]\nthread = record["thread_root"]\n') == ["room_id", "thread_root"]


def test_no_engine_file_names_a_surface() -> None:
    counts = {path.relative_to(ENGINE).as_posix(): names_in(path.read_text(encoding="utf-8"))
              for path in sorted(ENGINE.rglob("*.py"))}
    assert len(counts) > 50  # the whole engine was read
    named = {path: found for path, found in counts.items() if found}
    assert not named, f"engine files naming a surface (register it instead: docs/adding-a-surface.md): {named}"
