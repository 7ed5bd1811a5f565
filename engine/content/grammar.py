"""A content file taken apart: front matter (as data, with the line of every key and value) and body.

Line numbers are 1-based lines of the whole file, so an error points where the author looks.
The front matter is read with a loader that follows YAML 1.2 on booleans: only ``true``/``false``
are booleans, because content says ``offer: off``, ``memory: none`` and ``schedule: {on: mon}``
and YAML 1.1 would silently turn those into ``False`` and ``True``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from engine.errors import ContentFault

FENCE = "---"

Path = tuple[str | int, ...]


class GrammarError(ContentFault):
    """The file cannot be taken apart. ``line`` is 1-based in the whole file."""

    def __init__(self, line: int, message: str, *, fatal: bool = False) -> None:
        super().__init__(message)
        self.line = line
        self.message = message
        self.fatal = fatal  # the data cannot be checked further


class ContentLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 booleans (see the module docstring)."""


# YAML 1.1 also reads ``at: 10:30`` as the base-60 number 630; 1.2 has no base 60, so neither do we.
_REPLACED = {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"}
ContentLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _REPLACED]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
ContentLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)
ContentLoader.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$"),
    list("-+0123456789"),
)
ContentLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)


@dataclass(frozen=True)
class Place:
    """Where one entry sits: the line of its key (for mapping entries) and of its value."""

    key_line: int | None
    value_line: int


@dataclass(frozen=True)
class Parsed:
    """A file taken apart. ``places`` maps a path of keys/indexes (as pydantic reports them) to lines;
    ``errors`` are problems that still let the rest of the file be checked (a key given twice)."""

    data: dict[str, Any]
    errors: tuple[GrammarError, ...] = ()
    places: dict[Path, Place] = field(default_factory=dict)
    front_line: int = 2
    body: str = ""
    closing_line: int = 1

    def line_of(self, path: Path, *, key: bool = False) -> int:
        """The line of the deepest known entry on ``path`` (its key's line if ``key``)."""
        for end in range(len(path), 0, -1):
            place = self.places.get(path[:end])
            if place is not None:
                if key and end == len(path) and place.key_line is not None:
                    return place.key_line
                return place.value_line
        return 1


def split(text: str) -> tuple[str, str, int] | GrammarError:
    """``(front matter text, body, line of the closing fence)``, or why the file has none."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != FENCE:
        return GrammarError(1, "a content file starts with front matter between '---' lines")
    for index in range(1, len(lines)):
        if lines[index].rstrip() == FENCE:
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1 :]), index + 1
    return GrammarError(1, "the front matter opened at line 1 is never closed with a '---' line")


def parse(text: str) -> Parsed | list[GrammarError]:
    """Take a file apart, or say why it cannot be. Problems that leave the data readable travel in
    ``Parsed.errors`` so the rest of the file is still checked."""
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    parts = split(text)
    if isinstance(parts, GrammarError):
        return [parts]
    front, body, closing_line = parts
    offset = 2  # the front matter's first line is the file's second

    try:
        loader = ContentLoader(front)
    except yaml.reader.ReaderError as exc:  # a character YAML refuses outright (a NUL, a control character)
        line = front[: exc.position].count("\n") + offset
        return [GrammarError(line, f"front matter holds a character YAML does not allow (U+{exc.character:04X})")]
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + offset if mark is not None else offset
        problem = exc.problem or "not valid YAML"
        context = f" ({exc.context})" if exc.context else ""
        return [GrammarError(line, f"front matter is not valid YAML: {problem}{context}")]
    except yaml.YAMLError as exc:
        return [GrammarError(offset, f"front matter is not valid YAML: {exc}")]
    finally:
        loader.dispose()

    if data is None:
        data = {}
    if not isinstance(data, dict) or (node is not None and not isinstance(node, yaml.MappingNode)):
        line = node.start_mark.line + offset if node is not None else offset
        return [GrammarError(line, f"front matter must be a mapping of keys, not {kind_of(data)}")]

    places: dict[Path, Place] = {}
    errors: list[GrammarError] = []
    if node is not None:
        _walk(node, (), offset, places, errors)
    if any(error.fatal for error in errors):
        return errors
    return Parsed(data=data, errors=tuple(errors), places=places, body=body, closing_line=closing_line)


def _walk(
    node: yaml.Node, path: Path, offset: int, places: dict[Path, Place], errors: list[GrammarError]
) -> None:
    if isinstance(node, yaml.MappingNode):
        first_seen: dict[object, int] = {}
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + offset
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != "tag:yaml.org,2002:str":
                shown = f" {key_node.value!r}" if isinstance(key_node, yaml.ScalarNode) else ""
                errors.append(
                    GrammarError(key_line, f"a key must be a word, not{shown or ' a structure'}", fatal=True)
                )
                continue
            key = key_node.value
            if key in first_seen:
                # YAML keeps the last one; say so, and check the one that counts.
                errors.append(
                    GrammarError(key_line, f"key '{key}' is given twice (first at line {first_seen[key]})")
                )
            else:
                first_seen[key] = key_line
            child = (*path, key)
            places[child] = Place(key_line=key_line, value_line=value_node.start_mark.line + offset)
            _walk(value_node, child, offset, places, errors)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            child = (*path, index)
            places[child] = Place(key_line=None, value_line=item.start_mark.line + offset)
            _walk(item, child, offset, places, errors)


def kind_of(value: object) -> str:
    """How a value reads to an author: 'a list', 'a number'…"""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__
