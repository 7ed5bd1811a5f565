"""The compiled content: strict, frozen models, and the Registry that holds them.

``BotFile`` is exactly what a bot file's front matter may say (so an unknown key is refused and
the allowed keys can be named); ``Bot`` is that plus what the compile adds (slug, prompt, where it
came from). Each field is documented where the author meets it: SPEC §3.
"""

from __future__ import annotations

import re
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    StrictFloat,
    StrictInt,
    StrictStr,
)

from engine.content.audience import Audience, parse_audience

SLUG = re.compile(r"[a-z0-9][a-z0-9_-]*")
# The puppet a bot answers as: @bot_<slug>:<server> (SPEC, opening section).
PUPPET_PREFIX = "bot_"

Surface = Literal["rooms", "desk", "voice"]
SURFACES: tuple[Surface, ...] = ("rooms", "desk", "voice")

# What wakes a bot. Only a mention for now; schedules and events are known and refused until the
# engine acts on them, because a trigger the system would not act on must not compile (SPEC §3).
Trigger = Literal["mention"]
KNOWN_TRIGGERS = ("mention", "schedule", "event")


@dataclass(frozen=True)
class CompileError:
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def _trigger(value: object) -> Trigger:
    if value == "mention":
        return "mention"
    if isinstance(value, dict):
        named = [key for key in value if key in KNOWN_TRIGGERS]
        if named:
            raise ValueError(f"trigger '{named[0]}' is not supported yet")
        raise ValueError(f"a trigger names one of {', '.join(KNOWN_TRIGGERS)}, not {sorted(map(str, value))}")
    if isinstance(value, str) and value in KNOWN_TRIGGERS:
        raise ValueError(f"trigger '{value}' is not supported yet")
    raise ValueError(f"unknown trigger {value!r} (known: {', '.join(KNOWN_TRIGGERS)})")


def _model(value: object) -> str | dict[str, str]:
    if isinstance(value, str):
        if not value.strip():
            raise ValueError("a model name cannot be empty")
        return value.strip()
    if isinstance(value, dict):
        if not value:
            raise ValueError("name a model for at least one provider, or leave the key out")
        for provider, name in value.items():
            if not isinstance(provider, str) or not isinstance(name, str) or not name.strip():
                raise ValueError(
                    f"each provider names one model, like 'openai: gpt-4o-mini', not {provider}: {name!r}"
                )
        return {provider: name.strip() for provider, name in value.items()}
    raise ValueError(f"a model is a name, or a mapping of provider to name, not {value!r}")


def _unique(values: tuple[str, ...]) -> tuple[str, ...]:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"'{value}' is listed twice")
        seen.add(value)
    return values


def _surfaces(values: tuple[Surface, ...]) -> tuple[Surface, ...]:
    if not values:
        raise ValueError("a bot needs at least one surface (rooms, desk or voice)")
    _unique(values)
    return values


def _plain(value: str) -> str:
    if not value.strip():
        raise ValueError("cannot be empty")
    return value.strip()


def _serialize_audience(audience: Audience) -> str | list[str]:
    return audience.expression()


AudienceField = Annotated[Audience, PlainValidator(parse_audience), PlainSerializer(_serialize_audience)]
TriggerField = Annotated[Trigger, PlainValidator(_trigger)]
ModelField = Annotated[str | dict[str, str], PlainValidator(_model)]
Text = Annotated[StrictStr, AfterValidator(_plain)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Limits(Strict):
    """What one run of the bot may use before it ends."""

    steps: Annotated[StrictInt, Field(gt=0)] = 12
    spend: Annotated[StrictFloat, Field(ge=0, allow_inf_nan=False)] = 0.50  # USD
    minutes: Annotated[StrictFloat, Field(gt=0, allow_inf_nan=False)] = 10.0


class BotFile(Strict):
    """The front matter of ``content/bots/<slug>.md``: every key an author may write."""

    name: Text
    glyph: Text | None = None
    surfaces: Annotated[tuple[Surface, ...], AfterValidator(_surfaces)] = ("rooms",)
    audience: AudienceField | None = Field(default=None, alias="for")
    serves: AudienceField | None = None
    hears: Annotated[tuple[TriggerField, ...], AfterValidator(_unique)] = ("mention",)
    limits: Limits = Limits()
    model: ModelField | None = None


class Bot(BotFile):
    """A compiled bot: its front matter, its prompt (the body), and where it came from."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_name=True, validate_by_alias=True)

    slug: str
    user_id: str
    prompt: str
    source_path: str


@dataclass(frozen=True)
class Registry:
    """Every compiled bot by slug; iterating yields bots in slug order."""

    server_name: str
    bots: Mapping[str, Bot] = field(default_factory=lambda: types.MappingProxyType({}))

    @classmethod
    def of(cls, server_name: str, bots: list[Bot]) -> Registry:
        ordered = {bot.slug: bot for bot in sorted(bots, key=lambda bot: bot.slug)}
        return cls(server_name=server_name, bots=types.MappingProxyType(ordered))

    def get(self, slug: str) -> Bot | None:
        return self.bots.get(slug)

    def __iter__(self) -> Iterator[Bot]:
        return iter(self.bots.values())

    def __len__(self) -> int:
        return len(self.bots)

    def __contains__(self, slug: object) -> bool:
        return slug in self.bots


def bot_fields(front: BotFile) -> dict[str, Any]:
    """The front matter's values by field name, ready to build a ``Bot`` from."""
    return {name: getattr(front, name) for name in BotFile.model_fields}
