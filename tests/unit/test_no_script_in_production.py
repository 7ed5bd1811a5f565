"""Test scripting stays out of production (issue 26 item 4): the stand-in model is an answerer chosen at the
root and handed its book by the tests and the demo, so no name in ``engine/`` or ``appservice/`` speaks of a
script — not a ``Summons`` field, a run row's column, an ``Answerer`` argument or a surface's reader of one —
except in the stand-in's own modules, named here. Words in prose (an HTML ``<script>`` tag, a transcript, a
description) are no names and are left alone."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

from engine.store.queries import SQL_DIR

REPO = Path(__file__).resolve().parents[2]
# The stand-in answerer and its book, and the demo's books: the only modules that may name a script.
STAND_IN = frozenset({"engine/providers/mock.py", "appservice/stand_in.py"})
# A name's words: split at underscores and at a lower-to-upper change (``MemberScript``), so ``transcript`` and
# ``description`` are not read as ``script``.
_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def scripting_names(source: str) -> list[tuple[int, str]]:
    """Every name in ``source`` with a word that begins ``script``, and every string naming the old content key."""
    found: list[tuple[int, str]] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.NAME and any(w.lower().startswith("script") for w in _WORDS.findall(tok.string)):
            found.append((tok.start[0], tok.string))
        elif tok.type == tokenize.STRING and "summon.script" in tok.string:
            found.append((tok.start[0], tok.string))
    return found


def test_the_rule_sees_a_script_however_it_is_named() -> None:
    names = [n for _, n in scripting_names(
        "script = 1\nparse_script()\nSCRIPT_KEY = 'org.summon.script'\nclass MemberScript: ...\nscripted = scripts\n")]
    assert names == ["script", "parse_script", "SCRIPT_KEY", "'org.summon.script'", "MemberScript", "scripted", "scripts"]
    assert scripting_names("transcript = description = descriptor = 1\nRAW = {'script'}  # a <script> tag\n") == []


def test_no_production_module_but_the_stand_ins_names_a_script() -> None:
    offending = []
    for root in ("engine", "appservice"):
        for path in sorted((REPO / root).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel in STAND_IN:
                continue
            offending += [f"{rel}:{line}: {name}" for line, name in scripting_names(path.read_text(encoding="utf-8"))]
    assert offending == [], "test scripting on a production path:\n" + "\n".join(offending)


def test_the_allow_list_names_modules_that_exist_and_need_it() -> None:
    for rel in STAND_IN:
        assert scripting_names((REPO / rel).read_text(encoding="utf-8")), f"{rel} names no script: take it off the list"


def test_no_run_row_carries_a_script() -> None:
    assert "agent_runs.script" not in (SQL_DIR / "schema.txt").read_text(encoding="utf-8")
    queries = "\n".join(p.read_text(encoding="utf-8") for p in sorted((SQL_DIR / "queries").rglob("*.sql")))
    assert not re.search(r"\bscript\b", queries)
