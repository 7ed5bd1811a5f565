"""The compiled content, as the engine reads it: immutable mappings in name order."""

from __future__ import annotations

import re
import types
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from engine.content.bots import ALL, Bot
from engine.content.parts import Command, Skill, Tool
from engine.content.strings import Strings
from engine.core.messages import ToolSpec

T = TypeVar("T")


def _empty() -> Mapping[str, object]:
    return types.MappingProxyType({})


def _ordered(items: Iterable[T], key: str) -> Mapping[str, T]:
    listed = sorted(items, key=lambda item: str(getattr(item, key)))
    return types.MappingProxyType({str(getattr(item, key)): item for item in listed})


_FRONT = re.compile(r"\A---\n(.*?)\n---[ \t]*(?:\n|\Z)", re.S)
_TITLE_KEY = re.compile(r"^title:[ \t]*(.+?)[ \t]*$", re.M)
_HEADING = re.compile(r"^#[ \t]+(.+?)[ \t#]*$", re.M)


@dataclass(frozen=True)
class Doc:
    """A page of ``content/docs/`` (markdown): what a bot's ``search_site`` finds. ``path`` is relative
    to the content folder (``docs/using-the-bots.md``); the title is the front matter's ``title:``, else the first ``# heading``, else the
    file's name."""

    path: str
    title: str
    body: str

    @classmethod
    def of(cls, path: str, text: str) -> Doc:
        text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
        title = None
        front = _FRONT.match(text)
        if front is not None:
            text = text[front.end():]
            key = _TITLE_KEY.search(front.group(1))
            title = key.group(1).strip("'\"") if key else None
        heading = _HEADING.search(text)
        if title is None and heading is not None:
            title = heading.group(1)
        stem = path.rsplit("/", 1)[-1].removesuffix(".md")
        return cls(path, title or stem.replace("-", " ").replace("_", " ").capitalize(), text.strip())


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
    # content/docs/, by path: not compiled (free prose), carried so a publish can index it for search.
    docs: Mapping[str, Doc] = field(default_factory=_empty)  # type: ignore[arg-type]
    # The built-ins the deployment's surfaces bring: name → (its spec, the surface it is offered on).
    surface_tools: Mapping[str, tuple[ToolSpec, str]] = field(default_factory=_empty)  # type: ignore[arg-type]

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
        docs: Iterable[Doc] = (),
        surface_tools: Mapping[str, tuple[ToolSpec, str]] | None = None,
    ) -> Registry:
        return cls(
            server_name=server_name,
            bots=_ordered(bots, "slug"),
            skills=_ordered(skills, "name"),
            tools=_ordered(tools, "name"),
            commands=_ordered(commands, "name"),
            strings=strings or Strings(),
            kit_bots=_ordered(kit_bots, "slug"),
            docs=_ordered(docs, "path"),
            surface_tools=types.MappingProxyType(dict(surface_tools or {})),
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
