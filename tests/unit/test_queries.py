"""SQL lives in sql/queries.sql, by name, each with a one-line description; none lives in Python."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from engine.store.queries import SQL_DIR, Queries, parse_queries

ROOT = Path(__file__).resolve().parents[2]

TWO = """\
-- A header comment before any query is not a query.

-- name: get_room
-- The room's row.
SELECT * FROM rooms WHERE room_id = $1;

-- name: mark_room_left
-- We left the room.
UPDATE rooms
   SET left_at = now()
 WHERE room_id = $1;
"""


def test_parse_queries_names_descriptions_and_statements() -> None:
    found = parse_queries(TWO)
    assert list(found) == ["get_room", "mark_room_left"]
    assert found["get_room"].name == "get_room"
    assert found["get_room"].description == "The room's row."
    assert found["get_room"].sql == "SELECT * FROM rooms WHERE room_id = $1"
    assert found["mark_room_left"].description == "We left the room."
    assert found["mark_room_left"].sql == "UPDATE rooms\n   SET left_at = now()\n WHERE room_id = $1"


def test_a_query_without_description_has_an_empty_one() -> None:
    found = parse_queries("-- name: ping\nSELECT 1;\n")
    assert found["ping"].description == ""
    assert found["ping"].sql == "SELECT 1"


def test_only_the_first_comment_line_is_the_description() -> None:
    found = parse_queries("-- name: ping\n-- Says hello.\n-- (a second comment stays with the SQL)\nSELECT 1;\n")
    assert found["ping"].description == "Says hello."
    assert found["ping"].sql.endswith("SELECT 1")


def test_a_text_without_names_has_no_queries() -> None:
    assert parse_queries("-- just a comment\n") == {}


def test_a_duplicate_name_is_refused() -> None:
    with pytest.raises(ValueError, match="'get_room' is defined twice"):
        parse_queries(TWO + "\n-- name: get_room\n-- Again.\nSELECT 2;\n")


@pytest.mark.parametrize(
    "text",
    [
        "-- name: empty\n-- Nothing follows.\n",
        "-- name: empty\n-- Only a semicolon.\n;\n\n-- name: ok\nSELECT 1;\n",
        "-- name: empty\n-- Blank lines only.\n\n   \n-- name: ok\nSELECT 1;\n",
    ],
    ids=["at_the_end", "only_semicolon", "blank_lines"],
)
def test_an_empty_statement_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="'empty' has no statement"):
        parse_queries(text)


def test_the_real_queries_load_each_with_a_one_line_description() -> None:
    queries = Queries()
    files = [SQL_DIR / "queries.sql", *sorted((SQL_DIR / "queries").glob("*.sql"))]
    declared = [name for path in files
                for name in re.findall(r"^--\s*name:\s*(\S+)\s*$", path.read_text(encoding="utf-8"), flags=re.MULTILINE)]
    assert declared, "sql/queries.sql declares no query"
    assert list(queries) == declared, "every declared name loads, in order"
    assert len(queries) == len(declared)
    for name in queries:
        description = queries.describe(name)
        assert description, f"{name} has no description"
        assert "\n" not in description
        statement = queries[name]
        assert statement.strip(), f"{name} has no statement"
        assert not statement.rstrip().endswith(";"), f"{name}: the loader strips the final semicolon"


def test_the_real_queries_are_looked_up_by_name() -> None:
    queries = Queries()
    assert "INSERT INTO as_transactions" in queries["record_transaction"]
    with pytest.raises(KeyError):
        queries["no_such_query"]


def test_queries_reads_another_file(tmp_path: Path) -> None:
    path = tmp_path / "q.sql"
    path.write_text(TWO, encoding="utf-8")
    queries = Queries(path)
    assert dict(queries) == {
        "get_room": "SELECT * FROM rooms WHERE room_id = $1",
        "mark_room_left": "UPDATE rooms\n   SET left_at = now()\n WHERE room_id = $1",
    }


def test_a_family_file_adds_its_queries_and_may_not_redefine_one(tmp_path: Path) -> None:
    (tmp_path / "queries.sql").write_text(TWO, encoding="utf-8")
    (tmp_path / "queries").mkdir()
    (tmp_path / "queries" / "extra.sql").write_text("-- name: ping\n-- Says hello.\nSELECT 1;\n", encoding="utf-8")
    assert list(Queries(tmp_path / "queries.sql")) == ["get_room", "mark_room_left", "ping"]
    (tmp_path / "queries" / "more.sql").write_text("-- name: get_room\n-- Again.\nSELECT 2;\n", encoding="utf-8")
    with pytest.raises(ValueError, match="'get_room' is defined twice"):
        Queries(tmp_path / "queries.sql")


# --- the rule: no SQL in Python ------------------------------------------------------------------------

# A string that *starts* like a statement (how SQL appears in code), upper case so log lines and prose
# ("Update the room") do not trip it.
SQL_START = re.compile(
    r"^\s*(SELECT\s|INSERT\s+INTO\s|UPDATE\s+\w+\s+SET\s|DELETE\s+FROM\s|CREATE\s+(TABLE|INDEX|FUNCTION|"
    r"TRIGGER)\s|ALTER\s+TABLE\s|DROP\s+TABLE\s|WITH\s+\w+\s+AS\s*\(|UPDATE\s)"
)


def sql_strings(source: str) -> list[str]:
    return [
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL_START.match(node.value)
    ]


def test_the_detector_finds_sql_in_python() -> None:
    source = (
        'a = "SELECT * FROM rooms"\n'
        "b = f\"UPDATE runs SET x = {y}\"\n"
        "c = '''\n    DELETE FROM agent_steps'''\n"
        'd = "INSERT INTO t VALUES (1)"\n'
        'e = "CREATE TABLE t (x int)"\n'
        'f = "Update the room when asked."\n'
        'g = "the SELECT * FROM docs explain"\n'
    )
    assert len(sql_strings(source)) == 5


PYTHON = sorted(p for top in ("engine", "appservice") for p in (ROOT / top).rglob("*.py"))


def test_there_is_python_to_check() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in PYTHON}
    assert {"engine/core/loop.py", "engine/run/worker.py", "appservice/config.py"} <= names


@pytest.mark.parametrize("module", PYTHON, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_sql_in_python(module: Path) -> None:
    source = module.read_text(encoding="utf-8")
    assert sql_strings(source) == [], f"{module.name}: SQL belongs in sql/queries.sql"
    quoted = re.findall(r"""["'](SELECT |INSERT INTO|UPDATE |DELETE FROM|CREATE TABLE)""", source)
    assert quoted == [], f"{module.name}: SQL belongs in sql/queries.sql"
