"""Which puppets a line names (SPEC §4: the first one named is summoned).

When the event carries `m.mentions`, only its `user_ids` count: the sender's
client said exactly whom it meant, so "@Helper" typed in text with
`m.mentions: {}` names nobody. Without `m.mentions` (older clients, bridges)
a puppet is named by a pill or matrix.to link, its bare user id, or its display
name as a whole word ("Helper, …", "@helper …"). Reply fallbacks are already
gone from a `Line`, so a quoted line that named a bot is not a new mention.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from appservice.matrix.inbound.said import Line, matrix_to_user_id, read_event
from appservice.matrix.ours import Puppet

__all__ = ["named_bots"]


_MATRIX_TO_LINK = re.compile(r"https?://matrix\.to/#/[^\s<>\"')\]]+", re.IGNORECASE)


def named_bots(line: Line | Mapping[str, Any], puppets: Sequence[Puppet]) -> list[str]:
    """Puppet user ids `line` names, in the order they first appear, without repeats.

    Takes a `Line` from `said.read_event` or the raw event dict (read here).
    The sender never names itself. With `m.mentions`, listed puppets are ordered
    by where they first appear in the text; any not found there follow in
    `user_ids` order.
    """
    if not isinstance(line, Line):
        read = read_event(line)
        if read is None:
            return []
        line = read
    candidates = [p for p in _unique(puppets) if p.user_id != line.sender]
    if not candidates:
        return []
    haystack = _haystack(line)

    if line.mentions is not None:
        by_id = {p.user_id: p for p in candidates}
        listed = [by_id[uid] for uid in dict.fromkeys(line.mentions) if uid in by_id]
        found = [
            (pos, i, p.user_id)
            for i, p in enumerate(listed)
            if (pos := _first_position(haystack, p)) is not None
        ]
        found_ids = {uid for _, _, uid in found}
        return [uid for _, _, uid in sorted(found)] + [
            p.user_id for p in listed if p.user_id not in found_ids
        ]

    named = [
        (pos, i, p.user_id)
        for i, p in enumerate(candidates)
        if (pos := _first_position(haystack, p)) is not None
    ]
    return [uid for _, _, uid in sorted(named)]


def _haystack(line: Line) -> str:
    """The line's words with every pill and matrix.to link turned into its user id (the pills as the
    line was read: its HTML is flattened once, by ``said``)."""
    text = line.text_with_ids or line.text

    def to_user_id(match: re.Match[str]) -> str:
        return matrix_to_user_id(match.group(0)) or match.group(0)

    return _MATRIX_TO_LINK.sub(to_user_id, text)


def _first_position(haystack: str, puppet: Puppet) -> int | None:
    positions = []
    user_id = re.search(rf"(?<![\w@]){re.escape(puppet.user_id)}(?![\w-]|[.:]\w)", haystack, re.IGNORECASE)
    if user_id is not None:
        positions.append(user_id.start())
    name = puppet.display_name.strip()
    if name:
        # A whole word, optionally with "@" in front: "Helper, …", "@helper …" — not "helpers".
        by_name = re.search(rf"(?<![\w@])@?{re.escape(name)}(?!\w)", haystack, re.IGNORECASE)
        if by_name is not None:
            positions.append(by_name.start())
    return min(positions) if positions else None


def _unique(puppets: Sequence[Puppet]) -> list[Puppet]:
    seen: set[str] = set()
    unique = []
    for puppet in puppets:
        if puppet.user_id not in seen:
            seen.add(puppet.user_id)
            unique.append(puppet)
    return unique
