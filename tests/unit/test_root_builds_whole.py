"""The composition root builds whole objects: nothing it makes is finished by patching it afterwards (an
attribute set on another object, ``setattr``), nothing is guessed at on the way down (``hasattr``), and the
factories a test may swap are handed in, never set on a class."""

from __future__ import annotations

import ast
from pathlib import Path

from engine.run.worker import Worker

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / "appservice" / "app.py"


def patches(source: str) -> list[str]:
    """Each place ``source`` sets an attribute on an object other than ``self``, or calls setattr/hasattr."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            for t in (target.elts if isinstance(target, ast.Tuple) else [target]):
                if isinstance(t, ast.Attribute) and not (isinstance(t.value, ast.Name) and t.value.id == "self"):
                    found.append(f"line {t.lineno}: {ast.unparse(t)} = …")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "hasattr"):
            found.append(f"line {node.lineno}: {node.func.id}(…)")
    return found


def test_the_root_sets_no_attribute_on_what_it_built() -> None:
    assert patches(ROOT.read_text()) == []


def test_the_check_sees_a_patch_a_setattr_and_a_hasattr() -> None:
    source = (
        "class Service:\n"
        "    def start(self):\n"
        "        self.surface = make()\n"           # its own attribute: fine
        "        self.surface.hand_over = send\n"   # another object's: a patch
        "        lines.voice, self.x = hearing, 1\n"
        "        setattr(rooms, 'voice', hearing)\n"
        "        if hasattr(self, 'outbox'):\n"
        "            pass\n"
    )
    assert patches(source) == ["line 4: self.surface.hand_over = …", "line 5: lines.voice = …",
                               "line 6: setattr(…)", "line 7: hasattr(…)"]


def test_how_a_run_is_held_is_handed_to_the_worker_not_set_on_its_class() -> None:
    assert not hasattr(Worker, "hold_class")
    assert "holder" in Worker.__init__.__code__.co_varnames
