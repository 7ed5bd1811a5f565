"""The root builds whole objects (issue 26): nothing in the composition root or a surface's builder sets an
attribute on an object it did not just make (every collaborator is handed in through a constructor), nothing
is probed with ``hasattr`` or set with ``setattr``, and the worker is handed how it holds a run instead of a
test patching a class attribute."""

from __future__ import annotations

import ast
from pathlib import Path

from engine.run.worker import Worker

REPO = Path(__file__).resolve().parents[2]
ROOT_MODULES = ("appservice/app.py", "appservice/parts.py", "appservice/matrix/build.py",
                "appservice/desk/build.py", "appservice/door/build.py", "appservice/members/build.py")


def late_wiring(source: str) -> list[str]:
    """Each ``other.attr = …`` (``self.attr`` is the object's own: fine), ``setattr`` and ``hasattr`` in
    ``source``, as ``line: what``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        while any(isinstance(t, ast.Tuple | ast.List | ast.Starred) for t in targets):
            targets = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple | ast.List) else
                                                    [t.value] if isinstance(t, ast.Starred) else [t])]
        for t in targets:
            if isinstance(t, ast.Attribute) and not (isinstance(t.value, ast.Name) and t.value.id == "self"):
                found.append(f"{t.lineno}: {ast.unparse(t)} = …")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "hasattr"):
            found.append(f"{node.lineno}: {node.func.id}(…)")
    return found


def test_the_root_and_the_builders_set_nothing_on_another_object() -> None:
    for module in ROOT_MODULES:
        assert late_wiring((REPO / module).read_text()) == [], module


def test_the_check_sees_late_wiring() -> None:
    assert late_wiring("def f(surface, outbox):\n    surface.hand_over = outbox.send_now\n") == \
        ["2: surface.hand_over = …"]
    assert late_wiring("class S:\n    def f(self):\n        self.dispatcher.lines.voice = 1\n") == \
        ["3: self.dispatcher.lines.voice = …"]
    assert late_wiring("if hasattr(s, 'outbox'):\n    setattr(s, 'x', 1)\n") == ["1: hasattr(…)", "2: setattr(…)"]
    assert late_wiring("class S:\n    def __init__(self):\n        self.x = 1\n        a, self.y = 1, 2\n") == []


def test_the_worker_is_handed_how_it_holds_a_run() -> None:
    assert not hasattr(Worker, "hold_class")
    assert "hold" in Worker.__init__.__code__.co_varnames
