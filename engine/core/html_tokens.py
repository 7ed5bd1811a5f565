"""HTML read as tokens in one pass, never going back (pure): what flattens a line's HTML and a fetched page.

Why not the stdlib's ``html.parser``: on malformed input — a tag, a comment or a quoted value left open —
it gives the construct up and scans the rest of the input again from the next ``<``, so ``"<a" * 32768``
(64 KiB) costs seconds and 240 KB costs minutes. Whoever writes the HTML (any room member, any page a
bot fetches) chooses the input, so its cost must not be theirs to choose.

This reader walks the input once, the way a browser's tokenizer does: every step consumes what it
looked at. A tag whose ``>`` never comes is read as text (the rest of the input, once); a comment or a
``<!…>``/``<?…>`` left open runs to the end, as in a browser. ``script`` and ``style`` hold raw text up
to their end tag. Character references are resolved in text and attribute values; a numeric one too
long to be a character is U+FFFD (the stdlib's ``html.unescape`` raises on a 5,000-digit one).
"""

from __future__ import annotations

import html
import re
from collections.abc import Generator, Iterator
from dataclasses import dataclass

__all__ = ["End", "Start", "Text", "Token", "tokens", "unescape"]


@dataclass(frozen=True, slots=True)
class Start:
    name: str  # lower case
    attrs: tuple[tuple[str, str | None], ...]  # names lower case; None for an attribute without a value
    self_closing: bool = False


@dataclass(frozen=True, slots=True)
class End:
    name: str


@dataclass(frozen=True, slots=True)
class Text:
    data: str


Token = Start | End | Text

RAW_TEXT = frozenset({"script", "style"})

_SPACE = "\t\n\f\r "
_SPACES = re.compile(rf"[{_SPACE}]*")
_SPACES_OR_SLASHES = re.compile(rf"[{_SPACE}/]*")
_PLAIN_TAG = re.compile(rf"<(/?)([a-zA-Z][^{_SPACE}/>]*)>")
_TAG_NAME = re.compile(rf"[^{_SPACE}/>]*")
_ATTR_NAME = re.compile(rf"[^{_SPACE}/>][^{_SPACE}/>=]*")
_UNQUOTED = re.compile(rf"[^{_SPACE}>]*")
_RAW_END = {name: re.compile(rf"</{name}(?=[{_SPACE}/>]|\Z)", re.IGNORECASE) for name in RAW_TEXT}
# The stdlib's own pattern for a reference (html.unescape), resolved one match at a time.
_REFERENCE = re.compile(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)")
_MAX_CODE_POINT_DIGITS = {10: 7, 16: 6}  # 1114111, 10FFFF


def unescape(text: str) -> str:
    """``html.unescape`` that never raises: a numeric reference past the last code point is U+FFFD."""
    if "&" not in text:
        return text

    def one(match: re.Match[str]) -> str:
        ref = match.group(1)
        if ref.startswith("#"):
            base = 16 if ref[1:2] in ("x", "X") else 10
            digits = ref[2 if base == 16 else 1:].rstrip(";").lstrip("0")
            if len(digits) > _MAX_CODE_POINT_DIGITS[base]:
                return "\ufffd"
        return html.unescape(match.group(0))

    return _REFERENCE.sub(one, text)


