"""Every file the code reads by path ships in the wheel: each file under engine/ and appservice/ that is not
Python is named by pyproject's ``[tool.setuptools.package-data]`` (tests/e2e/test_installed.py builds and runs
the wheel; this says in milliseconds which file a new pattern must name)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DATA: dict[str, list[str]] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
    "package-data"]


def data_files(package: str) -> set[Path]:
    return {p for p in (ROOT / package).rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts}


def shipped(package: str) -> set[Path]:
    return {p for pattern in PACKAGE_DATA.get(package, []) for p in (ROOT / package).glob(pattern) if p.is_file()}


def test_every_data_file_of_the_packages_ships_in_the_wheel() -> None:
    for package in ("engine", "appservice"):
        unshipped = sorted(str(p.relative_to(ROOT)) for p in data_files(package) - shipped(package))
        assert unshipped == [], f"not in pyproject's package-data, so missing from an installed summon: {unshipped}"


def test_the_sql_is_among_them() -> None:
    sql = {p.relative_to(ROOT / "engine").as_posix() for p in shipped("engine")}
    assert "store/sql/schema.txt" in sql
    assert "store/sql/queries/migrations.sql" in sql
    assert any(name.startswith("store/sql/migrations/0001_") for name in sql)
