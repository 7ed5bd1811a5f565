"""A bot file (``content/bots/<slug>.md``): every key an author may write, and the compiled Bot.

``BotFile`` is exactly the front matter (an unknown key is refused and the allowed ones named);
``Bot`` is what the compile makes of it — ``extends:`` resolved, the strings' endings resolved, the
prompt assembled — and keeps the file it came from so it can be written back (``engine.content.write``).
Each field is documented where the author meets it: SPEC §3 and docs/content.md.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    StrictFloat,
    StrictInt,
    StrictStr,
)

from engine.content.base import AudienceField, Names, Refusal, Strict, Text
from engine.content.hears import Hears
from engine.content.kinds import Kinds
from engine.core.limits import DEFAULT_LIMITS
from engine.core.memory import MEMORIES
from engine.core.messages import ENDINGS, Ending

WINDOWS = ("minute", "hour", "day", "week", "month")
ALL = "all"
# A uri: a scheme, then "://" (a picture a surface holds is named by one; anything else is a path).
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://\S*")

Money = Annotated[StrictFloat, Field(ge=0, allow_inf_nan=False)]  # USD


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


def _skills(value: object) -> str | tuple[str, ...]:
    if value == ALL:
        return ALL
    if isinstance(value, list | tuple):
        return tuple(value)  # each name is checked against the skills that exist, at its own line
    raise ValueError(f"a list of skill names, or all (every published skill), not {value!r}")


def _listed(value: str | tuple[str, ...]) -> str | list[str]:
    return value if isinstance(value, str) else list(value)


def _endings(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ValueError(f"a mapping of ending to words, like 'out_of_money: …', not {value!r}")
    out: dict[str, str] = {}
    for name, words in value.items():
        if name not in ENDINGS:
            raise ValueError(f"unknown ending {name!r} (endings: {', '.join(ENDINGS)})")
        if not isinstance(words, str) or not words.strip():
            raise ValueError(f"the words for {name} are text (markdown), not {words!r}")
        out[name] = words.strip()
    return out


def _per(value: object) -> dict[str, float]:
    if not isinstance(value, dict):
        raise ValueError(f"a mapping of window to USD, like {{day: 2}}, not {value!r}")
    for window, usd in value.items():
        if window not in WINDOWS:
            raise Refusal(f"unknown spend window {window!r} (windows: {', '.join(WINDOWS)})", window)
        if isinstance(usd, bool) or not isinstance(usd, int | float) or not 0 <= usd < float("inf"):
            raise Refusal(f"{window}: is what one person may spend in a {window}, in USD (a number ≥ 0), not {usd!r}", window)
    # a ceiling that silently never applies is the worst way for a spend control to fail
    return {window: float(value[window]) for window in WINDOWS if window in value}


def _memory(value: object) -> str:
    if value in MEMORIES:
        return str(value)
    raise ValueError(f"unknown memory {value!r} (memories: {', '.join(MEMORIES)})")


# An image file under content/, named relative to it (no way up, no absolute path).
_IMAGE = re.compile(r"(?!/)(?!.*(?:^|/)\.\.(?:/|$))[A-Za-z0-9_./-]+\.(?:png|jpe?g|gif|webp)", re.IGNORECASE)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")


def is_uri(value: str) -> bool:
    return _URI.fullmatch(value) is not None


def is_image_file(value: str) -> bool:
    """An image file's path under content/, relative to it (PNG, JPEG, GIF, WebP), with no way up."""
    return _IMAGE.fullmatch(value) is not None


def _glyph(value: str) -> str:
    value = value.strip()
    if not value or len(value) > 8 or "\n" in value:
        raise ValueError(f"a glyph is an emoji or a few characters, not {value!r}")
    return value


class Limits(Strict):
    """What one run of the bot may use before it ends, and what one person may spend on it."""

    steps: Annotated[StrictInt, Field(gt=0)] = DEFAULT_LIMITS.steps
    spend: Money = DEFAULT_LIMITS.spend
    minutes: Annotated[StrictFloat, Field(gt=0, allow_inf_nan=False)] = DEFAULT_LIMITS.minutes
    # Per-person ceilings (USD) by rolling window; every window given must hold (SPEC §7).
    per: Annotated[dict[str, float], PlainValidator(_per)] = Field(default_factory=dict)


class BotFile(Strict):
    """The front matter of ``content/bots/<slug>.md``: every key an author may write."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_name=True, validate_by_alias=True)

    name: Text
    glyph: Annotated[StrictStr, AfterValidator(_glyph)] | None = None
    avatar: Annotated[StrictStr, AfterValidator(str.strip)] | None = None  # the compile checks it (link.py)
    # Which surfaces, and the keys each adds, are the deployment's (``engine.content.kinds``): ``front_model``
    # is this class with them.
    surfaces: tuple[StrictStr, ...] = ()
    extends: Annotated[StrictStr, AfterValidator(lambda v: v.strip())] | None = None
    audience: AudienceField | None = Field(default=None, alias="for")
    serves: AudienceField | None = None
    hears: Hears = ("mention",)
    tools: Names = ()
    skills: Annotated[str | tuple[str, ...], PlainValidator(_skills), PlainSerializer(_listed)] = ()
    limits: Limits = Limits()
    model: Annotated[str | dict[str, str], PlainValidator(_model)] | None = None
    memory: Annotated[str, PlainValidator(_memory)] = "thread"
    endings: Annotated[dict[str, str], PlainValidator(_endings)] = Field(default_factory=dict)


class Bot(BotFile):
    """A compiled bot. Its fields are what it *is* (after ``extends:``, with its endings resolved from
    the strings); ``file`` and ``body`` are what its own file says, for writing it back."""

    front_model: ClassVar[type[BotFile]] = BotFile  # the front matter this bot was compiled from

    slug: str
    user_id: str
    prompt: str
    source_path: str
    body: str = ""
    file: BotFile | None = Field(default=None, exclude=True)

    @property
    def hears_mentions(self) -> bool:
        """Whether naming it in a room summons it: ``mention`` in its ``hears:`` (the default when the file
        has no ``hears:``). A press on its choices and a command that names it ask it whatever it hears."""
        return "mention" in self.hears

    def ending(self, name: Ending) -> str | None:
        """The words for an ending, or None: with no words the bot says nothing."""
        return self.endings.get(name)


def bot_fields(front: BotFile) -> dict[str, Any]:
    """The front matter's values by field name (the surfaces' keys among them), ready to build a ``Bot`` from."""
    model = front.front_model if isinstance(front, Bot) else type(front)
    return {name: getattr(front, name) for name in model.model_fields}


def bot_models(kinds: Kinds) -> tuple[type[BotFile], type[Bot]]:
    """The front matter and the compiled bot as this deployment's surfaces make them: ``surfaces:`` one of
    theirs (the first registered when not written), and each surface's own keys."""

    def fields() -> dict[str, tuple[Any, Any]]:
        taken = sorted(key.name for key in kinds.keys() if key.name in BotFile.model_fields or key.name in Bot.model_fields)
        if taken:
            raise ValueError(f"a surface's bot-file key is already the engine's: {', '.join(taken)}")
        names = kinds.names
        empty = f"a bot needs at least one surface ({', '.join(names[:-1])} or {names[-1]})" if len(names) > 1 \
            else f"a bot needs a surface ({names[0]})"
        return {"surfaces": kinds.surfaces_field(empty), **{key.name: (key.annotation, key.default) for key in kinds.keys()}}

    front = kinds.model(BotFile, fields)
    bot = kinds.model(Bot, fields)
    bot.front_model = front
    return front, bot