def tokens(markup: str) -> Iterator[Token]:
    """``markup`` as start tags, end tags and text (adjacent text as one), in order; comments,
    doctypes and processing instructions dropped. Linear in ``len(markup)`` whatever it holds."""
    n = len(markup)
    pos = 0
    text: list[str] = []  # pending text, yielded as one before the next tag

    while pos < n:
        lt = markup.find("<", pos)
        if lt < 0:
            text.append(unescape(markup[pos:]))
            break
        if lt > pos:
            text.append(unescape(markup[pos:lt]))
        pos = lt
        plain = _PLAIN_TAG.match(markup, pos)
        if plain is not None:  # the common case, read at once: <b>, </p>
            if text:
                yield Text("".join(text))
                text.clear()
            name = plain.group(2).lower()
            pos = plain.end()
            if plain.group(1):
                yield End(name)
                continue
            yield Start(name, ())
            if name in RAW_TEXT:
                pos = yield from _raw_text(markup, name, pos)
            continue
        after = markup[pos + 1:pos + 2]
        if after.isascii() and after.isalpha():
            read = _tag(markup, pos + 1)
            if read is None:  # never closed: the rest is text, read once
                text.append(unescape(markup[pos:]))
                break
            name, attrs, self_closing, pos = read
            if text:
                yield Text("".join(text))
                text.clear()
            yield Start(name, attrs, self_closing)
            if name in RAW_TEXT and not self_closing:
                pos = yield from _raw_text(markup, name, pos)
            continue
        if after == "/":
            first = markup[pos + 2:pos + 3]
            if first.isascii() and first.isalpha():
                read = _tag(markup, pos + 2)
                if read is None:
                    text.append(unescape(markup[pos:]))
                    break
                name, _attrs, _closing, pos = read
                if text:
                    yield Text("".join(text))
                    text.clear()
                yield End(name)
                continue
            if first == ">":  # "</>" is nothing
                pos += 3
                continue
            if not first:  # "</" at the very end
                text.append("</")
                break
            pos = _past(markup, ">", pos + 2)  # "</ x>", "</3>": a bogus comment
            continue
        if after == "!":
            if markup.startswith("<!--", pos):
                if markup.startswith(">", pos + 4):  # "<!-->": an empty comment
                    pos += 5
                elif markup.startswith("->", pos + 4):  # "<!--->"
                    pos += 6
                else:
                    pos = _past(markup, "-->", pos + 4)
            else:  # <!DOCTYPE …>, <![CDATA[…]]> and the like
                pos = _past(markup, ">", pos + 2)
            continue
        if after == "?":
            pos = _past(markup, ">", pos + 2)
            continue
        text.append("<")  # a "<" that starts nothing is a character
        pos += 1
    if text:
        yield Text("".join(text))


def _raw_text(markup: str, name: str, start: int) -> Generator[Token, None, int]:
    """A script's or style's text, raw (no references, no tags) up to its end tag; where reading goes on."""
    end = _RAW_END[name].search(markup, start)
    stop = len(markup) if end is None else end.start()
    if stop > start:
        yield Text(markup[start:stop])
    return stop


def _past(markup: str, end: str, start: int) -> int:
    """Where reading goes on after the next ``end`` from ``start``; the end of input when none comes."""
    found = markup.find(end, start)
    return len(markup) if found < 0 else found + len(end)


def _tag(markup: str, start: int) -> tuple[str, tuple[tuple[str, str | None], ...], bool, int] | None:
    """The tag whose name begins at ``start``: its name, attributes, whether it closes itself, and where
    reading goes on after its ``>``; None when the input ends first. Each step moves forward."""
    n = len(markup)
    name_end = _TAG_NAME.match(markup, start).end()  # type: ignore[union-attr]
    name = markup[start:name_end].lower()
    attrs: list[tuple[str, str | None]] = []
    i = name_end
    while True:
        gap = _SPACES_OR_SLASHES.match(markup, i).end()  # type: ignore[union-attr]
        if gap >= n:
            return None
        if markup[gap] == ">":
            return name, tuple(attrs), gap > i and markup[gap - 1] == "/", gap + 1
        attr = _ATTR_NAME.match(markup, gap)
        assert attr is not None  # the gap stopped at a character an attribute name may start with
        i = attr.end()
        after = _SPACES.match(markup, i).end()  # type: ignore[union-attr]
        if after >= n or markup[after] != "=":
            attrs.append((attr.group().lower(), None))
            continue
        start_value = _SPACES.match(markup, after + 1).end()  # type: ignore[union-attr]
        if start_value >= n:
            return None
        quote = markup[start_value]
        if quote in "\"'":
            close = markup.find(quote, start_value + 1)
            if close < 0:
                return None
            value, i = markup[start_value + 1:close], close + 1
        else:
            unquoted = _UNQUOTED.match(markup, start_value)
            assert unquoted is not None
            value, i = unquoted.group(), unquoted.end()
        attrs.append((attr.group().lower(), unescape(value)))
