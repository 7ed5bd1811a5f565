"""A contact's token: who is calling the desk's public API, signed by the desk and checked in constant time.

``v1.<inbox>.<contact>.<expires>.<mac>``, the mac an HMAC-SHA256 of everything before it under
``desk.secret``. It names one contact in one inbox until it expires; a token altered anywhere, signed with
another secret, or past its time is refused alike (401, without saying which). Pure: ``now`` is handed in.

A signed-in contact is the site's word for who they are: the site signs the account id with the inbox's
``identity_secret`` (``identifier_hash``, as Chatwoot's identity validation does), and the desk links the
contact to that account only when the hash matches.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

VERSION = "v1"
_TOKEN = re.compile(r"v1\.([0-9]{1,18})\.([0-9]{1,18})\.([0-9]{1,12})\.([0-9a-f]{64})")


@dataclass(frozen=True)
class ContactToken:
    inbox_id: int
    contact_id: int
    expires: int  # unix seconds


def _mac(secret: str, message: str) -> str:
    return hmac.new(secret.encode(), message.encode(), hashlib.sha256).hexdigest()


def mint(secret: str, inbox_id: int, contact_id: int, expires: int) -> str:
    message = f"{VERSION}.{inbox_id}.{contact_id}.{expires}"
    return f"{message}.{_mac(secret, message)}"


def verify(secret: str, token: str, now: float) -> ContactToken | None:
    """The contact the token names, or None: malformed, forged, or expired (one answer for all three)."""
    match = _TOKEN.fullmatch(token.strip())
    if match is None:
        return None
    inbox, contact, expires, given = match.groups()
    expected = _mac(secret, f"{VERSION}.{inbox}.{contact}.{expires}")
    if not hmac.compare_digest(given.encode(), expected.encode()):
        return None
    if int(expires) <= now:
        return None
    return ContactToken(int(inbox), int(contact), int(expires))


def identity_hash(identity_secret: str, identifier: str) -> str:
    """What a site sends as ``identifier_hash`` to say a contact is its account ``identifier``."""
    return _mac(identity_secret, identifier)


def identity_holds(identity_secret: str, identifier: str, given: str) -> bool:
    return hmac.compare_digest(given.strip().lower().encode(), identity_hash(identity_secret, identifier).encode())
