"""The run as a tool sees it: which run, which bot, where — deliberately no asker and no subject. A module of
its own, importing nothing, so a code tool's process (``engine/tools/code_process.py``) starts without the
engine's content models."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunRef:
    """A run as a tool sees it: which run, which bot, where. Deliberately no asker and no subject."""

    id: int
    bot: str
    surface: str
    place: str | None = None
    thread: str | None = None
