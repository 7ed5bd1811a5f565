"""Matrix HTML and reply fallbacks, flattened to what a person reads. Pure, and linear in its input
(``engine.core.html_tokens`` reads the HTML): a room member chooses the input, never its cost."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

from engine.core.html_tokens import Start, Text, tokens

_MX_REPLY = re.compile(r"^\s*<mx-reply>.*</mx-reply>", re.DOTALL | re.IGNORECASE)
_MATRIX_TO = re.compile(r"^https?://matrix\.to/#/([^?\s]+)", re.IGNORECASE)


def strip_reply_fallback(body: str) -> str:
    """Drop the leading `> ` quoted lines of a reply fallback and the blank line after."""
    lines = body.split("\n")
    i = 0
    while i < len(lines) and lines[i].startswith(">"):
        i += 1
    if i == 0:
        return body
    if i < len(lines) and lines[i].strip() == "":
        i += 1
    return "\n".join(lines[i:])


def strip_mx_reply(html: str) -> str:
    """Drop a leading `<mx-reply>` fallback (the spec says to strip it since v1.13)."""
    return _MX_REPLY.sub("", html, count=1)


def matrix_to_user_id(href: str) -> str | None:
    """The user id a matrix.to permalink points at (a pill), or None."""
    match = _MATRIX_TO.match(href.strip())
    if match is None:
        return None
    target = unquote(match.group(1))
    return target if target.startswith("@") and ":" in target else None


_PERSON_LINK = re.compile(r"https?://matrix\.to/#/([^/?\s]+)(?:\?\S*)?", re.IGNORECASE)


def person_link(text: str) -> str | None:
    """The user id a line's word refers to when the whole word is a matrix.to link to a person (how a
    command's person argument may be given); None otherwise."""
    match = _PERSON_LINK.fullmatch(text.strip())
    if match is None:
        return None
    target = unquote(match.group(1))
    return target if target.startswith("@") and ":" in target else None


# A formatted_body past this is not read: its plain `body` is (what a person's client shows anyway when
# it cannot render the HTML). A homeserver caps a whole event at 64 KiB, so only a malformed event
# reaches it; the flattening below is linear in any case, and this bounds it.
HTML_LIMIT = 64 * 1024


def too_long(html: str) -> bool:
    """Whether ``html`` is past ``HTML_LIMIT`` bytes (UTF-8), so its ``body`` is read instead."""
    return len(html) > HTML_LIMIT or len(html.encode("utf-8", "surrogatepass")) > HTML_LIMIT


@dataclass(frozen=True, slots=True)
class Flat:
    """A line's HTML flattened once, both ways it is read: ``text`` is what a person reads (a pill as
    the display name it shows); ``with_ids`` the same words with each pill as the user id it points
    at, which is how mentions and a command's person arguments are found."""

    text: str
    with_ids: str


def flatten(html: str) -> Flat:
    """Flatten Matrix HTML to what a person reads, in one linear pass (``engine.core.html_tokens``).

    Block tags become line breaks, list items get "- " or "N. ", links keep
    their text (and the address in brackets when it differs, so a bot can still
    follow "[this article](…)"), pills keep the display name — or the user id,
    in ``with_ids``. ``<mx-reply>`` content is skipped wherever it appears.
    """
    reader = _Reader()
    for token in tokens(html):
        if isinstance(token, Text):
            reader.data(token.data)
        elif isinstance(token, Start):
            reader.start(token.name, token.attrs)
            if token.self_closing:
                reader.end(token.name)
        else:
            reader.end(token.name)
    return Flat(reader.text(pills_as_ids=False), reader.text(pills_as_ids=True))


def html_to_text(html: str, *, pills_as_ids: bool = False) -> str:
    """``flatten(html)``, one of its two readings."""
    flat = flatten(html)
    return flat.with_ids if pills_as_ids else flat.text


