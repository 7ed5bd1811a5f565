"""Load the named statements once: ``sql/queries/<family>.sql`` next to this module (``engine/store/sql/``, shipped
in the package), one file per table family, each a list of
``-- name: x`` blocks with a one-line description, looked up by name. A name defined twice (in one file
or two) is refused. No SQL strings live in Python, and nothing is built by formatting values in.

A shape several tables share is written once, as a ``-- template: x`` block (its ``{param}`` holes named), and a
query made from it says so as its statement: ``-- from template: x(param=value, ...)``. A value is a table's name
(an identifier, put in as it is), another template's name (its text put in: a fragment), or nothing (the hole
left empty). A template is no query; it is expanded when every file is read, so it may live in another file."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

SQL_DIR = Path(__file__).resolve().parent / "sql"
QUERIES_DIR = SQL_DIR / "queries"
_NAME = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$")
_TEMPLATE = re.compile(r"^--\s*template:\s*([a-z_][a-z0-9_]*)\s*$")
_FROM = re.compile(r"^--\s*from template:\s*([a-z_][a-z0-9_]*)\((.*)\)$")
_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")
_HOLE = re.compile(r"\{([a-z_][a-z0-9_]*)\}")


@dataclass(frozen=True)
class Query:
    name: str
    description: str
    sql: str


def parse_queries(text: str) -> dict[str, Query]:
    return parse(text)[0]


def parse(text: str) -> tuple[dict[str, Query], dict[str, Query]]:
    """The queries and the templates ``text`` declares (a query made from a template not yet expanded)."""
    found: dict[str, Query] = {}
    templates: dict[str, Query] = {}
    name: str | None = None
    template = False
    description = ""
    body: list[str] = []

    def close() -> None:
        if name is None:
            return
        sql = "\n".join(body).strip().rstrip(";").strip()
        kind = "template" if template else "query"
        if not sql:
            raise ValueError(f"{kind} {name!r} has no statement")
        into = templates if template else found
        if name in into:
            raise ValueError(f"{kind} {name!r} is defined twice")
        into[name] = Query(name, description, sql)

    for line in text.splitlines():
        m = _NAME.match(line) or _TEMPLATE.match(line)
        if m:
            close()
            name, description, body = m.group(1), "", []
            template = m.re is _TEMPLATE
        elif name is not None and not body and line.startswith("--") and not description:
            description = line.lstrip("-").strip()
        elif name is not None:
            body.append(line)
    close()
    return found, templates


def expand(query: Query, templates: Mapping[str, Query]) -> Query:
    """``query`` itself, or — when its statement is ``-- from template: x(...)`` (after any comment lines) —
    template ``x`` filled in."""
    lines = query.sql.splitlines()
    m = _FROM.match(lines[-1].strip())
    if m is not None and not all(line.lstrip().startswith("--") for line in lines):
        raise ValueError(f"query {query.name!r} is made from a template and has SQL of its own too")
    if m is None:
        return query
    template = templates.get(m.group(1))
    if template is None:
        raise ValueError(f"query {query.name!r} is made from {m.group(1)!r}, which no file declares")
    values: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in m.group(2).split(","))):
        key, sep, value = (s.strip() for s in part.partition("="))
        if not sep or not _IDENTIFIER.match(key) or (value and not _IDENTIFIER.match(value)):
            raise ValueError(f"query {query.name!r}: {part!r} is not param=name")
        values[key] = templates[value].sql if value in templates else value
    holes = set(_HOLE.findall(template.sql))
    if holes != set(values):
        raise ValueError(f"query {query.name!r}: template {template.name!r} has holes {sorted(holes)}, "
                         f"given {sorted(values)}")
    return Query(query.name, query.description, _HOLE.sub(lambda h: values[h.group(1)], template.sql).strip())


def query_files(*paths: Path) -> list[Path]:
    """The files ``paths`` name: a file as itself, a folder as its ``*.sql`` files in name order."""
    return [file for path in paths for file in (sorted(path.glob("*.sql")) if path.is_dir() else [path])]


class Queries(Mapping[str, str]):
    """``queries["claim_runs"]`` is the statement; ``queries.describe("claim_runs")`` says what it does.
    Read from ``paths`` (files, or folders of ``*.sql``): by default every family under ``sql/queries/``."""

    def __init__(self, *paths: Path) -> None:
        self._q: dict[str, Query] = {}
        self._file: dict[str, str] = {}
        templates: dict[str, Query] = {}
        for file in query_files(*(paths or (QUERIES_DIR,))):
            found, declared = parse(file.read_text(encoding="utf-8"))
            for name, query in found.items():
                if name in self._q:
                    raise ValueError(f"query {name!r} is defined twice ({self._file[name]} and {file.name})")
                self._q[name] = query
                self._file[name] = file.name
            for name, template in declared.items():
                if name in templates:
                    raise ValueError(f"template {name!r} is defined twice")
                templates[name] = template
        self._q = {name: expand(query, templates) for name, query in self._q.items()}

    def __getitem__(self, name: str) -> str:
        return self._q[name].sql

    def __iter__(self) -> Iterator[str]:
        return iter(self._q)

    def __len__(self) -> int:
        return len(self._q)

    def describe(self, name: str) -> str:
        return self._q[name].description
