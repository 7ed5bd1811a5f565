"""The jail a code tool's process runs in (SPEC §15: secrets are unreachable from code tools by any route).

A scrubbed environment is not enough: a child of the service, as the service's user, reads
``/proc/<parent>/environ`` (the appservice token, the provider keys, the DSN), the config file, and reaches
Postgres on loopback. So every code tool's process — a call, and the compile's check that a module loads — is
started by Debian's **bubblewrap** (``bwrap``), the unprivileged sandbox Flatpak runs untrusted code in, in
namespaces of its own:

- **mount**: an empty root, read-only, holding only ``/usr`` (programs and libraries: nothing there is a
  secret — configuration lives in ``/etc``, state in ``/var``, neither of which is there), this Python
  (its installation and the service's virtualenv, read-only), the engine's package, and the tool's own module
  (read-only, at its own path); a new ``/proc`` that shows only the jail's processes; a minimal ``/dev``; a
  ``/tmp`` (its working folder, ``HOME`` and ``TMPDIR``) and a ``/dev/shm`` of ``scratch_bytes`` each, in
  memory, gone with the jail. The config file, the run folder, the service's sockets are not there to open.
- **pid**: the service and every other process are not there to read, signal or trace; when the jail's first
  process dies the kernel kills every process in it, so ``setsid`` and double forks escape nothing.
- **network**: none (a loopback of its own, with nothing listening) — unless its tool file says
  ``network: true``: then it gets a network namespace with a network of its own (``slirp4netns``, user-mode
  NAT, as rootless containers use), which reaches what this machine reaches **except this machine's
  loopback**, where Postgres, the homeserver and summon listen.
- **ipc, uts, cgroup**: its own.

and **as a user that is not the service's**: when the service runs as root (as the tests and CI do), bwrap sets
the jail up and ``setpriv`` drops to a uid of its own for the call (no account has it, no file outside the
jail is its), with no groups, no capabilities and no way to gain any (``no_new_privs``); a uid per call, so
the kernel's process limit (``RLIMIT_NPROC``) bounds that call alone. When the service is not root, bwrap
makes a user namespace (the tool is the service's user, mapped, with nothing of the service's in reach,
and may make no user namespace of its own).

Why not less: ``prctl(PR_SET_DUMPABLE, 0)`` hides the service's ``/proc`` entries from its own user only, not
from root, and nothing of the config file, the descriptors or the network; a separate uid alone still sees
every file that user may read, and the network. Why not more: a cgroup would bound the memory of every
process a tool starts together (here: each is held to ``memory_bytes`` of address space, and at most
``processes`` of them run), at the price of a delegated cgroup tree that not every machine gives a service.

When bwrap (or, as root, setpriv; or, for a tool with network, slirp4netns) is not here, a code tool is not
run at all: ``missing`` says why, and the caller refuses it out loud — never unsandboxed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import engine
from engine.errors import SandboxUnavailable

log = logging.getLogger(__name__)

# Where the jail's programs are looked for: the system's folders only, never the service's own PATH.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
INSTALL = {"bwrap": "bubblewrap", "setpriv": "util-linux", "slirp4netns": "slirp4netns"}
# The uids a call runs as when the service is root: one picked at random per call, from a block far above
# any account useradd makes, any subordinate-uid range containers use, and the default idmap ranges of
# directory services (sssd's end at 2000200000).
FIRST_UID = 2_100_000_000
UIDS = 1_000_000
# slirp4netns's fixed addresses: its DNS forwarder answers here, inside the jail's network.
SLIRP_DNS = "10.0.2.3"
# How long the jail's network may take to come up (it takes milliseconds).
NETWORK_SECONDS = 10.0
_TOP = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")


def missing(*, network: bool, root: bool | None = None) -> str | None:
    """Why a code tool cannot be jailed on this machine (a sentence naming what to install), or None."""
    needed = ["bwrap"]
    if _is_root() if root is None else root:
        needed.append("setpriv")
    if network:
        needed.append("slirp4netns")
    absent = [name for name in needed if shutil.which(name, path=SYSTEM_PATH) is None]
    if not absent:
        return None
    packages = " ".join(INSTALL[name] for name in absent)
    return (f"code tools run only in a sandbox, and {' and '.join(absent)} {'is' if len(absent) == 1 else 'are'}"
            f" not installed here (apt-get install {packages})")


def _is_root() -> bool:
    return os.geteuid() == 0


@dataclass(frozen=True)
class Jail:
    """One code tool process's jail: the module it may read, whether it has a network, the size of each of
    its in-memory folders, and the environment it is given (nothing else of the service's is)."""

    module: Path
    env: Mapping[str, str]
    scratch_bytes: int
    network: bool = False

    def argv(self, command: Sequence[str], *, uid: int | None = None, info_fd: int | None = None,
             block_fd: int | None = None, etc_fds: Mapping[str, int] | None = None) -> list[str]:
        """bwrap's command line for ``command``. ``uid``: as root, the uid the command runs as (None: not root,
        a user namespace). With a network, ``info_fd`` (bwrap says the jail's pid there), ``block_fd`` (it
        waits there until the network is up) and ``etc_fds`` (``/etc`` files it is given, read from those
        descriptors)."""
        bwrap = _which("bwrap")
        out = [bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
               "--unshare-cgroup-try", "--unshare-net", "--hostname", "summon-tool"]
        if uid is None:
            out += ["--unshare-user", "--disable-userns"]
        if info_fd is not None:
            out += ["--info-fd", str(info_fd)]
        if block_fd is not None:
            out += ["--block-fd", str(block_fd)]
        # The in-memory folders first: a module (or this Python) that lives under /tmp is bound into it after.
        out += [*_root_view(), "--perms", "1777", "--size", str(self.scratch_bytes), "--tmpfs", "/tmp",
                "--dev", "/dev", "--perms", "1777", "--size", str(self.scratch_bytes), "--tmpfs", "/dev/shm",
                "--remount-ro", "/dev"]
        made: set[str] = {"/tmp", "/dev", "/proc"}
        bound: list[str] = ["/usr", "/dev"]
        for source in _runtime(self.module):
            out += _bind(source, made, bound)
        out += ["--proc", "/proc"]
        if self.network:
            out += ["--perms", "0755", "--dir", "/etc"]
            for name, fd in (etc_fds or {}).items():
                out += ["--ro-bind-data", str(fd), f"/etc/{name}"]
            # The certificates a TLS client checks with (not /etc/ssl/private: nothing but certs).
            out += ["--ro-bind-try", "/etc/ssl/certs", "/etc/ssl/certs",
                    "--ro-bind-try", "/etc/ssl/openssl.cnf", "/etc/ssl/openssl.cnf"]
        out += ["--remount-ro", "/", "--chdir", "/tmp", "--clearenv"]
        for name, value in self.env.items():
            out += ["--setenv", name, value]
        if uid is not None:
            # Only what setpriv needs to drop to ``uid``; it then drops these too, for good.
            out += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
                    "--cap-add", "CAP_SETPCAP", "--", _which("setpriv"), "--reuid", str(uid), "--regid", str(uid),
                    "--clear-groups", "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all"]
        return [*out, "--", *command]


