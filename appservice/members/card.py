"""An edition's card (SPEC §10): a small declarative document the model composes with the ``card`` tool — a
heading, then blocks (text, items, lists, key-values, dividers, one-level sections, https link chips) —
validated here and rendered to Matrix HTML within the spec's allowed tags, always with a plain-text body.
Pure.

A malformed card is refused with one line per mistake (``card_errors``): the tool hands that back to the
model as an error result it can fix. Every word is escaped as it is written into the HTML, and every link is
an https address, so nothing the model (or a feed it read) wrote can become markup.
"""

from __future__ import annotations

import html
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

Line = Annotated[str, Field(min_length=1, max_length=300)]
Words = Annotated[str, Field(min_length=1, max_length=2000)]
MAX_BLOCKS = 40


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


def _https(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        raise ValueError(f"{url!r} is not an address") from None
    if parts.scheme != "https" or not parts.hostname:
        raise ValueError(f"{url!r} is not an https:// address (links on a card are https only)")
    if any(ch.isspace() or ch in "\"'<>`" for ch in url):
        raise ValueError(f"{url!r} has spaces or quotes in it")
    return url


class Text(_Strict):
    type: Literal["text"]
    text: Words


class Item(_Strict):
    """One story: its title, a line or two about it, and where to read it."""

    type: Literal["item"]
    title: Line
    text: Words | None = None
    link: str | None = None

    @field_validator("link")
    @classmethod
    def _link(cls, value: str | None) -> str | None:
        return None if value is None else _https(value)


class ListBlock(_Strict):
    type: Literal["list"]
    items: Annotated[list[Line], Field(min_length=1, max_length=20)]
    ordered: bool = False


class Pair(_Strict):
    key: Annotated[str, Field(min_length=1, max_length=80)]
    value: Line


class KeyValues(_Strict):
    type: Literal["kv"]
    pairs: Annotated[list[Pair], Field(min_length=1, max_length=20)]


class Divider(_Strict):
    type: Literal["divider"]


class Chip(_Strict):
    label: Annotated[str, Field(min_length=1, max_length=80)]
    url: str

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return _https(value)


class Links(_Strict):
    type: Literal["links"]
    links: Annotated[list[Chip], Field(min_length=1, max_length=10)]


Plain = Annotated[Text | Item | ListBlock | KeyValues | Divider | Links, Field(discriminator="type")]


class Section(_Strict):
    """A titled group of blocks, one level deep: a section holds no section."""

    type: Literal["section"]
    title: Line
    blocks: Annotated[list[Plain], Field(min_length=1, max_length=MAX_BLOCKS)]


Block = Annotated[Text | Item | ListBlock | KeyValues | Divider | Links | Section, Field(discriminator="type")]


class Card(_Strict):
    heading: Line
    blocks: Annotated[list[Block], Field(min_length=1, max_length=MAX_BLOCKS)]


def read_card(data: Any) -> Card:
    """A card from the model's arguments; raises ``ValueError`` with one line per mistake, naming where."""
    try:
        return Card.model_validate(data)
    except ValidationError as exc:
        raise ValueError(card_errors(exc)) from None


def card_errors(exc: ValidationError) -> str:
    lines: list[str] = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error.get("loc", ()))
        message = str(error.get("msg", "")).removeprefix("Value error, ")
        kind = error.get("type")
        if kind == "extra_forbidden":
            message = "is not part of a card"
        elif kind == "missing":
            message = "is missing"
        elif kind == "union_tag_invalid":
            message = ("type must be one of text, item, list, kv, divider, links"
                       + (", section" if where.count("blocks") == 1 else " (a section holds no section)"))
        elif kind == "union_tag_not_found":
            message = "each block needs a type: text, item, list, kv, divider, links or section"
        line = f"{where}: {message}" if where else message
        if line not in lines:
            lines.append(line)
    return "; ".join(lines[:12])


# --- rendering ---------------------------------------------------------------------------------------------

def _e(text: str) -> str:
    """Words as HTML text (quotes are only escaped where they could end something: in an attribute)."""
    return html.escape(text, quote=False)


def _attr(value: str) -> str:
    return html.escape(value, quote=True)


def _html_block(block: Text | Item | ListBlock | KeyValues | Divider | Links | Section) -> str:
    if isinstance(block, Text):
        return "<p>" + "<br>".join(_e(line) for line in block.text.split("\n")) + "</p>"
    if isinstance(block, Item):
        title = f'<a href="{_attr(block.link)}">{_e(block.title)}</a>' if block.link else _e(block.title)
        text = f"<br>{_e(block.text)}" if block.text else ""
        return f"<p><strong>{title}</strong>{text}</p>"
    if isinstance(block, ListBlock):
        tag = "ol" if block.ordered else "ul"
        return f"<{tag}>" + "".join(f"<li>{_e(item)}</li>" for item in block.items) + f"</{tag}>"
    if isinstance(block, KeyValues):
        rows = "".join(f"<tr><th>{_e(p.key)}</th><td>{_e(p.value)}</td></tr>" for p in block.pairs)
        return f"<table><tbody>{rows}</tbody></table>"
    if isinstance(block, Divider):
        return "<hr>"
    if isinstance(block, Links):
        return "<p>" + " · ".join(f'<a href="{_attr(c.url)}">{_e(c.label)}</a>' for c in block.links) + "</p>"
    return f"<h4>{_e(block.title)}</h4>" + "".join(_html_block(b) for b in block.blocks)


def _text_block(block: Text | Item | ListBlock | KeyValues | Divider | Links | Section) -> list[str]:
    if isinstance(block, Text):
        return [block.text]
    if isinstance(block, Item):
        lines = [f"• {block.title}" + (f" — {block.link}" if block.link else "")]
        return lines + ([f"  {block.text}"] if block.text else [])
    if isinstance(block, ListBlock):
        return [f"{n}. {item}" if block.ordered else f"- {item}" for n, item in enumerate(block.items, start=1)]
    if isinstance(block, KeyValues):
        return [f"{p.key}: {p.value}" for p in block.pairs]
    if isinstance(block, Divider):
        return ["———"]
    if isinstance(block, Links):
        return [" · ".join(f"{c.label}: {c.url}" for c in block.links)]
    lines = [block.title.upper()]
    for inner in block.blocks:
        lines.extend(_text_block(inner))
    return lines


def card_html(card: Card) -> str:
    """The card as Matrix HTML: h3, h4, p, br, strong, a (https), ul/ol/li, table/tbody/tr/th/td, hr only."""
    return f"<h3>{_e(card.heading)}</h3>" + "".join(_html_block(b) for b in card.blocks)


def card_text(card: Card) -> str:
    """The card as plain text: the mandatory ``body`` every client can show."""
    lines = [card.heading, ""]
    for block in card.blocks:
        lines.extend(_text_block(block))
        lines.append("")
    return "\n".join(lines).strip()
