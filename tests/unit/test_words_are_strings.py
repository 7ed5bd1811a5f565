"""Every word a person reads comes from the strings (the kit's defaults, the site's overrides): a scan of the
surfaces for text written into the code where a person reads it — an answer, a notice, a reply, a voice turn's
words, a desk message, a leave reason, a presence status. (Words for a developer — the door's protocol errors in
OpenAI's shape, log lines — are not a person's, and are not scanned.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SURFACES = Path(__file__).resolve().parents[2] / "appservice"
# What a person reads, by the call that carries it there: the positional argument, or the keyword.
SPEAKERS: dict[str, tuple[int | None, str | None]] = {
    "answer_content": (0, "text"), "notice": (0, None), "reply": (3, None), "run_content": (1, None),
    "edition_content": (0, None), "Said": (0, "text"), "insert_message": (None, "content"),
    "leave": (2, "reason"), "set_presence": (2, None), "words_of": (None, None),
}


def _worded(node: ast.AST) -> bool:
    """A literal with words in it (an f-string's literal parts count)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and any(ch.isalpha() for ch in node.value)
    if isinstance(node, ast.JoinedStr):
        return any(_worded(part) for part in node.values)
    return False


def _spoken(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if name not in SPEAKERS:
            continue
        position, keyword = SPEAKERS[name]
        said = [node.args[position]] if position is not None and position < len(node.args) else []
        said += [k.value for k in node.keywords if k.arg == keyword]
        found += [(node.lineno, name) for value in said if _worded(value)]
    return found


@pytest.mark.parametrize("path", sorted(SURFACES.rglob("*.py")), ids=lambda p: str(p.relative_to(SURFACES)))
def test_no_surface_writes_a_persons_words_into_its_code(path: Path) -> None:
    assert _spoken(ast.parse(path.read_text(encoding="utf-8"))) == []


def test_the_scan_finds_words_written_in() -> None:
    code = 'reply(tx, line, sender, "Too many messages.")\nanswer_content(f"Sorry {name}", thread_root=None)\n' \
           'answer_content(words, thread_root=None)\nhomeserver.leave(user, room, reason="Bye")\n'
    assert [name for _, name in _spoken(ast.parse(code))] == ["reply", "answer_content", "leave"]
