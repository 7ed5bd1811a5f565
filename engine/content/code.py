"""What a code tool's module declares, read from its source without running it: a ``run`` function
taking ``(run, arguments)``, and ``PARAMETERS``, the JSON Schema of its arguments, written out as a
literal. The run function's docstring is what a model reads, unless the tool file says
``description:``. (That the module also *imports* is proved by ``engine.content.files``, which loads it in a
process of its own, as every call of the tool is run: ``engine.tools.code``.)

The contract, for a site's ``content/tools/<name>.py``::

    PARAMETERS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}

    async def run(run: RunRef, arguments: dict[str, Any]) -> str:   # or a plain def
        '''The weather now in a city, in a sentence.'''
        ...
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

SIGNATURE = "run(run, arguments) -> str"


@dataclass(frozen=True)
class Module:
    """What the compile keeps of a module: the JSON Schema object a model is offered, and the run
    function's docstring (what a model reads when the tool file has no ``description:``)."""

    parameters: dict[str, Any]
    doc: str | None = None


def read_module(text: str) -> Module | str:
    """A module's declared shape, or why it is not a code tool (a reason said ``at its line N``)."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        return f"SyntaxError at its line {exc.lineno}: {exc.msg}"
    run: ast.stmt | None = None
    parameters: dict[str, Any] = {"type": "object", "properties": {}}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "run":
            run = node
        elif isinstance(node, ast.Import | ast.ImportFrom) and any(
            (alias.asname or alias.name) == "run" for alias in node.names
        ):
            run = node
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {target.id for target in targets if isinstance(target, ast.Name)}
            if "run" in names:
                run = node
            if "PARAMETERS" in names and node.value is not None:
                declared = _parameters(node.value, node.lineno)
                if isinstance(declared, str):
                    return declared
                parameters = declared
    if run is None:
        return f"it defines no run function ({SIGNATURE})"
    if isinstance(run, ast.FunctionDef | ast.AsyncFunctionDef) and not _takes_two(run.args):
        return f"its run (its line {run.lineno}) must take two arguments: {SIGNATURE}"
    doc = ast.get_docstring(run) if isinstance(run, ast.FunctionDef | ast.AsyncFunctionDef) else None
    return Module(parameters=parameters, doc=doc.strip() or None if doc else None)


def _takes_two(args: ast.arguments) -> bool:
    positional = [*args.posonlyargs, *args.args]
    without_default = len(positional) - len(args.defaults)
    required_keywords = any(default is None for default in args.kw_defaults)
    return (len(positional) >= 2 or args.vararg is not None) and without_default <= 2 and not required_keywords


def _parameters(value: ast.expr, line: int) -> dict[str, Any] | str:
    try:
        declared = ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return f"PARAMETERS (its line {line}) is not written out as a literal dict (the compile reads it unrun)"
    if (
        not isinstance(declared, dict)
        or declared.get("type", "object") != "object"
        or not isinstance(declared.get("properties", {}), dict)
        or not all(isinstance(key, str) for key in declared)
    ):
        return (
            f"PARAMETERS (its line {line}) is not a JSON Schema object like"
            " {'type': 'object', 'properties': {'city': {'type': 'string'}}}"
        )
    return {"type": "object", **declared}
