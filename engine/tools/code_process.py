"""The process a code tool runs in — never the service's. ``engine.tools.code`` starts it in a jail
(``engine.sandbox.jail``: ``python -I -B``, a scrubbed environment, an in-memory scratch folder, namespaces and a
uid of its own) and talks to it through pipes:

    stdin   one JSON request: {"mode": "check" | "run", "file", "label", "limits", "run"?, "arguments"?}
    stdout  one JSON line when the module is loaded ({"loaded": true} or {"loaded": false, "error": why}),
            then, for a run, one JSON line with how it went ({"result"} | {"tool_error"} | {"failed", "trace"}
            | {"escaped"} | {"not_text"})
    stderr  whatever the tool prints (its own stdout is sent there too, so it cannot forge an answer)

Its limits are set here, first, with ``resource.setrlimit`` (processor seconds, address space, file size,
processes, no core files); the service kills the whole jail at its timeout. The module is loaded only here: the service
never imports site code, not even to check it at compile time (``mode: check`` loads it and says whether its
``run`` is usable, then exits).

Imports nothing at its top but the standard library and the error tree, so a tool's start costs what its own
imports cost.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import inspect
import json
import os
import re
import resource
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from engine.errors import ContentFault, ToolError

SIGNATURE = "run(run, arguments) -> str"  # the contract, as engine.content.code says it to authors
TRACE_CHARS = 4000

RunFn = Callable[[Any, dict[str, Any]], Any]


class ModuleLoadError(ContentFault):
    """Why a code tool's module does not load, said ``at its line N`` where there is one."""


def limit(limits: dict[str, int]) -> None:
    """This process's ceilings (and every process it starts), before any of the tool's code runs: past
    ``cpu_seconds`` of processor time the kernel stops it (SIGXCPU, then SIGKILL a second later); an allocation
    past ``memory_bytes`` of address space fails (a MemoryError); a file written past ``file_bytes`` fails; a
    fork past ``processes`` of the jail's uid fails (its uid is its own: the jail's processes alone count); no
    core file is ever written."""
    cpu = int(limits["cpu_seconds"])
    _lower(resource.RLIMIT_CPU, cpu, cpu + 1)
    _lower(resource.RLIMIT_AS, int(limits["memory_bytes"]))
    _lower(resource.RLIMIT_FSIZE, int(limits["file_bytes"]))
    _lower(resource.RLIMIT_NPROC, int(limits["processes"]))
    _lower(resource.RLIMIT_CORE, 0)


def _lower(which: int, soft: int, hard: int | None = None) -> None:
    """Lower a limit (never above what this process was already held to: only root may raise one)."""
    _, held = resource.getrlimit(which)
    top = soft if hard is None else hard
    if held != resource.RLIM_INFINITY:
        soft, top = min(soft, held), min(top, held)
    resource.setrlimit(which, (soft, top))


def load_run(file: Path, label: str) -> RunFn:
    """Import ``file`` under a name of its own (never a site module shadowing a real one) and return its
    ``run``. Raises ``ModuleLoadError``: a syntax error, an import that fails, no ``run``, or a ``run`` that
    does not take ``(run, arguments)``."""
    name = f"summon_tool_{re.sub(r'[^a-zA-Z0-9_]', '_', label)}_{hashlib.sha256(label.encode()).hexdigest()[:8]}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ModuleLoadError("it cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # while it runs: dataclasses and the like look themselves up there
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise ModuleLoadError(f"SyntaxError at its line {exc.lineno}: {exc.msg}") from exc
    except (Exception, SystemExit, KeyboardInterrupt) as exc:
        line = _line_in(exc.__traceback__, file)
        at = f" at its line {line}" if line else ""
        raise ModuleLoadError(f"{type(exc).__name__}{at}: {exc}") from exc
    run = getattr(module, "run", None)
    if not callable(run):
        raise ModuleLoadError(f"it defines no run function ({SIGNATURE})")
    try:
        inspect.signature(run).bind(None, {})
    except TypeError as exc:
        raise ModuleLoadError(f"its run must take two arguments: {SIGNATURE}") from exc
    except ValueError:  # no signature to read (a builtin); calling it will tell
        pass
    return run  # type: ignore[no-any-return]


def _line_in(trace: TracebackType | None, file: Path) -> int | None:
    line = None
    while trace is not None:
        if Path(trace.tb_frame.f_code.co_filename) == file:
            line = trace.tb_lineno
        trace = trace.tb_next
    return line


def call(fn: RunFn, run: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """How the tool's ``run`` went, as the message the service reads."""
    try:
        result = fn(run, arguments)
        if inspect.isawaitable(result):
            result = asyncio.run(_awaited(result))
    except ToolError as exc:
        return {"tool_error": str(exc)}
    except (SystemExit, KeyboardInterrupt) as exc:
        return {"escaped": repr(exc)}
    except BaseException as exc:
        return {"failed": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-TRACE_CHARS:]}
    if not isinstance(result, str):
        return {"not_text": type(result).__name__}
    return {"result": result}


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _say(channel: IO[str], message: dict[str, Any]) -> None:
    channel.write(json.dumps(message) + "\n")
    channel.flush()


def main() -> None:
    request = json.loads(sys.stdin.read())
    limit(request["limits"])
    # Our answers go on a descriptor of their own; what the tool prints (even from C) goes to stderr.
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        fn = load_run(Path(request["file"]), request["label"])
        run = None
        if request["mode"] == "run":
            from engine.tools.ref import RunRef  # a tool is handed the run, never a person

            run = RunRef(**request["run"])
    except ModuleLoadError as exc:
        _say(answers, {"loaded": False, "error": str(exc)})
        os._exit(0)
    _say(answers, {"loaded": True})
    if request["mode"] == "run":
        _say(answers, call(fn, run, request["arguments"]))
    # Straight out: a thread the tool left running, or an atexit hook of its own, holds nothing up.
    os._exit(0)


if __name__ == "__main__":
    main()
