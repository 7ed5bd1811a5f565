"""What a log line is about: while a run is held, every line logged in its task (the worker's, a provider's,
a tool's) carries the run's id, bot and room, whether or not its own call said so.

A context variable, so two runs held at once in one process never lend each other their fields; the
process's logging (``appservice/logs.py``) reads it onto each record."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_ABOUT: ContextVar[Mapping[str, Any] | None] = ContextVar("summon_log_about", default=None)


@contextmanager
def about_run(run_id: int, bot: str, room: str | None) -> Iterator[None]:
    token = _ABOUT.set({"run": run_id, "bot": bot, "room": room})
    try:
        yield
    finally:
        _ABOUT.reset(token)


def about() -> Mapping[str, Any]:
    """The fields of the run this task is working on (empty when none)."""
    return _ABOUT.get() or {}
