"""What a run may use (SPEC §3, §8). Pure: the offered set is worked out from the run, its steps, the
compiled content and what is known about the asker — no I/O.

A tool is called with a ``RunRef``: where the run is and which run it is, and **no person**. A tool
about a person resolves whom it answers for in SQL from the run id (``agent_subject(run)``), so nothing
in the worker carries a user id a tool could pass wrongly.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunRef:
    """A run as a tool sees it: which run, which bot, where. Deliberately no asker and no subject."""

    id: int
    bot: str
    surface: str
    room_id: str | None = None
    thread_root: str | None = None


class ToolError(Exception):
    """A tool's failure in words the model can act on (a bad argument, an API's 404, a denied URL).
    The worker hands the message back as the tool's result, marked as an error."""


# A tool as the worker runs it: the run (never a person) and the model's arguments → what the model reads.
ToolFn = Callable[[RunRef, dict[str, Any]], Awaitable[str]]
