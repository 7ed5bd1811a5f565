"""Code tools: a site's own Python module (``module:`` in ``content/tools/<name>.md``), for the ability
nobody could have anticipated.

The module defines ``run(run, arguments) -> str`` — ``async def`` or a plain ``def`` (run in a worker
thread so it cannot stall the loop) — and, optionally, ``PARAMETERS``: the JSON Schema object of its
arguments, written out as a literal (the compile reads it without running the module; see
``engine.content.code``). ``run`` gets a ``RunRef`` (which run, which bot, where — never a person) and
the model's arguments, and returns the text the model reads. Raising ``ToolError`` says something the
model can act on; any other exception is reported to the model as the tool having failed.

The compile proves the module loads (``check_module``, from ``engine.content.files``); at run time it
is loaded again whenever its file changed (by path, mtime and size) and kept by ``CodeTools``.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import inspect
import logging
import re
import sys
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any

from engine.content.code import SIGNATURE
from engine.content.parts import Tool
from engine.errors import ContentFault, ToolError, ToolEscaped
from engine.tools.base import RunRef

log = logging.getLogger(__name__)

RunFn = Callable[[RunRef, dict[str, Any]], Any]
CODE_TIMEOUT = 60.0


class ModuleLoadError(ContentFault):
    """Why a code tool's module does not load, said ``at its line N`` where there is one."""


def load_run(file: Path, label: str, *, prefix: str = "summon_tool") -> RunFn:
    """Import ``file`` under a name of its own (never a site module shadowing a real one) and return
    its ``run``. Raises ``ModuleLoadError``: a syntax error, an import that fails, no ``run``, or a
    ``run`` that does not take ``(run, arguments)``."""
    name = f"{prefix}_{re.sub(r'[^a-zA-Z0-9_]', '_', label)}_{hashlib.sha256(label.encode()).hexdigest()[:8]}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ModuleLoadError("it cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # while it runs: dataclasses and the like look themselves up there
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(name, None)
        raise ModuleLoadError(f"SyntaxError at its line {exc.lineno}: {exc.msg}") from exc
    except (Exception, SystemExit) as exc:
        sys.modules.pop(name, None)
        line = _line_in(exc.__traceback__, file)
        at = f" at its line {line}" if line else ""
        raise ModuleLoadError(f"{type(exc).__name__}{at}: {exc}") from exc
    run = getattr(module, "run", None)
    if not callable(run):
        sys.modules.pop(name, None)
        raise ModuleLoadError(f"it defines no run function ({SIGNATURE})")
    try:
        inspect.signature(run).bind(None, {})
    except TypeError as exc:
        sys.modules.pop(name, None)
        raise ModuleLoadError(f"its run must take two arguments: {SIGNATURE}") from exc
    except ValueError:  # no signature to read (a builtin); calling it will tell
        pass
    return run  # type: ignore[no-any-return]


def check_module(file: Path, label: str) -> str | None:
    """For the compile: None if the module loads with a usable ``run``, else why not. It does run the
    module's top level (that is what proving it imports means), then forgets it."""
    try:
        load_run(file, label, prefix="summon_check")
    except ModuleLoadError as exc:
        return str(exc)
    finally:
        for name in [n for n in sys.modules if n.startswith("summon_check_")]:
            sys.modules.pop(name, None)
    return None


def _line_in(trace: TracebackType | None, file: Path) -> int | None:
    line = None
    while trace is not None:
        if Path(trace.tb_frame.f_code.co_filename) == file:
            line = trace.tb_lineno
        trace = trace.tb_next
    return line


class CodeTools:
    """Runs code tools. ``root`` is the content folder the tools' ``module:`` paths are inside."""

    def __init__(self, root: Path, *, timeout: float = CODE_TIMEOUT, threads: int = 4) -> None:
        self.root = root.resolve()
        self.timeout = timeout
        self._loaded: dict[Path, tuple[tuple[int, int], RunFn]] = {}
        # A pool of their own: a sync tool that overruns its timeout keeps its thread, and must not starve
        # the loop's default executor (DNS lookups, asyncpg reconnects run there).
        self._threads = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="code-tool")

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)

    async def call(self, tool: Tool, run: RunRef, arguments: dict[str, Any]) -> str:
        """The text ``run`` returned, or a ``ToolError`` in words the model can act on."""
        if tool.kind != "module" or tool.module is None:
            raise ToolError(f"{tool.name} is not a code tool")
        _check_arguments(tool, arguments)
        fn = self._run_of(tool)
        try:
            if inspect.iscoroutinefunction(fn):
                result = await asyncio.wait_for(_contained(fn(run, arguments)), self.timeout)
            else:
                loop = asyncio.get_running_loop()
                result = await asyncio.wait_for(
                    loop.run_in_executor(self._threads, _contained_sync, fn, run, arguments), self.timeout)
                if inspect.isawaitable(result):
                    result = await asyncio.wait_for(_contained(result), self.timeout)
        except ToolError:
            raise
        except ToolEscaped as exc:
            log.warning("code tool %s tried to exit the process (%r); refused", tool.name, exc.args[0],
                        extra={"run": run.id, "bot": run.bot})
            raise ToolError(f"{tool.name} failed (it tried to exit); tell the person it did not work") from exc
        except TimeoutError as exc:
            raise ToolError(f"{tool.name} did not finish within {self.timeout:g}s; try again later") from exc
        except Exception as exc:
            log.warning("code tool %s raised", tool.name, exc_info=True, extra={"run": run.id, "bot": run.bot})
            raise ToolError(f"{tool.name} failed ({type(exc).__name__}: {exc}); tell the person it did not work") from exc
        if not isinstance(result, str):
            raise ToolError(f"{tool.name} is broken: it returned {type(result).__name__}, not text")
        return result

    def _run_of(self, tool: Tool) -> RunFn:
        assert tool.module is not None
        file = (self.root / tool.module).resolve()
        if not file.is_relative_to(self.root):
            raise ToolError(f"{tool.name} is broken: its module is outside the content folder")
        try:
            stat = file.stat()
        except OSError as exc:
            raise ToolError(f"{tool.name} is broken: its module {tool.module} is not there") from exc
        stamp = (stat.st_mtime_ns, stat.st_size)
        cached = self._loaded.get(file)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        try:
            fn = load_run(file, tool.module)
        except ModuleLoadError as exc:
            raise ToolError(f"{tool.name} is broken: {tool.module} does not load ({exc})") from exc
        self._loaded[file] = (stamp, fn)
        return fn


def _check_arguments(tool: Tool, arguments: object) -> None:
    if not isinstance(arguments, dict):
        raise ToolError(f"{tool.name} takes its arguments as a JSON object")
    declared = tool.parameters.get("properties") or {}
    missing = [name for name in tool.parameters.get("required") or () if name not in arguments]
    if missing:
        raise ToolError(f"{tool.name} needs {', '.join(missing)} (it takes: {', '.join(declared) or 'nothing'})")
    if tool.parameters.get("additionalProperties") is False:
        unknown = [name for name in arguments if name not in declared]
        if unknown:
            raise ToolError(f"{tool.name} takes no {', '.join(unknown)} (it takes: {', '.join(declared) or 'nothing'})")


async def _contained(awaitable: Awaitable[Any]) -> Any:
    try:
        return await awaitable
    except (SystemExit, KeyboardInterrupt) as exc:
        raise ToolEscaped(exc) from None


def _contained_sync(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except (SystemExit, KeyboardInterrupt) as exc:
        raise ToolEscaped(exc) from None
