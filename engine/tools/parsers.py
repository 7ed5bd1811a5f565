"""The readers of fetched documents — a feed, a page's feed links, a page's words — as they run inside a
quarantined child (``engine.tools.quarantine``), never in the service's own process.

Each takes the bytes or text it is given and nothing else: feedparser is handed a file object over the bytes,
so nothing a site serves can be mistaken for a path to open or a url to fetch (``feedparser.parse`` tries a str
or bytes as a filename first: a body of ``/dev/zero`` was read until memory ran out). A feed that declares
entities (a DOCTYPE with an internal subset, ``<!ENTITY``) is refused before any parser sees it: feedparser's
loose fallback expands them without bound (a 107 KiB feed became a 300 MB string). So that the check sees the
markup a parser would, a document must be in an encoding that writes markup as ASCII does (UTF-8, Latin-1, …):
UTF-16/32 (NUL bytes), EBCDIC and UTF-7 are refused. What comes back is capped: at most ``MAX_ENTRIES``
entries, each field at most ``FIELD_CHARS``. HTML is read by ``engine.core.html_tokens``, linear whatever it
holds. The child's memory and time are bounded by the quarantine; these bound what a parse may produce.
"""

from __future__ import annotations

import codecs
import io
import json
import os
import re
import resource
import signal
import struct
import sys
from typing import Any
from urllib.parse import urljoin

from engine.core.html_tokens import Start, tokens
from engine.tools.fenced import html_to_text

MAX_ENTRIES = 20
FIELD_CHARS = 4000
TITLE_CHARS = 300
# Feed links read out of one page: the few a site advertises first are the ones worth trying.
MAX_ALTERNATES = 4
LINK_TYPES = frozenset({"application/rss+xml", "application/atom+xml"})
ENTRY_FIELDS = ("title", "link", "published", "updated", "summary")

_DECLARED_ENCODING = re.compile(rb"""^\s*<\?xml[^>]{0,200}?encoding\s*=\s*["']([A-Za-z0-9._:-]{1,40})["']""")
_ASCII = bytes(range(0x20, 0x7F))
# A numeric character reference: feedparser raises on one past the last code point (``chr`` of it), so such a
# reference is read as U+FFFD, as a browser reads it, before the feed is parsed.
_NUMERIC_REFERENCE = re.compile(rb"&#(?:[xX]([0-9A-Fa-f]{1,64})|([0-9]{1,64}))")
# The EBCDIC signature of "<?xm" (feedparser reads such a document as cp037).
_EBCDIC = b"\x4c\x6f\xa7\x94"


def refusal(body: bytes) -> str | None:
    """Why ``body`` is not handed to a feed parser (entities declared, or an encoding that hides markup from
    the check), or None. Linear in ``len(body)``."""
    if b"\x00" in body[:4096] or body.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) or body.startswith(_EBCDIC):
        return "it is in an encoding feeds are not read in (UTF-16, UTF-32 or EBCDIC)"
    declared = _DECLARED_ENCODING.match(body[:256])
    if declared is not None and not _ascii_markup(declared.group(1).decode("ascii")):
        return f"it says it is in {declared.group(1).decode('ascii')}, an encoding feeds are not read in"
    lowered = body.lower()
    if b"<!entity" in lowered:
        return "it declares entities (<!ENTITY), which are not read"
    if _internal_subset(lowered):
        return "its DOCTYPE declares an internal subset ([…]), which is not read"
    return None


def _ascii_markup(name: str) -> bool:
    """Whether an encoding writes markup characters as ASCII does (so the byte-level check sees them)."""
    try:
        codec = codecs.lookup(name).name
        return _ASCII.decode(codec) == _ASCII.decode("ascii") and _ASCII.decode("ascii").encode(codec) == _ASCII
    except (LookupError, UnicodeError, ValueError, TypeError):
        return False


def _internal_subset(lowered: bytes) -> bool:
    """A ``<!doctype`` whose ``[`` comes before its ``>``. Each search starts past the last, so linear."""
    pos = lowered.find(b"<!doctype")
    bracket = -2  # the next "[" at or after pos, found again only once pos has passed it
    while pos >= 0:
        if bracket != -1 and bracket < pos:
            bracket = lowered.find(b"[", pos)
        close = lowered.find(b">", pos)
        if bracket != -1 and (close == -1 or bracket < close):
            return True
        if close == -1:
            return False
        pos = lowered.find(b"<!doctype", close)
    return False


