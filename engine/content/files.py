"""Reading content from disk: the only I/O of content. The compile itself is pure (``engine.content``):
this module hands it the site's files, the kit's (``engine/content/kit/``, shipped in the package), and the
files and urls the tool files name (OpenAPI specs through ``fetch_spec``, modules)."""

from __future__ import annotations

import dataclasses
import os
import types
from collections.abc import Callable, Collection
from pathlib import Path

import httpx

from engine.content import CompileError, Registry, Unavailable, compile_sources, references
from engine.content.base import KIT
from engine.content.code import Module, read_module
from engine.content.compile import avatar_files
from engine.content.kinds import Kinds
from engine.content.registry import Doc
from engine.errors import ContentFault
from engine.sandbox.box import Sandbox, check_module

KIT_DIR = Path(__file__).resolve().parent / "kit"
# An OpenAPI spec at a url is read at compile time through this; it returns the text or raises.
FetchSpec = Callable[[str], str]
SPEC_TIMEOUT = 10.0
SPEC_MAX_BYTES = 5_000_000
# content/docs/: free prose for search_site, read beside the compiled content but never compiled.
DOCS = "docs"


class ContentFileError(ContentFault):
    """Files under the content root that cannot be read as UTF-8 text."""

    def __init__(self, errors: list[CompileError]) -> None:
        super().__init__("; ".join(str(error) for error in errors))
        self.errors = errors


def read_content(root: Path) -> dict[str, str]:
    """Every ``*.md`` under ``root`` as ``{relative posix path: text}``, but ``docs/`` (``read_docs``).
    Hidden files and folders (``.git``, editor swap files) are not content. Raises
    ``ContentFileError`` naming every file that is not UTF-8."""
    sources, unreadable = _read(root)
    if unreadable:
        raise ContentFileError(unreadable)
    return sources


def read_docs(root: Path) -> tuple[list[Doc], list[CompileError]]:
    """The pages under ``root/docs/`` (none if there is no such folder), and any that are not UTF-8."""
    folder = root / DOCS
    if not folder.is_dir():
        return [], []
    texts, unreadable = _read(folder, skip_docs=False)
    return (
        [Doc.of(f"{DOCS}/{path}", text) for path, text in texts.items()],
        [CompileError(f"{DOCS}/{error.path}", error.line, error.message) for error in unreadable],
    )


def read_kit(kit: Path = KIT_DIR) -> dict[str, str]:
    """The kit's own content (its errors, should it have any, are reported as ``kit/<path>``)."""
    return read_content(kit)


def fetch_url(url: str) -> str:
    """``fetch_spec`` for the command line and the service: a plain GET, size-capped."""
    with httpx.Client(timeout=SPEC_TIMEOUT, follow_redirects=True, trust_env=False) as client:
        with client.stream("GET", url) as response:
            response.raise_for_status()
            body = b""
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > SPEC_MAX_BYTES:
                    raise ValueError(f"the spec is over {SPEC_MAX_BYTES} bytes")
    return body.decode(response.encoding or "utf-8")


def read_referenced(root: Path, names: Collection[str], fetch_spec: FetchSpec | None) -> dict[str, str | Unavailable]:
    """The text of each file (relative to ``root``) or url a tool names, or why it cannot be had."""
    out: dict[str, str | Unavailable] = {}
    base = root.resolve()
    for name in sorted(names):
        if name.startswith(("http://", "https://")):
            if fetch_spec is None:
                out[name] = Unavailable("urls are not fetched by this compile (no fetch_spec was given)")
                continue
            try:
                out[name] = fetch_spec(name)
            except Exception as exc:  # whatever the fetcher raised is the reason, said to the author
                out[name] = Unavailable(f"{type(exc).__name__}: {exc}")
            continue
        file = (root / name).resolve()
        if not file.is_relative_to(base):
            out[name] = Unavailable("it is outside the content folder")
        elif not file.is_file():
            out[name] = Unavailable(f"there is no such file in {root.as_posix()}")
        else:
            try:
                out[name] = file.read_text(encoding="utf-8")
            except UnicodeDecodeError as exc:
                out[name] = Unavailable(f"not UTF-8 text ({exc.reason})")
            except OSError as exc:
                out[name] = Unavailable(exc.strerror or str(exc))
    return out


# The first bytes of the image formats an avatar may be (what a client can draw), and the most an avatar may weigh.
IMAGE_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF87a", "image/gif"),
               (b"GIF89a", "image/gif"), (b"RIFF", "image/webp"))
AVATAR_MAX_BYTES = 1024 * 1024


def image_type(data: bytes) -> str | None:
    """The media type of an avatar's bytes (PNG, JPEG, GIF, WebP), or None when they are none of those."""
    for magic, kind in IMAGE_MAGIC:
        if data.startswith(magic) and (kind != "image/webp" or data[8:12] == b"WEBP"):
            return kind
    return None


def check_images(root: Path, names: Collection[str]) -> dict[str, str | Unavailable]:
    """Each avatar image file (relative to ``root``): "" when it can be used, else why not."""
    out: dict[str, str | Unavailable] = {}
    base = root.resolve()
    for name in sorted(names):
        file = (root / name).resolve()
        if not file.is_relative_to(base):
            out[name] = Unavailable("it is outside the content folder")
            continue
        try:
            with file.open("rb") as f:
                head = f.read(AVATAR_MAX_BYTES + 1)
        except FileNotFoundError:
            out[name] = Unavailable(f"there is no such file in {root.as_posix()}")
            continue
        except OSError as exc:
            out[name] = Unavailable(exc.strerror or str(exc))
            continue
        if len(head) > AVATAR_MAX_BYTES:
            out[name] = Unavailable(f"it is over {AVATAR_MAX_BYTES // 1024} KiB (an avatar is drawn small)")
        elif image_type(head) is None:
            out[name] = Unavailable("it is not a PNG, JPEG, GIF or WebP image")
        else:
            out[name] = ""
    return out


