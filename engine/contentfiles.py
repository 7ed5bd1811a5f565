"""Reading a content folder from disk: the only I/O of content. The compile itself is pure
(``engine.content``)."""

from __future__ import annotations

from pathlib import Path

from engine.content import CompileError, compile_sources


class ContentFileError(ValueError):
    """Files under the content root that cannot be read as UTF-8 text."""

    def __init__(self, errors: list[CompileError]) -> None:
        super().__init__("; ".join(str(error) for error in errors))
        self.errors = errors


def read_content(root: Path) -> dict[str, str]:
    """Every ``*.md`` under ``root`` as ``{relative posix path: text}``. Hidden files and folders
    (``.git``, editor swap files) are not content. Raises ``ContentFileError`` naming every file
    that is not UTF-8."""
    sources, unreadable = _read(root)
    if unreadable:
        raise ContentFileError(unreadable)
    return sources


def check(root: Path, server_name: str) -> list[str]:
    """Every problem with the content under ``root``, one printable ``path:line: message`` each;
    paths are given under ``root`` so an editor can open them. Empty means it compiles."""
    if not root.is_dir():
        return [f"{root}: no such content folder"]
    sources, unreadable = _read(root)
    compiled = compile_sources(sources, server_name=server_name)
    errors = [*unreadable, *(compiled if isinstance(compiled, list) else [])]
    return [f"{(root / error.path).as_posix()}:{error.line}: {error.message}" for error in errors]


def _read(root: Path) -> tuple[dict[str, str], list[CompileError]]:
    sources: dict[str, str] = {}
    unreadable: list[CompileError] = []
    for file in sorted(root.rglob("*.md")):
        relative = file.relative_to(root)
        if any(part.startswith(".") for part in relative.parts) or not file.is_file():
            continue
        try:
            sources[relative.as_posix()] = file.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            unreadable.append(CompileError(relative.as_posix(), 1, f"not UTF-8 text ({exc.reason})"))
    return sources, unreadable