def _in_range(match: re.Match[bytes]) -> bytes:
    hexadecimal, decimal = match.groups()
    code = int(hexadecimal, 16) if hexadecimal is not None else int(decimal)
    return match.group(0) if code <= 0x10FFFF else b"&#xFFFD"


def _text(value: Any, cap: int) -> str:
    return value[:cap] if isinstance(value, str) else ""


def read_feed(body: bytes) -> dict[str, Any] | str:
    """A feed's version, title and first entries (each field capped), parsed by feedparser from a file object
    over ``body``; or, in words, why it was not read (it declares entities or hides its markup)."""
    import feedparser  # only the quarantined child reads feeds

    why = refusal(body)
    if why is not None:
        return why
    try:
        parsed = feedparser.parse(io.BytesIO(_NUMERIC_REFERENCE.sub(_in_range, body)))
    except (MemoryError, RecursionError):
        raise  # the child reports these as what they are
    except Exception as exc:  # feedparser's loose parser trips over hostile markup (a KeyError, an IndexError…)
        return f"it does not parse as a feed ({type(exc).__name__} in the feed parser)"
    entries = [{key: _text(entry.get(key), FIELD_CHARS) for key in ENTRY_FIELDS if isinstance(entry.get(key), str)}
               for entry in parsed.entries[:MAX_ENTRIES]]
    return {"version": _text(parsed.get("version"), 40), "title": _text(parsed.feed.get("title"), TITLE_CHARS),
            "entries": entries, "bozo": bool(parsed.bozo)}


def feed_links(html: str, base: str) -> list[str]:
    """The feeds a page advertises (``<link rel=alternate type=rss|atom href>``), absolute, in its order, at
    most ``MAX_ALTERNATES``: read in one linear pass, stopping at the last one wanted."""
    links: list[str] = []
    for token in tokens(html):
        if not isinstance(token, Start) or token.name != "link":
            continue
        attrs = {name: value or "" for name, value in token.attrs}
        rels = attrs.get("rel", "").lower().split()
        kind = attrs.get("type", "").lower().split(";")[0].strip()
        href = attrs.get("href", "").strip()
        if "alternate" in rels and kind in LINK_TYPES and href:
            try:
                link = urljoin(base, href)
            except ValueError:  # a href no url can be made of is no feed
                continue
            if link not in links:
                links.append(link)
            if len(links) == MAX_ALTERNATES:
                break
    return links


def page_words(html: str) -> str:
    """A page's words (``engine.tools.fenced.html_to_text``)."""
    return html_to_text(html) or ""


# --- the child's side of the quarantine (``python -I -m engine.tools.parsers <memory bytes>``) ----------------

REQUEST = struct.Struct("!cII")  # what to read (f, l, w), the base url's length, the document's length
REPLY = struct.Struct("!I")  # the JSON reply's length


def _limit(memory_bytes: int) -> None:
    """The child's bounds, set on itself before it reads anything: its address space, no files written, no
    core, few descriptors; and it dies with the service (Linux's parent-death signal)."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:  # the service was gone before the signal was asked for
        raise SystemExit(0)


def _answer(kind: bytes, base: str, body: bytes) -> dict[str, Any]:
    try:
        if kind == b"f":
            feed = read_feed(body)
            return {"refused": feed} if isinstance(feed, str) else {"ok": feed}
        text = body.decode("utf-8", errors="replace")
        if kind == b"l":
            return {"ok": feed_links(text, base)}
        if kind == b"w":
            return {"ok": page_words(text)}
        return {"error": "an unknown request"}
    except MemoryError:
        return {"error": "memory"}
    except RecursionError:
        return {"error": "nesting"}
    except Exception as exc:  # a parser's own failure on hostile input is a refusal, named, never a crash
        return {"error": type(exc).__name__}


def main(argv: list[str]) -> None:
    _limit(int(argv[1]))
    import feedparser  # noqa: F401 — loaded once, before the first request, not during it

    read, write = sys.stdin.buffer, sys.stdout.buffer
    while True:
        head = read.read(REQUEST.size)
        if len(head) < REQUEST.size:
            return
        kind, base_length, body_length = REQUEST.unpack(head)
        base = read.read(base_length).decode("utf-8", errors="replace")
        body = read.read(body_length)
        try:
            reply = json.dumps(_answer(kind, base, body), ensure_ascii=False).encode()
        except MemoryError:
            reply = b'{"error": "memory"}'
        write.write(REPLY.pack(len(reply)) + reply)
        write.flush()
        if reply.startswith(b'{"error": "memory"'):
            return  # a process that ran out of memory is not trusted with the next document


if __name__ == "__main__":
    main(sys.argv)
