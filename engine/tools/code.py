"""Code tools: a site's own Python module (``module:`` in ``content/tools/<name>.md``), for the ability
nobody could have anticipated — run in a process of its own, never in the service's.

The module defines ``run(run, arguments) -> str`` (``async def`` or a plain ``def``) and, optionally,
``PARAMETERS``: the JSON Schema object of its arguments, written out as a literal (the compile reads it without
running the module; see ``engine.content.code``). ``run`` gets a ``RunRef`` (which run, which bot, where — never
a person) and the model's arguments, and returns the text the model reads. Raising ``ToolError`` says
something the model can act on; any other exception is reported to the model as the tool having failed.

Each call starts ``engine.tools.code_process`` afresh (so a changed file is simply what runs next), **in a jail**
(``engine.sandbox.jail``: bubblewrap's namespaces, as a uid of its own when the service is root) where nothing of
the service's is in reach — not its environment, its ``/proc``, its files, its descriptors, nor, unless the tool
file says ``network: true``, any network:

- **a scrubbed environment** — none of the service's (its tokens, the provider keys, the database's DSN): a
  fixed ``PATH``, a C.UTF-8 locale, ``HOME`` and ``TMPDIR`` in the jail's in-memory ``/tmp``, its working
  folder, and only the variables the operator names (``tools.code.env``); ``python -I`` so no ``PYTHON*``
  variable or user site changes what it imports;
- **limits** set in the child by ``resource.setrlimit`` before the module loads: processor seconds, address
  space, file size, processes (``CodeLimits``);
- **killed at its timeout**, with everything it started (the jail's pid namespace dies with it): a tool that
  overruns does not keep running after it is reported as late;
- **given only** its arguments and the run's declared facts, as JSON on its stdin; no pool, no store, no
  person.

Where the jail cannot be made (no bubblewrap here) a code tool is refused out loud (``SandboxUnavailable``, and
the compile says so at its ``module:`` line): it never runs unjailed.

Loading (its top level, imports included) has its own allowance (``load_seconds``), so the tool's
``seconds`` measure its ``run``. The compile's proof that a module imports (``engine.sandbox.box.check_module``,
from ``engine.content.files``) loads it the same way, in the same jail (with no network: loading needs none) and
with the same limits: the service never executes site code, not when content changes either.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from engine.content.parts import Tool
from engine.errors import SandboxUnavailable, ToolError
from engine.sandbox import jail
from engine.sandbox.box import CodeLimits, Sandbox, jail_failed, kill, why_ended
from engine.tools.base import RunRef

log = logging.getLogger(__name__)


class CodeTools:
    """Runs code tools. ``root`` is the content folder the tools' ``module:`` paths are inside."""

    def __init__(self, root: Path, *, timeout: float | None = None, sandbox: Sandbox | None = None) -> None:
        self.root = root.resolve()
        box = sandbox or Sandbox()
        if timeout is not None:
            box = replace(box, limits=CodeLimits(**{**asdict(box.limits), "seconds": timeout}))
        self.sandbox = box

    @property
    def timeout(self) -> float:
        return self.sandbox.limits.seconds

    def close(self) -> None:
        """Nothing is kept between calls: every tool's process is gone when its call returns."""

    async def call(self, tool: Tool, run: RunRef, arguments: dict[str, Any]) -> str:
        """The text ``run`` returned, or a ``ToolError`` in words the model can act on."""
        if tool.kind != "module" or tool.module is None:
            raise ToolError(f"{tool.name} is not a code tool")
        _check_arguments(tool, arguments)
        file = self._file(tool)
        why = jail.missing(network=tool.network)
        if why is not None:
            log.error("code tool %s was refused: %s", tool.name, why, extra={"run": run.id, "bot": run.bot})
            raise SandboxUnavailable(f"{tool.name} cannot run on this site right now (it has been logged); tell "
                                     "the person it did not work")
        return await self._run(tool, file, run, arguments)

    def _file(self, tool: Tool) -> Path:
        assert tool.module is not None
        file = (self.root / tool.module).resolve()
        if not file.is_relative_to(self.root):
            raise ToolError(f"{tool.name} is broken: its module is outside the content folder")
        if not file.is_file():
            raise ToolError(f"{tool.name} is broken: its module {tool.module} is not there")
        return file

    async def _run(self, tool: Tool, file: Path, run: RunRef, arguments: dict[str, Any]) -> str:
        box, limits = self.sandbox, self.sandbox.limits
        where = {"run": run.id, "bot": run.bot}
        uid = jail.new_uid()
        process, network = await self._start(tool, file, uid, where)
        printed = asyncio.ensure_future(_tail(process.stderr))
        try:
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(box.request("run", file, tool.module or "", run=asdict(run), arguments=arguments))
            await process.stdin.drain()
            process.stdin.close()
            try:
                loaded = await asyncio.wait_for(_message(process.stdout), limits.load_seconds)
            except TimeoutError as exc:
                raise ToolError(f"{tool.name} is broken: {tool.module} did not load within "
                                f"{limits.load_seconds:g}s") from exc
            if loaded is None:
                ended = await self._ended(process)
                failed = jail_failed((await _printed(printed)).encode())
                if failed is not None:
                    log.error("code tool %s: its sandbox could not be made: %s", tool.name, failed, extra=where)
                    raise SandboxUnavailable(f"{tool.name} cannot run on this site right now (it has been logged); "
                                             "tell the person it did not work")
                raise ToolError(f"{tool.name} is broken: {tool.module} stopped before it loaded ({ended})")
            if loaded.get("loaded") is not True:
                raise ToolError(f"{tool.name} is broken: {tool.module} does not load ({loaded.get('error')})")
            try:
                outcome = await asyncio.wait_for(_message(process.stdout), limits.seconds)
            except TimeoutError as exc:
                log.warning("code tool %s overran %gs; its process was killed", tool.name, limits.seconds,
                            extra=where)
                raise ToolError(f"{tool.name} did not finish within {limits.seconds:g}s; try again later") from exc
            except ValueError as exc:  # a line past the reader's limit
                raise ToolError(f"{tool.name} is broken: it answered more than {limits.answer_bytes} bytes") from exc
            if outcome is None:
                ended = await self._ended(process)
                log.warning("code tool %s ended without an answer (%s): %s", tool.name, ended,
                            await _printed(printed), extra=where)
                raise ToolError(f"{tool.name} was stopped ({ended}); tell the person it did not work")
            return self._answer(tool, outcome, where)
        finally:
            kill(process.pid)  # the jail, and with its first process every process in it
            await process.wait()
            if network is not None:
                await network.close()
            printed.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await printed

    async def _start(self, tool: Tool, file: Path, uid: int | None,
                     where: dict[str, Any]) -> tuple[asyncio.subprocess.Process, jail.Network | None]:
        """The tool's jailed process (and, when its file says ``network: true``, the jail's network, up before
        any of its code runs)."""
        box = self.sandbox
        common: dict[str, Any] = {
            "stdin": asyncio.subprocess.PIPE, "stdout": asyncio.subprocess.PIPE, "stderr": asyncio.subprocess.PIPE,
            "env": {"PATH": jail.SYSTEM_PATH}, "start_new_session": True, "limit": box.limits.answer_bytes + 4096}
        shut = box.jail_for(file, network=tool.network)
        if not tool.network:
            return await asyncio.create_subprocess_exec(*shut.argv(box.command(), uid=uid), **common), None
        info_r, info_w = os.pipe()
        block_r, block_w = os.pipe()
        etc = {name: _data_fd(data) for name, data in jail.etc_files().items()}
        try:
            try:
                argv = shut.argv(box.command(), uid=uid, info_fd=info_w, block_fd=block_r, etc_fds=etc)
                process = await asyncio.create_subprocess_exec(*argv, pass_fds=(info_w, block_r, *etc.values()),
                                                               **common)
            finally:
                for fd in (info_w, block_r, *etc.values()):
                    os.close(fd)
            try:
                network = await jail.attach_network(info_r, block_w, root=uid is not None)
            except SandboxUnavailable as exc:
                kill(process.pid)
                await process.wait()
                log.error("code tool %s: its network could not be made: %s", tool.name, exc, extra=where)
                raise SandboxUnavailable(f"{tool.name} cannot run on this site right now (it has been logged); "
                                         "tell the person it did not work") from exc
        finally:
            os.close(info_r)
            os.close(block_w)
        return process, network

    def _answer(self, tool: Tool, outcome: dict[str, Any], where: dict[str, Any]) -> str:
        if "result" in outcome and isinstance(outcome["result"], str):
            return outcome["result"]
        if "tool_error" in outcome:
            raise ToolError(str(outcome["tool_error"]))
        if "escaped" in outcome:
            log.warning("code tool %s tried to exit (%s); contained", tool.name, outcome["escaped"], extra=where)
            raise ToolError(f"{tool.name} failed (it tried to exit); tell the person it did not work")
        if "not_text" in outcome:
            raise ToolError(f"{tool.name} is broken: it returned {outcome['not_text']}, not text")
        log.warning("code tool %s raised: %s", tool.name, outcome.get("trace", ""), extra=where)
        raise ToolError(f"{tool.name} failed ({outcome.get('failed')}); tell the person it did not work")

    async def _ended(self, process: asyncio.subprocess.Process) -> str:
        """Why a process that closed its answers ended. One that closed them and went on is killed now: a
        process that died by itself keeps the status it died with."""
        kill(process.pid)
        return why_ended(await process.wait(), self.sandbox.limits)


def _data_fd(data: bytes) -> int:
    """A descriptor bwrap reads ``data`` from (a pipe already written and closed: a few bytes fit in it)."""
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    return read


async def _message(stream: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next message from a tool's process; None when it ended without one."""
    line = await stream.readline()
    if not line:
        return None
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


async def _tail(stream: asyncio.StreamReader | None, keep: int = 8192) -> bytes:
    """What a tool printed, the last ``keep`` bytes of it (read as it comes, so a chatty tool never blocks)."""
    kept = b""
    if stream is None:
        return kept
    while chunk := await stream.read(65536):
        kept = (kept + chunk)[-keep:]
    return kept


async def _printed(task: asyncio.Future[bytes]) -> str:
    with contextlib.suppress(asyncio.CancelledError, TimeoutError):
        return (await asyncio.wait_for(asyncio.shield(task), 1.0)).decode(errors="replace")
    return ""


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

