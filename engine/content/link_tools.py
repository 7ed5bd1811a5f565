"""The tool files' part of the link (``engine.content.link``): an OpenAPI tool's operations read from its
spec (the allowed ones exist and can be offered; its ``subject:`` parameter marked), a code tool's module
read, a built-in's own file (its ``for:``, ``needs:``, ``personal:`` and nothing else), and each name a model
would call a tool by its own. Every refusal names both sides."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urljoin

from engine.content.base import CompileError, listed
from engine.content.code import read_module
from engine.content.openapi import Spec, Unavailable, read_spec, tool_name
from engine.content.parts import BUILTIN_KEYS, BUILTIN_TOOLS, PERSONAL_BUILTINS, Operation, Tool, ToolFile
from engine.content.source import File, Settings


def compile_tool(name: str, file: File, settings: Settings, errors: list[CompileError]) -> Tool | None:
    """One tool file → a Tool, or None with why in ``errors``."""
    front: ToolFile = file.front
    base = {**{key: getattr(front, key) for key in ToolFile.model_fields}, "name": name, "source_path": file.path, "notes": file.parsed.body.strip()}
    if name in BUILTIN_TOOLS:
        return _builtin(name, file, front, base, errors)
    if front.openapi is None and front.module is None:
        errors.append(CompileError(file.path, 1, "a tool names an OpenAPI spec (openapi: + operations:) or a module: (a .py file)"))
        return None
    if front.module is not None:
        loaded = settings.referenced.get(front.module)
        module = read_module(loaded) if isinstance(loaded, str) else None
        if module is None or isinstance(module, str):
            why = module or (loaded.reason if isinstance(loaded, Unavailable) else "it was not read")
            errors.append(CompileError(file.path, file.line("module"), f"module: {front.module} does not load: {why}"))
            return None
        if front.description is None and module.doc is None:
            errors.append(
                CompileError(
                    file.path, file.line("module"),
                    f"a code tool needs words a model reads to decide to use it: description: here, or a docstring"
                    f" on run in {front.module}",
                )
            )
            return None
        return Tool(**base, kind="module", parameters=module.parameters, doc=module.doc)
    assert front.openapi is not None
    loaded = settings.referenced.get(front.openapi)
    spec: Spec | str
    if isinstance(loaded, str):
        spec = read_spec(loaded)
    else:
        spec = loaded.reason if isinstance(loaded, Unavailable) else "it was not read"
    if isinstance(spec, str):
        errors.append(
            CompileError(file.path, file.line("openapi"), f"openapi: the spec {front.openapi} does not load: {spec}")
        )
        return None
    allowed = []
    for index, operation in enumerate(front.operations):
        if operation not in spec.operations:
            errors.append(
                CompileError(
                    file.path,
                    file.line("operations", index),
                    f"operations: '{operation}' is not an operation of {front.openapi}"
                    f" (its operationIds: {listed(sorted(spec.operations))})",
                )
            )
        elif operation in spec.problems:
            errors.append(
                CompileError(
                    file.path,
                    file.line("operations", index),
                    f"operations: '{operation}' of {front.openapi} cannot be offered to a model:"
                    f" {spec.problems[operation]}",
                )
            )
        else:
            allowed.append(spec.operations[operation])
    base_url = spec.base_url
    if front.openapi.startswith(("http://", "https://")):  # a server url is relative to the spec's own
        base_url = urljoin(front.openapi, base_url or "/")
    if base_url is None or not base_url.startswith(("http://", "https://")) or "{" in base_url:
        # Every call would fail: refused now, not discovered by a run.
        said = ("names no server (servers: [{url: https://…}])" if base_url is None
                else f"names a server the tool cannot call ({base_url!r}: an absolute http(s) url, its"
                     " variables given defaults)")
        errors.append(CompileError(file.path, file.line("openapi"), f"openapi: the spec {front.openapi} {said}"))
        return None
    if front.subject is not None:
        marked = _mark_subject(front.subject, tuple(allowed))
        if isinstance(marked, str):
            errors.append(CompileError(file.path, file.line("subject"), marked))
            return None
        allowed = list(marked)
    return Tool(**base, kind="openapi", base_url=base_url, allowed=tuple(allowed))


def _builtin(name: str, file: File, front: ToolFile, base: dict[str, Any], errors: list[CompileError]) -> Tool | None:
    """A file named after a built-in gives that built-in the site's ``for:``, ``needs:`` and ``personal:``
    (SPEC §3: anything a person may not have is withheld) — and nothing else: the tool is the engine's."""
    said = sorted((key for key in ("for" if k == "audience" else k for k in front.model_fields_set) if key not in BUILTIN_KEYS),
                  key=lambda key: (key not in ("openapi", "module"), file.line(key, key=True)))
    before = len(errors)
    if name == "open_skill":
        errors.append(CompileError(
            file.path, 1, "open_skill comes with a bot's skills and is offered wherever they are: give a skill its own"
            " for: instead of a file for open_skill"))
    elif said:
        errors.append(CompileError(
            file.path, file.line(said[0], key=True),
            f"'{name}' is a built-in tool: a file of that name sets only its {', '.join(k + ':' for k in BUILTIN_KEYS)}"
            f" ({said[0]}: is not one of them; an OpenAPI or code tool takes a name of its own)"))
    elif name in PERSONAL_BUILTINS and front.personal is False:
        errors.append(CompileError(
            file.path, file.line("personal", key=True),
            f"personal: {name} reads the person's own data, so it is always personal (leave personal: out)"))
    if len(errors) > before:
        return None
    return Tool(**base, kind="builtin")


def _mark_subject(subject: str, allowed: tuple[Operation, ...]) -> tuple[Operation, ...] | str:
    """The allowed operations with the parameter named ``subject`` marked as the person (filled from the
    run, never offered to the model); or why it cannot be."""
    marked: list[Operation] = []
    found = False
    for operation in allowed:
        params = []
        for param in operation.params:
            if subject in (param.key, param.name) and param.where != "body":
                params.append(param.model_copy(update={"subject": True}))
                found = True
            else:
                params.append(param)
        marked.append(operation.model_copy(update={"params": tuple(params)}))
    if not found:
        taken = "; ".join(f"{op.operation_id}: {listed(p.key for p in op.params if p.where != 'body')}" for op in allowed)
        return (f"subject: '{subject}' is not a parameter of the allowed operations, so nothing would be filled with"
                f" the person's account (their parameters — {taken or 'none'})")
    return tuple(marked)


def check_model_names(tools: Mapping[str, Tool], files: Mapping[str, File], errors: list[CompileError]) -> None:
    """Each name a model calls a content tool by is its own: not a built-in's, not another tool's."""
    taken = {name: "a built-in tool" for name in BUILTIN_TOOLS}
    for name, tool in sorted(tools.items()):
        if tool.kind == "builtin":
            continue  # the built-in itself, under its own name
        file = files[name]
        targets = (
            [(tool_name(name, op.operation_id), ("operations", tool.operations.index(op.operation_id)))
             for op in tool.allowed]
            if tool.kind == "openapi" else [(tool_name(name), ("module",))]
        )
        for model_name, at in targets:
            if model_name in taken:
                errors.append(
                    CompileError(
                        file.path, file.line(*at),
                        f"a model would call this tool '{model_name}', already the name of {taken[model_name]}",
                    )
                )
            else:
                taken[model_name] = file.path if tool.kind == "module" else f"an operation of {file.path}"