_PRE_NEWLINE = "\x00"
# Layout breaks are markers until the end, so adjacent blocks give one break, not a pile.
_LINE_BREAK = "\x01"
_PARAGRAPH_BREAK = "\x02"
_MARKERS = re.compile("[\x00-\x02]")
# A run of layout whitespace is matched once, whole, and never rescanned: `[…]+` cannot backtrack into
# a pile of retries, which a pattern needing a marker somewhere inside the run did (quadratic).
_LAYOUT_RUN = re.compile("[ \n\x01\x02]+")
_LINE_BLOCKS = frozenset("li tr dt dd summary caption".split())
_PARAGRAPH_BLOCKS = frozenset(
    "p div h1 h2 h3 h4 h5 h6 blockquote pre ul ol table thead tbody hr details".split()
)


@dataclass(frozen=True, slots=True)
class _Pill:
    shown: str
    user_id: str


class _Reader:
    def __init__(self) -> None:
        self._out: list[str | _Pill] = []
        self._skip = 0
        self._pre = 0
        self._lists: list[list[int]] = []  # per open list: [next number] for ol, [] for ul
        self._link: tuple[str | None, int] | None = None  # the open link: (href, start index in _out)

    def start(self, tag: str, attrs: tuple[tuple[str, str | None], ...]) -> None:
        if tag == "mx-reply":
            self._skip += 1
            return
        if self._skip:
            return
        values = dict(attrs)
        self._break(tag)
        if tag == "br":
            self._out.append("\n")
        if tag == "pre":
            self._pre += 1
        elif tag == "ol":
            start = values.get("start") or "1"
            self._lists.append([int(start) if start.isdecimal() and len(start) < 10 else 1])
        elif tag == "ul":
            self._lists.append([])
        elif tag == "li":
            current = self._lists[-1] if self._lists else []
            if current:
                self._out.append(f"{current[0]}. ")
                current[0] += 1
            else:
                self._out.append("- ")
        elif tag in ("td", "th"):
            self._out.append(" | ")
        elif tag == "img":
            alt = values.get("alt") or values.get("title")
            if alt:
                self._out.append(alt)
        elif tag == "a":
            # Links do not nest (a browser closes the open one first): each link's words are read once.
            self._close_link()
            self._link = (values.get("href"), len(self._out))

    def end(self, tag: str) -> None:
        if tag == "mx-reply":
            self._skip = max(0, self._skip - 1)
            return
        if self._skip:
            return
        if tag == "pre":
            self._pre = max(0, self._pre - 1)
        elif tag in ("ol", "ul") and self._lists:
            self._lists.pop()
        elif tag == "a":
            self._close_link()
        self._break(tag)

    def _break(self, tag: str) -> None:
        if tag in _PARAGRAPH_BLOCKS:
            self._out.append(_PARAGRAPH_BREAK)
        elif tag in _LINE_BLOCKS:
            self._out.append(_LINE_BREAK)

    def _close_link(self) -> None:
        if self._link is None:
            return
        (href, start), self._link = self._link, None
        if not href:
            return
        shown = "".join(_shown(part) for part in self._out[start:])
        user_id = matrix_to_user_id(href)
        if user_id is not None:
            self._out[start:] = [_Pill(shown, user_id)]
            return
        shown = shown.strip()
        if shown and shown != href and href.lower().startswith(("http://", "https://")):
            self._out.append(f" ({href})")
        elif not shown:
            self._out.append(href)

    def data(self, data: str) -> None:
        if self._skip:
            return
        data = _MARKERS.sub("", data)
        # Inside <pre> line breaks are content: kept apart from layout breaks until the end.
        self._out.append(data.replace("\n", _PRE_NEWLINE) if self._pre else re.sub(r"\s+", " ", data))

    def text(self, *, pills_as_ids: bool) -> str:
        joined = "".join(
            part if isinstance(part, str) else part.user_id if pills_as_ids else part.shown for part in self._out
        )
        raw = _LAYOUT_RUN.sub(_layout_break, joined)
        lines = [line.strip() for line in raw.split("\n")]
        text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
        return text.replace(_PRE_NEWLINE, "\n").rstrip()


def _shown(part: str | _Pill) -> str:
    return part if isinstance(part, str) else part.shown


def _layout_break(run: re.Match[str]) -> str:
    """A run of spaces, newlines and break markers: a paragraph break if it holds one, else a line
    break if it holds one, else the run as it was."""
    found = run.group(0)
    if _PARAGRAPH_BREAK in found:
        return "\n\n"
    if _LINE_BREAK in found:
        return "\n"
    return found