def _load_modules(root: Path, names: Collection[str], referenced: dict[str, str | Unavailable],
                  sandbox: Sandbox | None) -> None:
    """Prove each code tool's module imports (running its top level — in a process of its own, with a code
    tool's limits and environment, never in this one): one that does not is as unavailable as a missing
    file, and the compile says why. One the compile would refuse from its text alone is not run at all."""
    for name in sorted(names):
        text = referenced.get(name)
        if isinstance(text, str) and isinstance(read_module(text), Module):
            why = check_module((root / name).resolve(), name, sandbox)
            if why is not None:
                referenced[name] = Unavailable(why)


def compile_content(
    root: Path,
    *,
    kinds: Kinds,
    server_name: str,
    kit: Path | None = KIT_DIR,
    fetch_spec: FetchSpec | None = fetch_url,
    zones: Collection[str] | None = None,
    site_events: Collection[str] | None = None,
    sealed_places: Collection[str] = (),
    sandbox: Sandbox | None = None,
    puppet_prefix: str = "bot_",
) -> Registry | list[CompileError]:
    """Read the site's content under ``root`` and the kit's, and compile them. Every error, including
    a file that is not UTF-8, comes back as a CompileError (paths under ``root``, or ``kit/…``). A code
    tool's module is proved to load in the ``sandbox`` its calls will run in (by default, the default one)."""
    if not root.is_dir():
        return [CompileError(root.as_posix(), 0, "no such content folder")]
    sources, unreadable = _read(root)
    kit_sources, kit_unreadable = _read(kit) if kit is not None else ({}, [])
    referenced = read_referenced(root, references(sources), fetch_spec)
    _load_modules(root, references(sources, ("module",)), referenced, sandbox)
    referenced.update(check_images(root, avatar_files(sources)))
    compiled = compile_sources(
        sources,
        kinds=kinds,
        server_name=server_name,
        kit=kit_sources,
        referenced=referenced,
        zones=zones,
        site_events=site_events,
        sealed_places=sealed_places,
        puppet_prefix=puppet_prefix,
    )
    docs, docs_unreadable = read_docs(root)
    unread = [*unreadable, *docs_unreadable, *(CompileError(KIT + e.path, e.line, e.message) for e in kit_unreadable)]
    if unread:
        return [*unread, *(compiled if isinstance(compiled, list) else [])]
    if isinstance(compiled, Registry) and docs:
        return dataclasses.replace(compiled, docs=types.MappingProxyType({doc.path: doc for doc in docs}))
    return compiled


def where(root: Path, error: CompileError, kit: Path = KIT_DIR) -> str:
    """``path:line: message`` with the path as an editor opens it."""
    if error.line == 0:
        return f"{error.path}: {error.message}"
    if error.path.startswith(KIT):
        return f"{(kit / error.path.removeprefix(KIT)).as_posix()}:{error.line}: {error.message}"
    return f"{(root / error.path).as_posix()}:{error.line}: {error.message}"


def check(root: Path, server_name: str, *, kinds: Kinds, kit: Path = KIT_DIR, fetch_spec: FetchSpec | None = fetch_url,
          puppet_prefix: str = "bot_") -> list[str]:
    """Every problem with the content under ``root`` (and the kit under it), one printable
    ``path:line: message`` each. Empty means it compiles."""
    compiled = compile_content(root, kinds=kinds, server_name=server_name, kit=kit, fetch_spec=fetch_spec,
                               puppet_prefix=puppet_prefix)
    if isinstance(compiled, Registry):
        return []
    return [where(root, error, kit) for error in compiled]


def files_under(root: Path, suffix: str = "") -> list[Path]:
    """Every file under ``root`` (ending in ``suffix``), sorted, following linked folders as well as linked
    files: a site may link a folder of shared skills into its content, and ``make dev`` lays its overlay out
    so (``Path.rglob`` does not follow a linked folder before Python 3.13). A folder reached twice — a link
    back up, a loop — is read once."""
    found: list[Path] = []
    seen: set[str] = set()
    for folder, subfolders, names in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:
            subfolders[:] = []
            continue
        seen.add(real)
        subfolders.sort()
        found.extend(Path(folder) / name for name in names if name.endswith(suffix))
    return sorted(found)


def _read(root: Path, *, skip_docs: bool = True) -> tuple[dict[str, str], list[CompileError]]:
    """Every ``*.md`` under ``root``; the ``docs/`` folder below it is not content (``read_docs``)."""
    sources: dict[str, str] = {}
    unreadable: list[CompileError] = []
    for file in files_under(root, ".md"):
        relative = file.relative_to(root)
        if any(part.startswith(".") for part in relative.parts) or not file.is_file():
            continue
        if skip_docs and len(relative.parts) > 1 and relative.parts[0] == DOCS:
            continue
        try:
            sources[relative.as_posix()] = file.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            unreadable.append(CompileError(relative.as_posix(), 1, f"not UTF-8 text ({exc.reason})"))
    return sources, unreadable
