"""SQL lives in engine/store/sql/queries/<family>.sql, by name, each with a one-line description; none lives in Python.
Only engine/store/ runs it: every named query is used there, and every name used there exists (the queries
only tests run live with the tests, in tests/sql/)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from engine.store.queries import QUERIES_DIR, Queries, parse_queries

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


def declared_in(*paths: Path) -> list[str]:
    files = [f for path in paths for f in (sorted(path.glob("*.sql")) if path.is_dir() else [path])]
    return [name for path in files
            for name in re.findall(r"^--\s*name:\s*(\S+)\s*$", path.read_text(encoding="utf-8"), flags=re.MULTILINE)]


def test_the_real_queries_load_each_with_a_one_line_description() -> None:
    queries = Queries()
    declared = declared_in(QUERIES_DIR)
    assert declared, "engine/store/sql/queries/ declares no query"
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


def test_a_folder_is_its_family_files_and_no_name_is_defined_twice(tmp_path: Path) -> None:
    (tmp_path / "a_rooms.sql").write_text(TWO, encoding="utf-8")
    (tmp_path / "b_extra.sql").write_text("-- name: ping\n-- Says hello.\nSELECT 1;\n", encoding="utf-8")
    assert list(Queries(tmp_path)) == ["get_room", "mark_room_left", "ping"]
    (tmp_path / "c_more.sql").write_text("-- name: get_room\n-- Again.\nSELECT 2;\n", encoding="utf-8")
    with pytest.raises(ValueError, match="'get_room' is defined twice"):
        Queries(tmp_path)


# --- every named query is used, and every name used exists ----------------------------------------------

STORE = ROOT / "engine" / "store"
RUNNERS = frozenset({"_all", "_one", "_value", "_run"})  # how a family calls a query (engine/store/base.py)
TEST_SQL = ROOT / "tests" / "sql"


def names_called(source: str) -> set[str]:
    """Query names a store module uses: the first argument of a family's runner, or ``q["…"]``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in RUNNERS
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.add(node.args[0].value)
        elif (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "q"
              and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
            found.add(node.slice.value)
    return found


def test_the_detector_finds_query_names() -> None:
    source = ('async def f(self):\n    await self._one("get_room", 1)\n    await self._run("mark", 2)\n'
              '    q["migration_lock"]\n    self.other("not_a_query")\n')
    assert names_called(source) == {"get_room", "mark", "migration_lock"}


def family_modules() -> list[Path]:
    """The store's modules, and each surface's own families (a module of its folder defining a ``Family``)."""
    theirs = [p for p in (ROOT / "appservice").rglob("*.py") if re.search(r"^class \w+\(Family\):", p.read_text(encoding="utf-8"), re.M)]
    return [*STORE.glob("*.py"), *theirs]


def test_the_surfaces_families_are_found_with_the_stores() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in family_modules()}
    assert {"engine/store/runs.py", "appservice/desk/tables.py", "appservice/door/tables.py"} <= names


def test_every_named_query_is_used_by_the_store_and_every_name_it_uses_exists() -> None:
    used = set().union(*(names_called(p.read_text(encoding="utf-8")) for p in family_modules()))
    declared = set(declared_in(QUERIES_DIR))
    assert used - declared == set(), f"the store runs queries nobody defined: {sorted(used - declared)}"
    assert declared - used == set(), f"queries nothing runs (a test's own belong in tests/sql/): {sorted(declared - used)}"


def test_every_test_query_is_used_by_a_test_and_none_shadows_the_stores() -> None:
    tests = set(declared_in(TEST_SQL))
    assert tests, "tests/sql declares no query"
    assert tests.isdisjoint(declared_in(QUERIES_DIR))
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "tests").rglob("*.py"))
    unused = {name for name in tests if f'"{name}"' not in source}
    assert unused == set(), f"test queries no test runs: {sorted(unused)}"


def test_only_the_store_imports_asyncpg() -> None:
    """asyncpg is imported under engine/store/ only (the composition root asks the store for its pool)."""
    offenders = []
    for path in PYTHON:
        if path.is_relative_to(STORE):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(name.split(".")[0] == "asyncpg" for name in names):
                offenders.append(path.relative_to(ROOT).as_posix())
    assert offenders == [], f"asyncpg imported outside engine/store/: {offenders}"


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
    assert sql_strings(source) == [], f"{module.name}: SQL belongs in engine/store/sql/queries/"
    quoted = re.findall(r"""["'](SELECT |INSERT INTO|UPDATE |DELETE FROM|CREATE TABLE)""", source)
    assert quoted == [], f"{module.name}: SQL belongs in engine/store/sql/queries/"


SHAPED = """\
-- template: take_due
-- Take what is due of a table.
SELECT q.id FROM {table} q WHERE q.due
{also}

-- template: not_held
-- A fragment.
 AND NOT q.held

-- name: take_runs
-- Take the due runs.
-- (a second comment line stays with the file)
-- from template: take_due(table=runs, also=not_held)

-- name: take_rows
-- Take the due rows.
-- from template: take_due(table=rows, also=)
"""


def test_a_query_made_from_a_template_is_the_template_filled_in(tmp_path: Path) -> None:
    (tmp_path / "a.sql").write_text(SHAPED, encoding="utf-8")
    queries = Queries(tmp_path)
    assert list(queries) == ["take_runs", "take_rows"], "a template is no query"
    assert queries["take_runs"] == "SELECT q.id FROM runs q WHERE q.due\nAND NOT q.held"
    assert queries["take_rows"] == "SELECT q.id FROM rows q WHERE q.due"
    assert queries.describe("take_runs") == "Take the due runs."


def test_a_template_may_live_in_another_file(tmp_path: Path) -> None:
    templates, uses = SHAPED.split("-- name: take_runs")
    (tmp_path / "b_templates.sql").write_text(templates, encoding="utf-8")
    (tmp_path / "a_uses.sql").write_text("-- name: take_runs" + uses, encoding="utf-8")
    assert Queries(tmp_path)["take_rows"] == "SELECT q.id FROM rows q WHERE q.due"


@pytest.mark.parametrize(("use", "refusal"), [
    ("take_nothing(table=rows, also=)", "which no file declares"),
    ("take_due(table=rows)", "has holes"),
    ("take_due(table=rows, also=, extra=x)", "has holes"),
    ("take_due(table=rows; DROP TABLE x, also=)", "is not param=name"),
    ("take_due(table='rows', also=)", "is not param=name"),
], ids=["unknown", "a_hole_unfilled", "a_value_for_no_hole", "not_an_identifier", "a_literal"])
def test_a_template_filled_in_wrongly_is_refused(tmp_path: Path, use: str, refusal: str) -> None:
    (tmp_path / "a.sql").write_text(SHAPED + f"\n-- name: bad\n-- Bad.\n-- from template: {use}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=refusal):
        Queries(tmp_path)


def test_a_query_made_from_a_template_has_no_sql_of_its_own(tmp_path: Path) -> None:
    (tmp_path / "a.sql").write_text(SHAPED + "\n-- name: bad\n-- Bad.\nSELECT 1\n-- from template: take_due(table=x, also=)\n",
                                    encoding="utf-8")
    with pytest.raises(ValueError, match="SQL of its own"):
        Queries(tmp_path)
