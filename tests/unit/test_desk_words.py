"""The desk says nothing in English of its own (issue 25 item 9): where the site's strings have no words for
something a contact reads, the desk says nothing rather than falling back to words written into its code — no
``words(...) or "…"`` in the desk's code a contact reaches, and no fallback words in the widget."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

DESK = Path(__file__).resolve().parents[2] / "appservice" / "desk"
# Every module of the desk: what reaches a contact or the staff.
CONTACTS = sorted(p.name for p in DESK.glob("*.py"))


def fallbacks(tree: ast.AST) -> list[int]:
    """The lines of ``x or "some words"``: a literal of words (letters and a space; a lone name like
    ``"assumed"`` is a value, not words), said when the strings have none."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            last = node.values[-1]
            literal = last.value if isinstance(last, ast.Constant) else None
            joined = isinstance(last, ast.JoinedStr) and any(
                isinstance(p, ast.Constant) and _words(str(p.value)) for p in last.values)
            if joined or (isinstance(literal, str) and _words(literal)):
                found.append(node.lineno)
    return found


def _words(text: str) -> bool:
    return " " in text and any(c.isalpha() for c in text)


@pytest.mark.parametrize("name", CONTACTS)
def test_the_desk_falls_back_to_no_words_of_its_own(name: str) -> None:
    assert fallbacks(ast.parse((DESK / name).read_text(encoding="utf-8"))) == []


def test_the_widget_says_only_the_sites_words() -> None:
    script = (DESK / "static" / "widget.js").read_text(encoding="utf-8")
    assert re.findall(r"""say\(\s*"\w+"\s*,\s*["'`]""", script) == []


def test_the_scan_finds_a_fallback() -> None:
    assert fallbacks(ast.parse('raise RequestRefused(429, self.words("too_fast") or "too many messages")')) == [1]
    assert fallbacks(ast.parse('x = name or f"contact {n}"\ny = a or b\nz = a or ""\nw = a or "assumed"')) == [1]
