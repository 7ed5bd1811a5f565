"""A pydantic validation error, said the way an author reads it, at the line it is about."""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any

from pydantic import BaseModel, Tag
from pydantic_core import ErrorDetails

from engine.content.audience import AudienceError
from engine.content.base import CompileError, Refusal
from engine.content.grammar import Parsed, Path, kind_of
from engine.content.hears import TAG


def explain(path: str, parsed: Parsed, detail: ErrorDetails, model: type[BaseModel]) -> CompileError:
    raw: Path = tuple(detail["loc"])
    loc: Path = tuple(part for part in raw if not (isinstance(part, str) and part.startswith(TAG)))
    kind = detail["type"]
    if kind == "extra_forbidden":
        inside = loc[:-1]
        holder = model_at(model, raw[:-1])
        allowed = ", ".join(keys_of(holder))
        unknown = getattr(holder, "unknown_key", None)
        if isinstance(unknown, str):
            message = unknown.format(key=loc[-1], allowed=allowed)
        else:
            where = f" in {dotted(inside)}" if inside else ""
            message = f"unknown key '{loc[-1]}'{where} (allowed: {allowed})"
        return CompileError(path, parsed.line_of(loc, key=True), message)
    if kind == "missing":
        holder = model_at(model, raw[:-1])
        said = getattr(holder, "missing", {}).get(loc[-1]) if isinstance(loc[-1], str) else None
        line = parsed.line_of(loc[:-1], key=True) if loc[:-1] else 1
        prefix = f"{dotted(loc[:-1])}: " if loc[:-1] else ""
        return CompileError(path, line, prefix + (said or f"missing required key '{loc[-1]}'"))
    if kind in ("value_error", "assertion_error"):
        error = detail.get("ctx", {}).get("error")
        head = dotted(loc)
        if isinstance(error, AudienceError) and error.index is not None:
            loc = (*loc, error.index)  # the line of the bad class; the message names the key
        if isinstance(error, Refusal):
            loc = (*loc, *error.at)  # the line of what it points at; the message names it
        message = str(error) if error is not None else detail["msg"].removeprefix("Value error, ")
        line = parsed.line_of(loc, key=bool(isinstance(error, Refusal) and error.at))
        return CompileError(path, line, f"{head}: {message}" if head else message)
    message = _human(detail["msg"])
    return CompileError(path, parsed.line_of(loc), f"{dotted(loc)}: {message}, got {_shown(detail['input'])}")


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


def dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def keys_of(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def model_at(model: type[BaseModel], loc: Path) -> type[BaseModel]:
    """The nested model a location points into (for naming the keys it allows)."""
    current: Any = model
    for part in loc:
        found = _step(current, part)
        if found is None:
            break
        current = found
    models = _models(current)
    return models[0] if models else model


def _step(annotation: Any, part: str | int) -> Any:
    if isinstance(part, str) and part.startswith(TAG):
        for alternative in _alternatives(annotation):
            if any(isinstance(meta, Tag) and meta.tag == part for meta in getattr(alternative, "__metadata__", ())):
                return alternative
        return None
    if isinstance(part, int):
        for candidate in _unwrap(annotation):
            if typing.get_origin(candidate) in (tuple, list):
                args = typing.get_args(candidate)
                return args[0] if args else None
        return None
    for candidate in _models(annotation):
        for name, info in candidate.model_fields.items():
            if part in (name, info.alias):
                return info.annotation if not info.metadata else Annotated[(info.annotation, *info.metadata)]
    return None


def _alternatives(annotation: Any) -> list[Any]:
    """A union's alternatives, each still with its own Annotated metadata."""
    while typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return list(typing.get_args(annotation))
    return [annotation]


def _unwrap(annotation: Any) -> list[Any]:
    """An annotation's alternatives with Annotated and Optional taken off."""
    if typing.get_origin(annotation) is Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return [alt for arg in typing.get_args(annotation) for alt in _unwrap(arg)]
    return [annotation]


def _models(annotation: Any) -> list[type[BaseModel]]:
    return [alt for alt in _unwrap(annotation) if isinstance(alt, type) and issubclass(alt, BaseModel)]