def new_uid() -> int | None:
    """The uid a call runs as: a fresh one when the service is root; None (a user namespace) otherwise."""
    return FIRST_UID + secrets.randbelow(UIDS) if _is_root() else None


def etc_files() -> dict[str, bytes]:
    """What a jail with a network finds in ``/etc``: slirp4netns's DNS forwarder, and only localhost known."""
    return {"resolv.conf": f"nameserver {SLIRP_DNS}\n".encode(), "hosts": b"127.0.0.1 localhost\n::1 localhost\n"}


def ended(code: int | None) -> int | None:
    """The signal the jailed process died of, from bwrap's status (128 + the signal), or None."""
    if code is not None and code < 0:
        return -code  # bwrap itself was killed
    if code is not None and 128 < code < 128 + 65:
        return code - 128
    return None


def _which(name: str) -> str:
    found = shutil.which(name, path=SYSTEM_PATH)
    if found is None:  # ``missing`` is asked first; this is a machine changed under us
        raise SandboxUnavailable(missing(network=name == "slirp4netns") or f"{name} is not installed")
    return found


def _root_view() -> list[str]:
    """``/usr``, and the top-level folders as this machine has them (links into ``/usr`` on Debian)."""
    out = ["--ro-bind", "/usr", "/usr"]
    for name in _TOP:
        top = Path("/") / name
        if top.is_symlink():
            out += ["--symlink", os.readlink(top), str(top)]
        elif top.is_dir():
            out += ["--ro-bind", str(top), str(top)]
    return out


