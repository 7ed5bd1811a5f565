"""What every content model shares: the strict frozen base, the error every refusal becomes, and the
small field types (a one-line text, a name, an audience) the files are written in."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, PlainSerializer, PlainValidator, StrictStr

from engine.content.audience import Audience, parse_audience
from engine.errors import ContentFault

# A file's name is the thing's name: a bot's slug, a skill's, a tool's, a command's.
SLUG = re.compile(r"[a-z0-9][a-z0-9_-]*")
# Where the kit's own files are reported: ``kit/bots/desk.md:3: …``.
KIT = "kit/"


@dataclass(frozen=True)
class CompileError:
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


class Strict(BaseModel):
    """Every content model: an unknown key is refused, nothing changes after the compile."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _plain(value: str) -> str:
    if not value.strip():
        raise ValueError("cannot be empty")
    return value.strip()


def _one_line(value: str) -> str:
    value = _plain(value)
    if "\n" in value:
        raise ValueError("must be one line")
    return value


def unique(values: tuple[Any, ...]) -> tuple[Any, ...]:
    seen: set[Any] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"'{value}' is listed twice")
        seen.add(value)
    return values


def _name(value: str) -> str:
    if not SLUG.fullmatch(value):
        raise ValueError(
            f"'{value}' is not a name: lowercase letters, digits, '-' and '_', starting with a letter or digit"
        )
    return value


def _serialize_audience(audience: Audience) -> str | list[str]:
    return audience.expression()


Text = Annotated[StrictStr, AfterValidator(_plain)]
Line = Annotated[StrictStr, AfterValidator(_one_line)]
Name = Annotated[StrictStr, AfterValidator(_name)]
Names = Annotated[tuple[Name, ...], AfterValidator(unique)]
AudienceField = Annotated[Audience, PlainValidator(parse_audience), PlainSerializer(_serialize_audience)]


def listed(names: Iterable[str]) -> str:
    """``a, b, c`` — or ``none`` — for naming what exists beside what was asked for."""
    names = list(names)
    return ", ".join(names) if names else "none"


class Refusal(ContentFault):
    """A validator's refusal that points below where it was raised: ``at`` is the key path (from
    the model being validated) of the entry the author should look at."""

    def __init__(self, message: str, *at: str | int) -> None:
        super().__init__(message)
        self.at = at
