"""The folders import one way: no folder imports, directly or round a loop, a folder that imports it back.
Checked on the source with ``ast``, so every import counts — at the top, inside a function, and under
``TYPE_CHECKING`` — since a cycle in any of them still ties the two folders into one. A folder is a
package (``engine/core``, ``appservice/matrix``); a module beside the packages (``engine/errors.py``,
``appservice/app.py``) is a node of its own. The intended order is ``engine/core`` < ``engine/content``
< ``engine/tools``, with ``engine/sandbox`` below both content and tools.

The same holds one level in, inside a folder split by job: ``appservice/matrix``'s sub-folders import one
way too (``inbound`` < ``delivery`` < ``asking`` < ``claimers`` < ``surface`` < ``dispatch`` < ``rooms``), a
module beside them (``ours.py``, ``power.py``) again a node of its own."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOPS = ("engine", "appservice")


def node_of(module: str, packages: frozenset[str]) -> str | None:
    """The folder node a dotted module belongs to: ``engine.core.loop`` → ``engine.core``, ``engine.errors``
    → ``engine.errors``, ``engine`` → ``engine``; ``None`` for a module outside engine/ and appservice/."""
    parts = module.split(".")
    if parts[0] not in TOPS:
        return None
    if len(parts) >= 2 and ".".join(parts[:2]) in packages:
        return ".".join(parts[:2])
    return ".".join(parts[:2]) if len(parts) >= 2 else parts[0]


def nested_node_of(module: str, packages: frozenset[str]) -> str | None:
    """The innermost folder node a dotted module belongs to: its deepest package, except that a module directly
    in a package that has packages of its own is a node of its own (``appservice.matrix.ours``), as at the top."""
    parts = module.split(".")
    if parts[0] not in TOPS:
        return None
    depth = max((n for n in range(1, len(parts) + 1) if ".".join(parts[:n]) in packages), default=1)
    package = ".".join(parts[:depth])
    if len(parts) > depth and any(p.startswith(package + ".") for p in packages):
        return ".".join(parts[: depth + 1])
    return package


def imports_of(source: str, here: str) -> set[str]:
    """Every module a source imports, in full, relative imports resolved against ``here`` (its package)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base)
                target = f"{prefix}.{node.module}" if node.module else prefix
            else:
                target = node.module or ""
            found.add(target)
            # ``from engine import tools`` imports the package engine.tools, not only engine/__init__.
            found.update(f"{target}.{alias.name}" for alias in node.names if alias.name != "*")
    return found


