"""What each surface brings to content, registered at the composition root: the compile reads it and names
no surface itself.

A surface (``Kind``) says its name, the bot-file keys it adds and the rules it holds a bot to, the built-in
tools it provides (offered only on it), the sections of ``strings.md`` it reads, whether content commands
are offered on it, whether a content tool may say ``needs: <it>``, and the bare ``hears:`` words that wake a
bot on it. ``Kinds`` is the set the deployment runs, in the order an author is told them; the first is where
a bot with no ``surfaces:`` is. Plain data and pure functions: nothing here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Annotated, Any, Generic, Literal, TypeVar, cast

from pydantic import AfterValidator, BaseModel, create_model

from engine.content.base import unique
from engine.core.messages import ToolSpec

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

# A rule's way to refuse: the keys it is about (reported at the first of them this file set) and the words.
Refuse = Callable[[tuple[str, ...], str], None]
# A rule a surface holds a bot to once it is whole (after ``extends:``): its values by field name (its
# ``surfaces`` among them) and the way to refuse.
Rule = Callable[[Mapping[str, Any], Refuse], None]


@dataclass(frozen=True)
class Key(Generic[T]):
    """A bot-file key a surface adds: its name, its pydantic type and its value when not written. A surface
    reads a compiled bot's value with ``key.of(bot)``."""

    name: str
    annotation: Any
    default: T

    def of(self, bot: object) -> T:
        return cast(T, getattr(bot, self.name, self.default))


@dataclass(frozen=True)
class Pictures:
    """Where a surface already holds pictures: a bot's ``avatar:`` may name one by its uri (taken as it is)
    instead of an image file under content/. ``uri`` is a regular expression a whole uri matches; ``said`` is
    how an author is told it ("an mxc:// uri")."""

    uri: str
    said: str

    def hold(self, value: str) -> bool:
        return re.fullmatch(self.uri, value) is not None


@dataclass(frozen=True)
class Kind:
    name: str
    keys: tuple[Key[Any], ...] = ()
    rules: tuple[Rule, ...] = ()
    tools: tuple[ToolSpec, ...] = ()  # built-ins it provides, offered only on it (their runtime: its own)
    strings: Mapping[str, Mapping[str, tuple[str, ...]]] = field(default_factory=lambda: MappingProxyType({}))
    commands: bool = False  # content commands are offered on it
    needed: bool = False  # a content tool may say ``needs: <name>`` (offered only here)
    triggers: tuple[str, ...] = ()  # bare ``hears:`` words that wake a bot on it
    events: tuple[str, ...] = ()  # what it raises that ``hears: - event: <name>`` wakes on
    called: str = ""  # what an author calls it where its events are listed ("Matrix"); its name if not said
    pictures: Pictures | None = None  # the uris of pictures it holds, which an ``avatar:`` may name


@dataclass(frozen=True, eq=False)
class Kinds:
    kinds: tuple[Kind, ...]
    _made: dict[str, type[BaseModel]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not self.kinds:
            raise ValueError("a deployment runs at least one surface")
        names = [kind.name for kind in self.kinds]
        if len(set(names)) != len(names):
            raise ValueError(f"a surface is registered twice: {names}")
        keys = [key.name for kind in self.kinds for key in kind.keys]
        tools = [spec.name for kind in self.kinds for spec in kind.tools]
        sections = [name for kind in self.kinds for name in kind.strings]
        for what, listed in (("bot-file key", keys), ("built-in tool", tools), ("strings section", sections)):
            twice = sorted({name for name in listed if listed.count(name) > 1})
            if twice:
                raise ValueError(f"two surfaces bring the same {what}: {', '.join(twice)}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(kind.name for kind in self.kinds)

    @property
    def default(self) -> str:
        return self.kinds[0].name

    def get(self, name: str) -> Kind | None:
        return next((kind for kind in self.kinds if kind.name == name), None)

    @property
    def commanded(self) -> tuple[str, ...]:
        """Where content commands are offered."""
        return tuple(kind.name for kind in self.kinds if kind.commands)

    @property
    def needed(self) -> tuple[str, ...]:
        return tuple(kind.name for kind in self.kinds if kind.needed)

    @property
    def triggers(self) -> tuple[str, ...]:
        return tuple(word for kind in self.kinds for word in kind.triggers)

    @property
    def events(self) -> Mapping[str, tuple[str, ...]]:
        """The events each surface raises, by what an author calls it."""
        return {kind.called or kind.name: kind.events for kind in self.kinds if kind.events}

    def holds_picture(self, uri: str) -> bool:
        """Some surface holds the picture at ``uri`` (an ``avatar:`` may name it)."""
        return any(kind.pictures.hold(uri) for kind in self.kinds if kind.pictures is not None)

    @property
    def pictures_said(self) -> tuple[str, ...]:
        return tuple(kind.pictures.said for kind in self.kinds if kind.pictures is not None)

    def context(self) -> dict[str, object]:
        """What the front matter's validators are told of the surfaces (``hears:`` words and events)."""
        return {"triggers": self.triggers, "events": self.events}

    @cached_property
    def tools(self) -> Mapping[str, tuple[ToolSpec, str]]:
        """Every surface's built-ins: name → (its spec, the surface it needs)."""
        return MappingProxyType({spec.name: (spec, kind.name) for kind in self.kinds for spec in kind.tools})

    @cached_property
    def sections(self) -> Mapping[str, Mapping[str, tuple[str, ...]]]:
        return MappingProxyType({name: keys for kind in self.kinds for name, keys in kind.strings.items()})

    def rules(self) -> tuple[Rule, ...]:
        return tuple(rule for kind in self.kinds for rule in kind.rules)

    def keys(self) -> tuple[Key[Any], ...]:
        return tuple(key for kind in self.kinds for key in kind.keys)

    def one_of(self, names: tuple[str, ...]) -> Any:
        """The pydantic type of one of ``names`` (an author who writes another is told them all); with none
        registered, nothing but leaving the key out is accepted."""
        return Literal.__getitem__(names) if names else type(None)

    def model(self, model: type[M], fields: Callable[[], Mapping[str, tuple[Any, Any]]]) -> type[M]:
        """``model`` with ``fields()`` (name → (type, default)) added or replaced — the front matter as this
        deployment's surfaces let an author write it — made once per deployment."""
        made = self._made.get(model.__qualname__)
        if made is None:
            made = create_model(model.__name__, __base__=model, __module__=model.__module__,
                                **cast(dict[str, Any], dict(fields())))
            made.__doc__ = model.__doc__
            self._made[model.__qualname__] = made
        return cast(type[M], made)

    def surfaces_field(self, empty: str) -> tuple[Any, Any]:
        """A ``surfaces:`` list of this deployment's names, none twice, never empty (``empty``: the words)."""

        def some(values: tuple[str, ...]) -> tuple[str, ...]:
            if not values:
                raise ValueError(empty)
            return unique(values)

        return Annotated[tuple[self.one_of(self.names), ...], AfterValidator(some)], (self.default,)  # type: ignore[misc]
