"""One refusal wording (issue 26 item 6): what a refused summons is told is one pure function in the engine
(``engine.run.refusals.refusal_words``, from the site's ``### refusals``), and every surface that tells a person
of a refusal — Matrix rooms, the desk, the door — says it through that function, never words of its own."""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path

import pytest

from appservice.kinds import KINDS
from engine.content.strings import Strings, parse_strings
from engine.core.limits import Breach
from engine.run.refusals import TOLD, Refused, refusal_words

ROOT = Path(__file__).resolve().parents[2]
KIT_STRINGS = ROOT / "engine" / "content" / "kit" / "strings.md"
THE_ONE = ROOT / "engine" / "run" / "refusals.py"
# Where each surface tells a person a summons was refused.
TELLERS = ("appservice/matrix/asking/asking.py", "appservice/desk/asking.py", "appservice/door/replies.py")
CODE = sorted(p for top in ("engine", "appservice") for p in (ROOT / top).rglob("*.py"))


def kit() -> Strings:
    strings = parse_strings(str(KIT_STRINGS), KIT_STRINGS.read_text(encoding="utf-8"), KINDS.sections)
    assert isinstance(strings, Strings)
    return strings


AT = datetime(2026, 3, 4, 5, 6, tzinfo=UTC)


@pytest.mark.parametrize(("refused", "said"), [
    (Refused("ceiling", breach=Breach("day", 1.0, 1.0, AT)),
     "You have used what Clerk may spend on you this day. You can ask again after 2026-03-04 05:06 UTC."),
    (Refused("too_many", live=3), "You already have 3 questions waiting for an answer. Ask Clerk again once one of "
                                  "them\nis answered."),
    (Refused("budget", breach=Breach("day", 5.0, 5.0, AT)),
     "Clerk cannot take more questions for now: this service has spent what it may in a day. You\ncan ask again "
     "after 2026-03-04 05:06 UTC."),
    (Refused("queue_full", waiting=4), "Clerk is busy right now — 4 questions are already waiting for it. Please try "
                                       "again\nin a minute."),
    # Waiting would not help (this one run alone is over): no time to offer, so nothing is said.
    (Refused("ceiling", breach=Breach("run", 1.0, 0.0, None)), None),
    (Refused("budget"), None),
])
def test_the_words_for_each_refusal_a_person_is_told(refused: Refused, said: str | None) -> None:
    assert refused.reason in TOLD
    assert refusal_words(refused, kit(), "Clerk") == said


def test_a_refusal_the_site_has_no_words_for_says_nothing() -> None:
    assert refusal_words(Refused("queue_full", waiting=4), Strings(sections={"refusals": {}}), "Clerk") is None


def _reads_the_refusal_words(tree: ast.AST) -> list[int]:
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and n.args
            and isinstance(n.args[0], ast.Constant) and n.args[0].value == "refusals"]


@pytest.mark.parametrize("module", CODE, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_only_the_one_function_reads_the_refusal_words(module: Path) -> None:
    if module == THE_ONE:
        return
    lines = _reads_the_refusal_words(ast.parse(module.read_text(encoding="utf-8")))
    assert lines == [], f"{module.name} lines {lines}: say a refusal through engine.run.refusals.refusal_words"


def test_the_check_sees_the_one_function() -> None:
    assert _reads_the_refusal_words(ast.parse(THE_ONE.read_text(encoding="utf-8")))


@pytest.mark.parametrize("teller", TELLERS)
def test_every_surface_says_a_refusal_through_the_one_function(teller: str) -> None:
    tree = ast.parse((ROOT / teller).read_text(encoding="utf-8"))
    imported = {alias.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "engine.run.refusals"
                for alias in n.names}
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert "refusal_words" in imported and "refusal_words" in called, f"{teller} words a refusal of its own"
