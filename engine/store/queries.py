"""Load the named statements once: ``sql/queries/<family>.sql`` next to this module (``engine/store/sql/``, shipped
in the package), one file per table family, each a list of
``-- name: x`` blocks with a one-line description, looked up by name. A name defined twice (in one file
or two) is refused. No SQL strings live in Python, and nothing is built by formatting values in."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

SQL_DIR = Path(__file__).resolve().parent / "sql"
QUERIES_DIR = SQL_DIR / "queries"
_NAME = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$")


@dataclass(frozen=True)
class Query:
    name: str
    description: str
    sql: str


def parse_queries(text: str) -> dict[str, Query]:
    found: dict[str, Query] = {}
    name: str | None = None
    description = ""
    body: list[str] = []

    def close() -> None:
        if name is None:
            return
        sql = "\n".join(body).strip().rstrip(";").strip()
        if not sql:
            raise ValueError(f"query {name!r} has no statement")
        if name in found:
            raise ValueError(f"query {name!r} is defined twice")
        found[name] = Query(name, description, sql)

    for line in text.splitlines():
        m = _NAME.match(line)
        if m:
            close()
            name, description, body = m.group(1), "", []
        elif name is not None and not body and line.startswith("--") and not description:
            description = line.lstrip("-").strip()
        elif name is not None:
            body.append(line)
    close()
    return found


def query_files(*paths: Path) -> list[Path]:
    """The files ``paths`` name: a file as itself, a folder as its ``*.sql`` files in name order."""
    return [file for path in paths for file in (sorted(path.glob("*.sql")) if path.is_dir() else [path])]


class Queries(Mapping[str, str]):
    """``queries["claim_runs"]`` is the statement; ``queries.describe("claim_runs")`` says what it does.
    Read from ``paths`` (files, or folders of ``*.sql``): by default every family under ``sql/queries/``."""

    def __init__(self, *paths: Path) -> None:
        self._q: dict[str, Query] = {}
        self._file: dict[str, str] = {}
        for file in query_files(*(paths or (QUERIES_DIR,))):
            for name, query in parse_queries(file.read_text(encoding="utf-8")).items():
                if name in self._q:
                    raise ValueError(f"query {name!r} is defined twice ({self._file[name]} and {file.name})")
                self._q[name] = query
                self._file[name] = file.name

    def __getitem__(self, name: str) -> str:
        return self._q[name].sql

    def __iter__(self) -> Iterator[str]:
        return iter(self._q)

    def __len__(self) -> int:
        return len(self._q)

    def describe(self, name: str) -> str:
        return self._q[name].description
