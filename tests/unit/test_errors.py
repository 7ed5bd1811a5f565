"""One error tree: every exception class summon defines (under ``engine/`` and ``appservice/``) is a
``SummonError``, and the tree drawn in ``engine/errors.py`` names every class it holds."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from types import ModuleType

import pytest

import appservice
import engine
from engine import errors
from engine.errors import SummonError


def _modules() -> list[ModuleType]:
    found = []
    for package in (engine, appservice):
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}."):
            if info.name.endswith("__main__"):
                continue
            found.append(importlib.import_module(info.name))
    return found


def _exception_classes() -> list[type[BaseException]]:
    classes: dict[str, type[BaseException]] = {}
    for module in _modules():
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == module.__name__:
                classes[f"{value.__module__}.{value.__qualname__}"] = value
    return [classes[name] for name in sorted(classes)]


EXCEPTIONS = _exception_classes()


def test_the_walk_finds_the_exceptions_it_should() -> None:
    names = {cls.__name__ for cls in EXCEPTIONS}
    assert {"SummonError", "StoreError", "LeaseLost", "AudienceError", "GrammarError", "ModuleLoadError"} <= names


@pytest.mark.parametrize("cls", EXCEPTIONS, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_every_exception_is_in_the_tree(cls: type[BaseException]) -> None:
    assert issubclass(cls, SummonError), f"{cls.__module__}.{cls.__qualname__} is outside the error tree"


def test_the_drawn_tree_names_every_class_in_it() -> None:
    drawn = errors.__doc__ or ""
    for name, value in inspect.getmembers(errors, inspect.isclass):
        if issubclass(value, BaseException) and value.__module__ == errors.__name__:
            assert re.search(rf"^\s*(?:[│└├─ ]*)?{name}(?:\s|$)", drawn, re.MULTILINE), f"{name} is not drawn"


def test_each_surface_keeps_its_own_errors_under_surface_error() -> None:
    # The engine names no surface: the Matrix, desk and door errors live with their surfaces, under the one
    # tree's SurfaceError, and engine/errors.py defines none of them.
    from appservice.desk.errors import RequestRefused
    from appservice.door.errors import GrantRefused
    from appservice.matrix.errors import MatrixError, NotLeft
    from appservice.members.errors import CharterError, CharterRefused, CharterUnreadable
    from engine.errors import SurfaceError

    for cls in (MatrixError, NotLeft, RequestRefused, GrantRefused, CharterError, CharterRefused, CharterUnreadable):
        assert issubclass(cls, SurfaceError), cls
        assert not hasattr(errors, cls.__name__), f"engine/errors.py still defines {cls.__name__}"
