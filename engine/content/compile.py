"""Content files → a Registry, or every error in every file as ``path:line: message``.

The compile never stops at the first problem: an author fixing content wants the whole list at once.
Paths are relative to the content root (``bots/helper.md``); folders not compiled yet are skipped.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from engine.content.audience import AudienceError
from engine.content.grammar import Parsed, Path, kind_of, parse
from engine.content.models import SLUG, Bot, BotFile, CompileError, Registry, bot_fields

BOTS = "bots/"
# Matrix user ids are at most 255 bytes, and a bot's slug becomes one.
MAX_USER_ID = 255


def compile_sources(sources: Mapping[str, str], *, server_name: str) -> Registry | list[CompileError]:
    """Compile ``{relative path: text}``. Returns the Registry, or every error found (sorted)."""
    if not server_name:
        raise ValueError("compile_sources needs the homeserver's server_name")
    bots: list[Bot] = []
    errors: list[CompileError] = []
    for path in sorted(sources):
        if not path.startswith(BOTS) or not path.endswith(".md"):
            continue
        compiled = compile_bot(path, sources[path], server_name=server_name)
        if isinstance(compiled, Bot):
            bots.append(compiled)
        else:
            errors.extend(compiled)
    if errors:
        return sorted(errors, key=lambda error: (error.path, error.line))
    return Registry.of(server_name, bots)


def compile_bot(path: str, text: str, *, server_name: str) -> Bot | list[CompileError]:
    """One ``bots/<slug>.md`` → a Bot, or every error in it."""
    errors: list[CompileError] = []
    name = path.removeprefix(BOTS)
    slug = name.removesuffix(".md")
    if "/" in name:
        errors.append(CompileError(path, 1, "a bot file lives directly in bots/, not in a folder below it"))
    elif not SLUG.fullmatch(slug):
        errors.append(
            CompileError(
                path,
                1,
                f"the file name is the bot's slug: '{slug}' must be lowercase letters, digits, '-' and '_',"
                " starting with a letter or digit",
            )
        )
    user_id = f"@bot_{slug}:{server_name}"
    if len(user_id.encode()) > MAX_USER_ID:
        errors.append(CompileError(path, 1, f"the slug '{slug}' is too long for a Matrix user id"))

    parsed = parse(text)
    if isinstance(parsed, list):
        return [*errors, *(CompileError(path, error.line, error.message) for error in parsed)]

    errors.extend(CompileError(path, error.line, error.message) for error in parsed.errors)
    front: BotFile | None = None
    try:
        front = BotFile.model_validate(parsed.data)
    except ValidationError as exc:
        errors.extend(_explain(path, parsed, detail, BotFile) for detail in exc.errors(include_url=False))

    prompt = parsed.body.strip()
    if not prompt:
        errors.append(CompileError(path, parsed.closing_line, "a bot needs a prompt: the body is empty"))

    if errors or front is None:
        return errors
    return Bot(**bot_fields(front), slug=slug, user_id=user_id, prompt=prompt, source_path=path)


def _explain(path: str, parsed: Parsed, detail: ErrorDetails, model: type[BaseModel]) -> CompileError:
    """A pydantic error, said the way an author reads it, at the line it is about."""
    loc: Path = tuple(detail["loc"])
    kind = detail["type"]
    if kind == "extra_forbidden":
        inside = loc[:-1]
        allowed = ", ".join(_keys(_model_at(model, inside)))
        where = f" in {_dotted(inside)}" if inside else ""
        return CompileError(
            path, parsed.line_of(loc, key=True), f"unknown key '{loc[-1]}'{where} (allowed: {allowed})"
        )
    if kind == "missing":
        line = parsed.line_of(loc[:-1], key=True) if loc[:-1] else 1
        return CompileError(path, line, f"missing required key '{_dotted(loc)}'")
    if kind == "value_error":
        error = detail.get("ctx", {}).get("error")
        if isinstance(error, AudienceError) and error.index is not None:
            loc = (*loc, error.index)
        message = str(error) if error is not None else detail["msg"].removeprefix("Value error, ")
        return CompileError(path, parsed.line_of(loc), f"{_dotted(detail['loc'])}: {message}")
    message = _human(detail["msg"])
    return CompileError(
        path, parsed.line_of(loc), f"{_dotted(loc)}: {message}, got {_shown(detail['input'])}"
    )


_PHRASES = (
    ("Input should be", "should be"),
    ("a valid string", "text"),
    ("a valid integer", "a whole number"),
    ("a valid tuple", "a list"),
    ("a valid list", "a list"),
    ("a valid dictionary", "a mapping"),
)


def _human(message: str) -> str:
    for theirs, ours in _PHRASES:
        message = message.replace(theirs, ours)
    if " or instance of " in message:
        message = message.split(" or instance of ")[0]
    return message


def _shown(value: Any) -> str:
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        shown = repr(value)
        return shown if len(shown) <= 60 else shown[:57] + "..."
    if isinstance(value, bool):
        return "true" if value else "false"
    return kind_of(value)


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _keys(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def _model_at(model: type[BaseModel], loc: Path) -> type[BaseModel]:
    """The nested model a location points into (for naming the keys it allows)."""
    for part in loc:
        if not isinstance(part, str):
            continue
        field = next(
            (info for name, info in model.model_fields.items() if part in (name, info.alias)),
            None,
        )
        nested = _nested_model(field.annotation) if field is not None else None
        if nested is None:
            return model
        model = nested
    return model


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        for arg in typing.get_args(annotation):
            found = _nested_model(arg)
            if found is not None:
                return found
    return None
