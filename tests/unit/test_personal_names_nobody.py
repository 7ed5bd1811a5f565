"""A personal tool never mentions the asker (SPEC §8): not in engine/tools/personal.py, not in the named
queries it runs, not in the SQL functions the tools role may call. The obvious fix for "the tool filtered on
the asker" was to pass the subject instead, and the next personal tool anybody wrote would have reached for
whatever was in scope; this fails the moment one does."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from engine.store.queries import SQL_DIR, Queries

ROOT = Path(__file__).resolve().parents[2]
PERSONAL = ROOT / "engine" / "tools" / "personal.py"
# The audience reader lives in the same module but is not a personal tool: the engine hands it an account.
NOT_PERSONAL = {"site_classes"}
# Who asked, who sent, or any person's id at all: a personal tool holds none of them.
FORBIDDEN = re.compile(r"asked_?by|asker|sender|user_?id|mxid", re.IGNORECASE)
# The one SQL function that reads the run's asker (for a rooms run, the person being answered).
RESOLVER = "agent_subject_v1"


def mentions(tree: ast.AST) -> list[str]:
    """Every identifier and string in ``tree`` that names the asker or a person."""
    found: list[str] = []
    for node in ast.walk(tree):
        words: list[str] = []
        if isinstance(node, ast.Name):
            words = [node.id]
        elif isinstance(node, ast.arg):
            words = [node.arg]
        elif isinstance(node, ast.Attribute):
            words = [node.attr]
        elif isinstance(node, ast.keyword) and node.arg:
            words = [node.arg]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            words = [node.value]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            words = [node.name]
        found.extend(word for word in words if FORBIDDEN.search(word))
    return found


def personal_functions(source: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [node for node in ast.parse(source).body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name not in NOT_PERSONAL]


PEOPLE = ROOT / "engine" / "store" / "people.py"


def store_calls(functions: list[ast.FunctionDef | ast.AsyncFunctionDef]) -> set[str]:
    """The ``….people.<method>`` calls the functions make on the store."""
    return {node.func.attr for function in functions for node in ast.walk(function)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "people"}


def used_queries(functions: list[ast.FunctionDef | ast.AsyncFunctionDef], names: set[str]) -> set[str]:
    """The named queries those store calls run (read off engine/store/people.py)."""
    methods = {node.name: node for node in ast.walk(ast.parse(PEOPLE.read_text(encoding="utf-8")))
               if isinstance(node, ast.AsyncFunctionDef)}
    called = store_calls(functions)
    assert called <= set(methods), f"unknown store calls: {called - set(methods)}"
    return {node.value for name in called for node in ast.walk(methods[name])
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names}


def test_the_detector_finds_an_asker_wherever_it_hides() -> None:
    for line in ("who = run.asked_by", "who = asker", "f(sender=x)", 'q = "SELECT asked_by FROM agent_runs"',
                 "def tool(run, args, user_id): ...", "async def for_the_asker(): ..."):
        source = f"async def tool(run, args):\n    {line}\n" if not line.startswith(("def", "async")) else line
        assert mentions(ast.parse(source)), line
    assert not mentions(ast.parse("async def tool(run, args):\n    return run.id\n"))


def test_no_personal_tool_mentions_the_asker() -> None:
    functions = personal_functions(PERSONAL.read_text(encoding="utf-8"))
    assert {"make_about_me", "make_raise_ticket"} <= {f.name for f in functions}
    for function in functions:
        assert mentions(function) == [], f"{function.name} mentions a person: {mentions(function)}"


def test_the_queries_a_personal_tool_runs_name_nobody() -> None:
    queries = Queries()
    used = used_queries(personal_functions(PERSONAL.read_text(encoding="utf-8")), set(queries))
    assert {"personal_as_tools", "personal_become", "personal_about_me", "personal_raise_ticket"} <= used
    for name in used:
        assert not FORBIDDEN.search(queries[name]), f"query {name} mentions a person"


_FUNCTION = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+(\w+)\s*\((.*?)\)(.*?)\$\$(.*?)\$\$", re.S | re.I)
_GRANTED = re.compile(r"GRANT\s+EXECUTE\s+ON\s+FUNCTION\s+(.*?)\s+TO\s+summon_tools", re.S | re.I)
_REVOKED = re.compile(r"REVOKE\s+EXECUTE\s+ON\s+FUNCTION\s+(.*?)\s+FROM\s+summon_tools", re.S | re.I)


def test_the_sql_the_tools_role_may_call_names_nobody() -> None:
    """Every function a migration grants the tools role: its body never reads the asker (nor a sender),
    and its arguments are the run and a ticket's words at most — never a person."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted((SQL_DIR / "migrations").glob("*.sql")))
    bodies = {name: (args, body) for name, args, _, body in _FUNCTION.findall(text)}
    def functions(found: list[str]) -> set[str]:
        return {re.sub(r"\(.*", "", item).strip() for grant in found for item in re.split(r",\s*(?![^()]*\))", grant)}

    granted = functions(_GRANTED.findall(text)) - functions(_REVOKED.findall(text))
    assert {"about_me_v1", "agent_raise_ticket_v1"} <= granted
    assert "agent_become_v1" not in granted  # the engine becomes the run before it takes the tools role (0061)
    assert RESOLVER not in granted
    # pgvector's own functions a recall reads with (a vector from its text, the cosine distance): the extension's,
    # taking vectors only.
    extension = {"public.vector_in", "public.vector_out", "public.cosine_distance"}
    assert granted & extension == extension
    for name in granted - extension:
        args, body = bodies[name]
        assert not re.search(r"asked_?by|asker|sender", body, re.I), f"{name} reads the asker"
        names = {part.split()[0] for part in args.split(",") if part.strip()}
        assert names <= {"run", "subject", "body"}, f"{name} takes {args!r}: a personal function takes no person"
