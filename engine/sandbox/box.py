"""How a code tool's process is made and ended: its limits, its scrubbed environment, the command the jail starts,
and the compile's proof that a module loads (``check_module``), in the same jail with the same limits. What
content needs of the sandbox (the compile checks a module, the watcher carries the sandbox) is here, below both
``engine.content`` and ``engine.tools``; running a tool for a model is ``engine.tools.code``.

The environment a tool is handed is the root's to choose: ``Sandbox.given`` holds the service's variables the
operator named (``tools.code.env``), read by ``appservice.config.code_sandbox``; the engine reads no environment.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import engine
from engine.sandbox import jail

log = logging.getLogger(__name__)

CODE_TIMEOUT = 60.0
# What a tool is started with: isolated (no PYTHON* variables, no user site, no script folder on the path), no
# bytecode written next to site code (the content watcher would see it), and the engine found where this one is.
_BOOT = "import sys; sys.path.insert(0, sys.argv.pop(1)); from engine.tools.code_process import main; main()"
_ENGINE_ROOT = str(Path(engine.__file__).resolve().parent.parent)
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
SCRATCH = "/tmp"  # the jail's own in-memory /tmp: its working folder, HOME and TMPDIR
# What bwrap, setpriv or slirp4netns says when the jail itself fails (before any of the tool's code runs).
_JAILERS = (b"bwrap:", b"setpriv:")


@dataclass(frozen=True)
class CodeLimits:
    """What one code tool may take: ``seconds`` of wall time for its ``run``, ``load_seconds`` to load,
    processor seconds for each of its processes (by default both together), address space and file size (each
    process), how many processes at once, the size of its in-memory ``/tmp`` (and ``/dev/shm``), and how much
    text it may hand back."""

    seconds: float = CODE_TIMEOUT
    load_seconds: float = 30.0
    cpu_seconds: int | None = None
    memory_bytes: int = 1024 * 1024 * 1024
    file_bytes: int = 64 * 1024 * 1024
    answer_bytes: int = 4 * 1024 * 1024
    processes: int = 32
    scratch_bytes: int = 64 * 1024 * 1024

    def child(self) -> dict[str, int]:
        cpu = self.cpu_seconds or math.ceil(self.seconds + self.load_seconds)
        return {"cpu_seconds": max(1, cpu), "memory_bytes": self.memory_bytes, "file_bytes": self.file_bytes,
                "processes": self.processes}


@dataclass(frozen=True)
class Sandbox:
    """How a code tool's process is made: its limits, and the names of the service's environment variables
    it is handed (nothing else of the environment is), with their values as the root read them."""

    limits: CodeLimits = field(default_factory=CodeLimits)
    env: tuple[str, ...] = ()
    # The service's values of those variables, handed in by the root (never read here); kept out of the repr.
    given: Mapping[str, str] = field(default_factory=dict, repr=False)

    def command(self) -> list[str]:
        """The tool's process, as the jail starts it."""
        return [sys.executable, "-I", "-B", "-c", _BOOT, _ENGINE_ROOT]

    def environment(self) -> dict[str, str]:
        chosen = {name: self.given[name] for name in self.env if name in self.given}
        return {**chosen, **BASE_ENV, "HOME": SCRATCH, "TMPDIR": SCRATCH}

    def jail_for(self, file: Path, *, network: bool = False) -> jail.Jail:
        return jail.Jail(file, self.environment(), self.limits.scratch_bytes, network)

    def request(self, mode: str, file: Path, label: str, **rest: Any) -> bytes:
        return json.dumps({"mode": mode, "file": str(file), "label": label, "limits": self.limits.child(),
                           **rest}).encode()


def check_module(file: Path, label: str, sandbox: Sandbox | None = None) -> str | None:
    """For the compile: None if the module loads with a usable ``run``, else why not. It runs the module's top
    level (that is what proving it imports means) — in a jail of its own (with no network: loading needs
    none), never in this process; where no jail can be made it is not run, and that is why."""
    box = sandbox or Sandbox()
    why = jail.missing(network=False)
    if why is not None:
        return why
    argv = box.jail_for(file).argv(box.command(), uid=jail.new_uid())
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={"PATH": jail.SYSTEM_PATH}, start_new_session=True)
    try:
        out, err = process.communicate(box.request("check", file, label), timeout=box.limits.load_seconds)
    except subprocess.TimeoutExpired:
        kill(process.pid)
        process.communicate()
        return f"it did not load within {box.limits.load_seconds:g}s"
    finally:
        kill(process.pid)  # anything it left running
    message = first_message(out)
    if message is None:
        failed = jail_failed(err)
        if failed is not None:
            log.error("checking %s: its sandbox could not be made: %s", label, failed)
            return f"its sandbox could not be made ({failed})"
        log.debug("checking %s: %s", label, err[-2000:].decode(errors="replace"))
        return f"it stopped before it loaded ({why_ended(process.returncode, box.limits)})"
    if message.get("loaded") is True:
        return None
    return str(message.get("error") or "it does not load")


def why_ended(code: int | None, limits: CodeLimits) -> str:
    """Why a tool's process ended, in words (bwrap hands on its status: 128 + the signal it died of)."""
    signalled = jail.ended(code)
    if signalled == signal.SIGXCPU:
        return f"it used more than {limits.child()['cpu_seconds']}s of processor time"
    if signalled is not None:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(signalled).name}"
    return f"its process ended with status {code}"


def jail_failed(err: bytes) -> str | None:
    """What the jail's own programs said when they could not make it (None: the jail was made)."""
    first = err.lstrip().split(b"\n", 1)[0]
    return first.decode(errors="replace") if first.startswith(_JAILERS) else None


def kill(pid: int) -> None:
    """End a tool's jail: bwrap and its session. The jail's first process dies with bwrap
    (``--die-with-parent``), and with it every process in the jail's pid namespace."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def first_message(out: bytes) -> dict[str, Any] | None:
    """The first message a tool's process wrote, all at once (None: it wrote none)."""
    line = out.split(b"\n", 1)[0]
    try:
        message = json.loads(line) if line else None
    except ValueError:
        return None
    return message if isinstance(message, dict) else None
