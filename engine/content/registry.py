"""The compiled content, as the engine reads it: immutable mappings in name order."""

from __future__ import annotations

import types
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from engine.content.bots import ALL, Bot
from engine.content.parts import Command, Skill, Tool
from engine.content.strings import Strings

T = TypeVar("T")


def _empty() -> Mapping[str, object]:
    return types.MappingProxyType({})


def _ordered(items: Iterable[T], key: str) -> Mapping[str, T]:
    listed = sorted(items, key=lambda item: str(getattr(item, key)))
    return types.MappingProxyType({str(getattr(item, key)): item for item in listed})


@dataclass(frozen=True)
class Registry:
    """Every compiled thing by name. ``bots`` are the live ones (the site's); iterating yields them
    in slug order. ``kit_bots`` are the kit's own, compiled but off: a site turns one on by writing
    a bot that ``extends:`` it."""

    server_name: str
    bots: Mapping[str, Bot] = field(default_factory=_empty)  # type: ignore[arg-type]
    skills: Mapping[str, Skill] = field(default_factory=_empty)  # type: ignore[arg-type]
    tools: Mapping[str, Tool] = field(default_factory=_empty)  # type: ignore[arg-type]
    commands: Mapping[str, Command] = field(default_factory=_empty)  # type: ignore[arg-type]
    strings: Strings = field(default_factory=Strings)
    kit_bots: Mapping[str, Bot] = field(default_factory=_empty)  # type: ignore[arg-type]

    @classmethod
    def of(
        cls,
        server_name: str,
        bots: Iterable[Bot],
        *,
        skills: Iterable[Skill] = (),
        tools: Iterable[Tool] = (),
        commands: Iterable[Command] = (),
        strings: Strings | None = None,
        kit_bots: Iterable[Bot] = (),
    ) -> Registry:
        return cls(
            server_name=server_name,
            bots=_ordered(bots, "slug"),
            skills=_ordered(skills, "name"),
            tools=_ordered(tools, "name"),
            commands=_ordered(commands, "name"),
            strings=strings or Strings(),
            kit_bots=_ordered(kit_bots, "slug"),
        )

    def get(self, slug: str) -> Bot | None:
        return self.bots.get(slug)

    def skills_of(self, bot: Bot) -> tuple[Skill, ...]:
        """The skills a bot knows: ``all`` is every published skill, including one written later."""
        if bot.skills == ALL:
            return tuple(self.skills.values())
        return tuple(self.skills[name] for name in bot.skills if name in self.skills)

    def __iter__(self) -> Iterator[Bot]:
        return iter(self.bots.values())

    def __len__(self) -> int:
        return len(self.bots)

    def __contains__(self, slug: object) -> bool:
        return slug in self.bots
