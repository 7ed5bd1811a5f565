"""Matrix HTML and reply fallbacks, flattened to what a person reads. Pure (the stdlib's html.parser)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import unquote

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


def html_to_text(html: str, *, pills_as_ids: bool = False) -> str:
    """Flatten Matrix HTML to what a person reads.

    Block tags become line breaks, list items get "- " or "N. ", links keep
    their text (and the address in brackets when it differs, so a bot can still
    follow "[this article](…)"), pills keep the display name — or the user id
    with `pills_as_ids`, which is how mentions are found. `<mx-reply>` content
    is skipped wherever it appears.
    """
    parser = _TextParser(pills_as_ids=pills_as_ids)
    try:
        parser.feed(html)
        parser.close()
    except Exception:  # html.parser is lenient; this is a last guard so reading never raises
        return ""
    return parser.text()


_PRE_NEWLINE = "\x00"
# Layout breaks are markers until the end, so adjacent blocks give one break, not a pile.
_LINE_BREAK = "\x01"
_PARAGRAPH_BREAK = "\x02"
_BREAKS = re.compile(r"[ \n\x01\x02]*[\x01\x02][ \n\x01\x02]*")
_LINE_BLOCKS = frozenset("li tr dt dd summary caption".split())
_PARAGRAPH_BLOCKS = frozenset(
    "p div h1 h2 h3 h4 h5 h6 blockquote pre ul ol table thead tbody hr details".split()
)


class _TextParser(HTMLParser):
    def __init__(self, *, pills_as_ids: bool) -> None:
        super().__init__(convert_charrefs=True)
        self._pills_as_ids = pills_as_ids
        self._out: list[str] = []
        self._skip = 0
        self._pre = 0
        self._lists: list[list[int]] = []  # per open list: [next number] for ol, [] for ul
        self._links: list[tuple[str | None, int]] = []  # (href, start index in _out)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
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
            self._lists.append([int(start) if start.isdecimal() else 1])
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
            self._links.append((values.get("href"), len(self._out)))

    def handle_endtag(self, tag: str) -> None:
        if tag == "mx-reply":
            self._skip = max(0, self._skip - 1)
            return
        if self._skip:
            return
        if tag == "pre":
            self._pre = max(0, self._pre - 1)
        elif tag in ("ol", "ul") and self._lists:
            self._lists.pop()
        elif tag == "a" and self._links:
            href, start = self._links.pop()
            self._close_link(href, start)
        self._break(tag)

    def _break(self, tag: str) -> None:
        if tag in _PARAGRAPH_BLOCKS:
            self._out.append(_PARAGRAPH_BREAK)
        elif tag in _LINE_BLOCKS:
            self._out.append(_LINE_BREAK)

    def _close_link(self, href: str | None, start: int) -> None:
        if not href:
            return
        shown = "".join(self._out[start:]).strip()
        user_id = matrix_to_user_id(href)
        if user_id is not None:
            if self._pills_as_ids:
                self._out[start:] = [user_id]
            return
        if shown and shown != href and href.lower().startswith(("http://", "https://")):
            self._out.append(f" ({href})")
        elif not shown:
            self._out.append(href)

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        data = re.sub("[\x00-\x02]", "", data)
        # Inside <pre> line breaks are content: kept apart from layout breaks until the end.
        self._out.append(data.replace("\n", _PRE_NEWLINE) if self._pre else re.sub(r"\s+", " ", data))

    def text(self) -> str:
        raw = _BREAKS.sub(lambda m: "\n\n" if _PARAGRAPH_BREAK in m.group(0) else "\n", "".join(self._out))
        lines = [line.strip() for line in raw.split("\n")]
        text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
        return text.replace(_PRE_NEWLINE, "\n").rstrip()