def _runtime(module: Path) -> list[str]:
    """What the tool's process reads besides ``/usr``: this Python's installation, the virtualenv, the
    engine's package (its process imports ``engine.tools.code_process``), and the module itself."""
    paths = [sys.base_prefix, sys.prefix, str(Path(engine.__file__).resolve().parent), str(module)]
    out: list[str] = []
    for path in paths:
        real = os.path.realpath(path)
        if real not in out:
            out.append(real)
    return out


def _bind(source: str, made: set[str], bound: list[str]) -> list[str]:
    """Bind ``source`` read-only at its own path, unless a bind already shows it; the folders above it are
    made first, each traversable (bwrap would copy a ``0700`` /root's mode, and the jail's uid could not
    walk past it)."""
    if any(source == b or source.startswith(b.rstrip("/") + "/") for b in bound):
        return []
    out: list[str] = []
    parts = Path(source).parts[1:-1]
    for n in range(1, len(parts) + 1):
        folder = "/" + "/".join(parts[:n])
        if folder not in made:
            made.add(folder)
            out += ["--perms", "0755", "--dir", folder]
    bound.append(source)
    return [*out, "--ro-bind", source, source]


# --- a network of its own --------------------------------------------------------------------------------


@dataclass
class Network:
    """A jail's network: slirp4netns attached to the jail's network namespace, until ``close``."""

    process: asyncio.subprocess.Process
    exit_fd: int

    async def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.exit_fd)  # slirp4netns leaves when this closes
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        await self.process.wait()


async def attach_network(info_fd: int, block_fd: int, *, root: bool) -> Network:
    """Read the jail's pid from ``info_fd``, give its network namespace a network (slirp4netns: NAT through
    this machine, never to its loopback), and let the jail go on (``block_fd``). Raises ``SandboxUnavailable``."""
    info = await _read(info_fd, _is_json, NETWORK_SECONDS)
    try:
        pid = int(json.loads(info)["child-pid"])
    except (ValueError, KeyError, TypeError) as exc:
        raise SandboxUnavailable("the sandbox did not start (bwrap said no pid)") from exc
    ready_r, ready_w = os.pipe()
    exit_r, exit_w = os.pipe()
    where = [] if root else [f"--userns-path=/proc/{pid}/ns/user"]
    try:
        try:
            process = await asyncio.create_subprocess_exec(
                _which("slirp4netns"), "--configure", "--mtu=65520", "--disable-host-loopback", "--enable-sandbox",
                "--enable-seccomp", "--ready-fd", str(ready_w), "--exit-fd", str(exit_r), *where, str(pid), "tap0",
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
                pass_fds=(ready_w, exit_r), env={"PATH": SYSTEM_PATH}, start_new_session=True)
        except BaseException:
            os.close(exit_w)
            raise
        finally:
            os.close(ready_w)
            os.close(exit_r)
        network = Network(process, exit_w)
        ready = await _read(ready_r, bool, NETWORK_SECONDS)
    finally:
        os.close(ready_r)
    if ready != b"1":
        await network.close()
        said = b"" if process.stderr is None else await process.stderr.read(2000)
        raise SandboxUnavailable(f"its network did not come up (slirp4netns: {said.decode(errors='replace').strip()})")
    os.write(block_fd, b"1")
    return network


async def _read(fd: int, enough: Callable[[bytes], bool], seconds: float) -> bytes:
    """What is written to ``fd`` until ``enough`` says so, its writer closes it, or ``seconds`` pass — read on
    the event loop (never a thread left blocked on a descriptor that is then closed)."""
    loop = asyncio.get_running_loop()
    os.set_blocking(fd, False)
    readable = asyncio.Event()
    loop.add_reader(fd, readable.set)
    data = b""
    try:
        async with asyncio.timeout(seconds):
            while not enough(data):
                await readable.wait()
                readable.clear()
                try:
                    chunk = os.read(fd, 4096)
                except BlockingIOError:
                    continue
                if not chunk:
                    break
                data += chunk
    except TimeoutError:
        pass
    finally:
        loop.remove_reader(fd)
    return data


def _is_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except ValueError:
        return False
    return True
