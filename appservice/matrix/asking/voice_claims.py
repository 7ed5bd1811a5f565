"""What a voice note says of itself, read before anything is fetched (SPEC §12, §15). Pure.

A voice note's event claims a link, a size, a length and a type; every one of them is the sender's, so a claim can
only refuse a note here — what is fetched is measured again (``appservice.speech.audio.bound``). The link is followed
only when it is a content URI by the Matrix grammar, since the homeserver is asked for it with the service's token:
``mxc://../..`` would otherwise be a path under the media API (``/_matrix/client/v1/``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# The ``### voice`` keys: a reason of its own is said in its own words, any other summons refusal as ``refused``.
VOICE_WORDS = frozenset({"too_large", "too_long", "not_audio", "bad_link", "not_heard", "no_words", "slow_down",
                         "busy", "refused"})

# The Matrix grammar of a content URI (spec: appendices, "Server Name" and "Matrix Content (mxc://) URIs"): a
# server name — a DNS name of labels, an IPv4 address or a bracketed IPv6 literal, with an optional port — and an
# opaque media id of [A-Za-z0-9_-]. Anything else ("..", a path, a query) is not fetched: the URI becomes a path
# on the homeserver, asked with the service's token.
_MXC = re.compile(r"mxc://((?:[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?)"
                  r"/([A-Za-z0-9_-]{1,255})", re.ASCII)


def media_parts(url: str) -> tuple[str, str] | None:
    """(server name, media id) of a well-formed ``mxc://`` URI; None for anything else."""
    found = _MXC.fullmatch(url) if len(url) <= 600 else None
    return (found.group(1), found.group(2)) if found is not None else None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def claimed_refusal(content: Mapping[str, Any], media_url: str | None, *, max_bytes: int,
                    max_seconds: float) -> str | None:
    """Why a voice note is refused on what its own event says, before anything is fetched (a ``### voice``
    key), or None. A claim can only refuse it here: what is fetched is measured again."""
    if media_url is None:
        return "not_audio"  # nothing to fetch (or an encrypted file, which this service never reads)
    if media_parts(media_url) is None:
        return "bad_link"
    info = content.get("info")
    info = info if isinstance(info, Mapping) else {}
    size, ms, mimetype = _number(info.get("size")), _number(info.get("duration")), info.get("mimetype")
    if size is not None and size > max_bytes:
        return "too_large"
    if ms is not None and ms / 1000 > max_seconds:
        return "too_long"
    if isinstance(mimetype, str) and mimetype and not mimetype.startswith("audio/"):
        return "not_audio"
    return None


def claimed_bytes(content: Mapping[str, Any], max_bytes: int) -> float:
    """How many bytes the note says it is (no more than the cap; the cap when it says nothing usable): what its
    hearing is reserved for before it is fetched."""
    info = content.get("info")
    size = _number(info.get("size")) if isinstance(info, Mapping) else None
    return min(float(max_bytes), size) if size is not None and size > 0 else float(max_bytes)
