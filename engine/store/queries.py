"""Load ``sql/queries.sql`` (and every ``sql/queries/*.sql``, one file per table family) once:
``-- name: x`` blocks, each with a one-line description, looked up by name. A name defined in two files
is refused. No SQL strings live in Python, and nothing is built by formatting values in."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

SQL_DIR = Path(__file__).resolve().parents[2] / "sql"
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


class Queries(Mapping[str, str]):
    """``queries["claim_run"]`` is the statement; ``queries.describe("claim_run")`` says what it does."""

    def __init__(self, path: Path = SQL_DIR / "queries.sql") -> None:
        self._q = parse_queries(path.read_text(encoding="utf-8"))
        family = path.parent / "queries"
        for extra in sorted(family.glob("*.sql")) if family.is_dir() else ():
            for name, query in parse_queries(extra.read_text(encoding="utf-8")).items():
                if name in self._q:
                    raise ValueError(f"query {name!r} is defined twice ({extra.name} and another file)")
                self._q[name] = query

    def __getitem__(self, name: str) -> str:
        return self._q[name].sql

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._q)

    def __len__(self) -> int:
        return len(self._q)

    def describe(self, name: str) -> str:
        return self._q[name].description
