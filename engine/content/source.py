"""One content file as the compile carries it between its two halves (reading, then linking), and
what the compile is told about the deployment."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from engine.content.grammar import Parsed
from engine.content.kinds import Kinds
from engine.content.openapi import Unavailable

Referenced = Mapping[str, "str | Unavailable"]


@dataclass(frozen=True)
class Settings:
    """What the compile is told about the deployment (all of it handed in; none of it looked up)."""

    server_name: str
    kinds: Kinds  # the surfaces this deployment runs, and what each brings
    referenced: Referenced
    zones: Collection[str] | None = None
    site_events: Collection[str] | None = None
    sealed_places: Collection[str] = ()
    puppet_prefix: str = "bot_"  # every bot's puppet is @<prefix><slug>:<server> (appservice.puppet_prefix)


@dataclass(frozen=True)
class File:
    """One content file taken apart and its front matter validated."""

    path: str  # as errors name it: ``bots/helper.md`` or ``kit/bots/desk.md``
    name: str  # the slug / skill / tool / command name (the file's name)
    kit: bool
    parsed: Parsed
    front: Any

    def line(self, *loc: str | int, key: bool = False) -> int:
        return self.parsed.line_of(loc, key=key)

    def body_line(self, index: int) -> int:
        """The file's line of the body's ``index``-th line (0-based)."""
        return self.parsed.closing_line + 1 + index
