"""Charters sealed at rest (SPEC §10): AES-256-GCM under the instance's keys. Pure (no I/O; the nonce comes
from ``secrets``).

Every row names the key it is sealed under (``key_id``), so keys rotate: the keyring's first key seals, every
key it holds unseals, and ``summon keys rotate`` re-seals every row under the first. The charter's id is the
associated data, so a sealed blob copied onto another row does not open there.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from appservice.keys import KEY_BYTES, parse_keys
from appservice.members.errors import CharterUnreadable

NONCE_BYTES = 12


def _aad(charter_id: str) -> bytes:
    return b"summon-charter-v1:" + charter_id.encode()


@dataclass(frozen=True)
class Keyring:
    """The instance's keys by id; ``current`` seals."""

    keys: Mapping[str, bytes]
    current: str

    @classmethod
    def parse(cls, entries: Sequence[str]) -> Keyring:
        """``["k2:<base64 of 32 bytes>", "k1:…"]``, the first sealing. Raises ``ValueError`` in one line naming
        the entry (never the key itself)."""
        keys = parse_keys(entries)
        return cls(keys, next(iter(keys)))

    def seal(self, charter_id: str, plaintext: bytes) -> tuple[str, bytes]:
        """(the key id, the nonce and ciphertext) for ``plaintext`` under the current key."""
        nonce = secrets.token_bytes(NONCE_BYTES)
        return self.current, nonce + AESGCM(self.keys[self.current]).encrypt(nonce, plaintext, _aad(charter_id))

    def unseal(self, charter_id: str, key_id: str, sealed: bytes) -> bytes:
        """The plaintext; raises ``CharterUnreadable`` for a key this instance does not hold, or a row that
        does not open (corrupt, tampered, or another charter's)."""
        key = self.keys.get(key_id)
        if key is None:
            raise CharterUnreadable(f"charter {charter_id} is sealed under key {key_id!r}, which is not configured")
        if len(sealed) <= NONCE_BYTES:
            raise CharterUnreadable(f"charter {charter_id} is too short to be sealed")
        try:
            return AESGCM(key).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], _aad(charter_id))
        except InvalidTag:
            raise CharterUnreadable(f"charter {charter_id} does not open under key {key_id!r} (corrupt or "
                                    "tampered)") from None


def new_key() -> str:
    """A fresh key, base64: what ``summon keys new`` prints."""
    return base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()
