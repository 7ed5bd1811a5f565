"""The instance's sealing keys as written in summon.yaml (``members.keys``): ``["k2:<base64 of 32 bytes>", …]``,
read where the config is read (so a bad key is refused on load) and by the keyring that seals with them
(``appservice.members.seal``)."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence

KEY_BYTES = 32
_KEY_ID = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")


def parse_keys(entries: Sequence[str]) -> dict[str, bytes]:
    """The keys by id, in order (the first seals). Raises ``ValueError`` in one line naming the entry (never the
    key itself)."""
    keys: dict[str, bytes] = {}
    for n, entry in enumerate(entries, start=1):
        key_id, sep, encoded = entry.strip().partition(":")
        if not sep or not _KEY_ID.fullmatch(key_id):
            raise ValueError(f"key {n}: write it as <id>:<base64 key>, the id letters, digits, '.', '_' or '-'")
        try:
            key = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"key {key_id}: not base64") from None
        if len(key) != KEY_BYTES:
            raise ValueError(f"key {key_id}: {len(key)} bytes; a key is {KEY_BYTES} random bytes "
                             "(`summon keys new` makes one)")
        if key_id in keys:
            raise ValueError(f"key {key_id}: named twice")
        keys[key_id] = key
    if not keys:
        raise ValueError("no keys: member bots need at least one (`summon keys new` makes one)")
    return keys
