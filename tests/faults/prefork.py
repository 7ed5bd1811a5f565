"""A fork server for `summon worker` processes, so a replacement for a killed worker is up in well
under a second instead of the 3-6 s a cold interpreter spends importing the provider SDKs.

Run as ``python -m tests.faults.prefork``. It imports summon, prints ``ready``, then for every line
``<config> <log>`` on stdin forks a child that runs what ``summon -c <config> worker`` runs, with the tests'
stand-in book (``tests.book_worker``), in its own session, output to ``<log>``, and prints the child's PID.
The children are ordinary processes: they are SIGKILLed by PID. When stdin closes, every child still
running is SIGKILLed and the server exits.
"""

from __future__ import annotations

import os
import signal
import sys

import appservice.app  # noqa: F401 - imported here so a fork starts warm
from tests import book_worker

children: set[int] = set()


def reap(*_: object) -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)


def spawn(config: str, log: str) -> int:
    pid = os.fork()
    if pid:
        children.add(pid)
        return pid
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        sys.stdin = open(0)
        sys.stdout = open(1, "w", buffering=1)
        sys.stderr = open(2, "w", buffering=1)
        code = book_worker.run(config)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    os._exit(code)


def serve() -> None:
    signal.signal(signal.SIGCHLD, reap)
    print("ready", flush=True)
    try:
        for line in sys.stdin:
            config, log = line.split()
            print(spawn(config, log), flush=True)
    finally:
        for pid in list(children):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for pid in list(children):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


if __name__ == "__main__":
    serve()