def folder_graph(root: Path, *, nested: bool = False) -> dict[str, set[str]]:
    """Folder node → the folder nodes it imports, over every module under engine/ and appservice/: the folders
    right under each, or with ``nested`` every folder at any depth (``appservice.matrix.asking``)."""
    if nested:
        packages = frozenset(
            ".".join(p.relative_to(root).parts) for top in TOPS for p in [root / top, *(root / top).rglob("*")]
            if p.is_dir() and (p / "__init__.py").is_file())
    else:
        packages = frozenset(
            ".".join(p.relative_to(root).parts) for top in TOPS for p in (root / top).iterdir()
            if p.is_dir() and any(p.rglob("*.py"))
        )
    node_for = nested_node_of if nested else node_of
    carriers = set(TOPS) | ({p for p in packages if any(q.startswith(p + ".") for q in packages)} if nested else set())
    graph: dict[str, set[str]] = {}
    for top in TOPS:
        for path in sorted((root / top).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            dotted = ".".join(parts)
            is_package = parts[-1] == "__init__"
            module = ".".join(parts[:-1]) if is_package else dotted
            here = module if is_package else ".".join(parts[:-1])
            source_node = node_for(module, packages)
            assert source_node is not None
            edges = graph.setdefault(source_node, set())
            for target in imports_of(path.read_text(encoding="utf-8"), here):
                target_node = node_for(target, packages)
                # ``from engine import x`` names the bare package ``engine``: only its submodule counts (so
                # too a package holding packages, ``from appservice.matrix import ours``, when nested).
                if target_node is None or target_node == source_node or target_node in carriers:
                    continue
                if target_node in packages or (root / Path(*target_node.split("."))).with_suffix(".py").is_file():
                    edges.add(target_node)
    return graph


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted; sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def a_loop_in(component: list[str], graph: Mapping[str, Iterable[str]]) -> list[str]:
    """One concrete loop through a component, for the failure message: a → b → … → a."""
    members = set(component)
    start = component[0]
    path = [start]
    seen = {start}
    # A shortest walk back to start inside the component (breadth first).
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt_frontier = []
        for node in frontier:
            for nxt in sorted(graph.get(node, ())):
                if nxt not in members:
                    continue
                if nxt == start:
                    walk = [node]
                    while walk[-1] != start:
                        walk.append(parents[walk[-1]])
                    return [*reversed(walk), start]
                if nxt not in seen:
                    seen.add(nxt)
                    parents[nxt] = node
                    nxt_frontier.append(nxt)
        frontier = nxt_frontier
    return path


def test_the_check_finds_a_cycle_and_names_it() -> None:
    graph = {"engine.core": {"engine.content"}, "engine.content": {"engine.tools", "engine.errors"},
             "engine.tools": {"engine.core"}, "engine.errors": set(), "appservice.app": {"engine.core"}}
    assert cycles(graph) == [["engine.content", "engine.core", "engine.tools"]]
    assert a_loop_in(cycles(graph)[0], graph) == ["engine.content", "engine.tools", "engine.core", "engine.content"]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_every_kind_of_import_counts(tmp_path: Path) -> None:
    for name in ("core", "content", "tools"):
        (tmp_path / "engine" / name).mkdir(parents=True)
        (tmp_path / "engine" / name / "__init__.py").write_text("")
    (tmp_path / "engine" / "__init__.py").write_text("")
    (tmp_path / "appservice").mkdir()
    (tmp_path / "appservice" / "app.py").write_text("from engine.core import x\n")
    (tmp_path / "engine" / "errors.py").write_text("")
    (tmp_path / "engine" / "core" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from engine.content.b import B\n")
    (tmp_path / "engine" / "content" / "b.py").write_text("def f():\n    from engine.tools import c\n")
    (tmp_path / "engine" / "tools" / "c.py").write_text("from ..core import a\nfrom engine import errors\n")
    graph = folder_graph(tmp_path)
    assert graph["engine.core"] == {"engine.content"}
    assert graph["engine.content"] == {"engine.tools"}
    assert graph["engine.tools"] == {"engine.core", "engine.errors"}
    assert graph["appservice.app"] == {"engine.core"}
    assert cycles(graph) == [["engine.content", "engine.core", "engine.tools"]]


def test_no_folder_imports_round_a_loop() -> None:
    graph = folder_graph(ROOT)
    assert "engine.core" in graph and "appservice.app" in graph
    loops = [f"{', '.join(component)} (one loop: {' → '.join(a_loop_in(component, graph))})"
             for component in cycles(graph)]
    assert loops == [], f"folders that import each other round a loop: {loops}"


def test_the_nested_check_sees_sub_folders(tmp_path: Path) -> None:
    for folder in ("appservice", "appservice/matrix", "appservice/matrix/inbound", "appservice/matrix/asking"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "engine").mkdir()
    (tmp_path / "appservice" / "matrix" / "ours.py").write_text("from appservice.matrix.inbound.said import x\n")
    (tmp_path / "appservice" / "matrix" / "inbound" / "said.py").write_text("from ..asking import mention\n")
    (tmp_path / "appservice" / "matrix" / "asking" / "mention.py").write_text("from appservice.matrix import ours\n")
    flat = folder_graph(tmp_path)
    assert cycles(flat) == []  # one folder, appservice.matrix, at the top: the loop is invisible there
    graph = folder_graph(tmp_path, nested=True)
    assert graph["appservice.matrix.ours"] == {"appservice.matrix.inbound"}
    assert graph["appservice.matrix.inbound"] == {"appservice.matrix.asking"}
    assert graph["appservice.matrix.asking"] == {"appservice.matrix.ours"}
    assert cycles(graph) == [["appservice.matrix.asking", "appservice.matrix.inbound", "appservice.matrix.ours"]]


def test_no_sub_folder_imports_round_a_loop() -> None:
    graph = folder_graph(ROOT, nested=True)
    assert {"appservice.matrix.inbound", "appservice.matrix.asking", "appservice.matrix.ours"} <= set(graph)
    loops = [f"{', '.join(component)} (one loop: {' → '.join(a_loop_in(component, graph))})"
             for component in cycles(graph)]
    assert loops == [], f"sub-folders that import each other round a loop: {loops}"
