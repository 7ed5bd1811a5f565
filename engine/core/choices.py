"""An answer cut once, when it is stored: the words, and the choices it ends in (SPEC §4). Pure.

An answer whose last lines are a ``-`` list under some text ends in choices. It stays a plain list when
there is no text above it, more than six items, an item over 70 characters, or nesting deeper than three.
``- Label -> https://…`` is a link, not a choice. Choices are the list's top-level items; an item's nested
lines stay with it as its detail.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_CHOICES = 6
MAX_LABEL = 70
MAX_DEPTH = 3

_ITEM = re.compile(r"^(?P<indent>[ \t]*)[-*+][ \t]+(?P<text>.*\S)\s*$")
_LINK = re.compile(r"^(?P<label>.*\S)\s+->\s+(?P<url>https?://\S+)$")


@dataclass(frozen=True)
class Choice:
    label: str
    detail: str = ""


@dataclass(frozen=True)
class Link:
    label: str
    url: str


@dataclass(frozen=True)
class Cut:
    words: str
    choices: tuple[Choice, ...] = ()
    links: tuple[Link, ...] = ()

    @property
    def offers(self) -> bool:
        return bool(self.choices)


def cut(answer: str) -> Cut:
    """The words and the choices of ``answer``; an answer that does not end in choices is all words."""
    lines = answer.rstrip().split("\n")
    start = len(lines)
    while start > 0 and (_ITEM.match(lines[start - 1]) or _continues(lines, start - 1)):
        start -= 1
    block = lines[start:]
    words = "\n".join(lines[:start]).strip()
    if not block or not words:
        return Cut(answer.strip())
    items = _items(block)
    if items is None:
        return Cut(answer.strip())
    choices: list[Choice] = []
    links: list[Link] = []
    for label, detail in items:
        link = _LINK.match(label)
        if link is not None:
            links.append(Link(link.group("label"), link.group("url")))
        else:
            choices.append(Choice(label, detail))
    if not choices or len(choices) > MAX_CHOICES or any(len(c.label) > MAX_LABEL for c in choices):
        return Cut(answer.strip())
    return Cut(words, tuple(choices), tuple(links))


def _continues(lines: list[str], n: int) -> bool:
    """An indented line inside the trailing list (a nested item's wrapped text) belongs to it."""
    line = lines[n]
    return bool(line.strip()) and line[:1] in (" ", "\t") and any(_ITEM.match(x) for x in lines[:n])


def _items(block: list[str]) -> list[tuple[str, str]] | None:
    """Top-level items with their nested lines, or None when the list nests deeper than allowed or does
    not begin at the top level."""
    first = _ITEM.match(block[0])
    if first is None:
        return None
    base = len(first.group("indent").expandtabs(4))
    levels = [base]
    items: list[tuple[str, list[str]]] = []
    for line in block:
        m = _ITEM.match(line)
        if m is None:
            if not items:
                return None
            items[-1][1].append(line.strip())
            continue
        indent = len(m.group("indent").expandtabs(4))
        if indent < base:
            return None
        while levels and indent < levels[-1]:
            levels.pop()
        if not levels or indent > levels[-1]:
            levels.append(indent)
        if len(levels) > MAX_DEPTH:
            return None
        if indent == base:
            items.append((m.group("text").strip(), []))
        else:
            items[-1][1].append(m.group("text").strip())
    return [(label, "\n".join(detail)) for label, detail in items]
