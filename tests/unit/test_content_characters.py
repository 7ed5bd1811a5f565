"""A content file holding a character YAML refuses outright (a NUL, a control character) is refused like any
other bad front matter — ``path:line: message`` — never an exception out of the compiler (found by the
fuzz, tests/fuzz/test_fuzz_content.py)."""

from __future__ import annotations

import pytest

from appservice.kinds import KINDS
from engine.content import compile_sources


@pytest.mark.parametrize(("text", "line", "code"), [
    ("---\nname: B\nglyph: \x00\n---\nHello.\n", 3, "U+0000"),
    ("---\n\x00\n---\nHello.\n", 2, "U+0000"),
    ("---\nname: B\n\n\nfor: any\x1bone\n---\nHello.\n", 5, "U+001B"),
])
def test_a_character_yaml_refuses_is_an_error_at_its_line(text: str, line: int, code: str) -> None:
    result = compile_sources({"bots/b.md": text}, kinds=KINDS, server_name="example.org")
    assert isinstance(result, list)
    assert [(e.path, e.line) for e in result] == [("bots/b.md", line)]
    assert result[0].message == f"front matter holds a character YAML does not allow ({code})"
