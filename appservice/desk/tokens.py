"""A contact's token and a site's word for who a contact is, both signed, both with an end. Pure: ``now`` is
handed in.

A contact token is ``v2.<kid>.<inbox>.<contact>.<since>.<expires>.<mac>``, the mac an HMAC-SHA256 of
everything before it under the key ``kid`` names: ``desk.secret`` signs, and ``desk.old_secrets`` still
verify, so the secret can be rotated without signing everyone out at once (the kid is derived from the key,
never the key itself). ``since`` is when the contact's chain of tokens began: renewal keeps it, so no chain
outlives ``since + desk.token_max_days``, and a contact whose tokens were revoked at a moment refuses every
token whose chain began before it. A token altered anywhere, signed with an unknown key, or past its time is
refused alike (401, without saying which).

A signed-in contact is the site's word for who they are: an ``identifier_token``, ``v1.<expires>.<mac>``, the
mac an HMAC-SHA256 under the inbox's ``identity_secret`` of ``v1.<inbox identifier>.<identifier>.<expires>``.
It holds for that inbox only, until it expires, and never for more than ``IDENTITY_MAX_SECONDS`` ahead —
seen once, it is not a credential for good. The old static ``identifier_hash`` (an HMAC of the identifier
alone, Chatwoot's) is accepted only where an inbox says ``identity_static_hash``.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Sequence
from dataclasses import dataclass

VERSION = "v2"
_TOKEN = re.compile(r"v2\.([0-9a-f]{8})\.([0-9]{1,18})\.([0-9]{1,18})\.([0-9]{1,12})\.([0-9]{1,12})\.([0-9a-f]{64})")
IDENTITY_VERSION = "v1"
_IDENTITY = re.compile(r"v1\.([0-9]{1,12})\.([0-9a-f]{64})")
IDENTITY_MAX_SECONDS = 86_400  # a site signs a page's visitor for minutes or hours; a day ahead is the most held


@dataclass(frozen=True)
class ContactToken:
    inbox_id: int
    contact_id: int
    since: int  # unix seconds: when this contact's chain of tokens began (renewal keeps it)
    expires: int  # unix seconds


def _mac(secret: str, message: str) -> str:
    return hmac.new(secret.encode(), message.encode(), hashlib.sha256).hexdigest()


def kid(secret: str) -> str:
    """The key's id in a token: a hash of the key, short, telling which key signed and nothing of it."""
    return hashlib.sha256(b"summon desk key id\x00" + secret.encode()).hexdigest()[:8]


def mint(secret: str, inbox_id: int, contact_id: int, since: int, expires: int) -> str:
    message = f"{VERSION}.{kid(secret)}.{inbox_id}.{contact_id}.{since}.{expires}"
    return f"{message}.{_mac(secret, message)}"


def verify(secrets: Sequence[str], token: str, now: float) -> ContactToken | None:
    """The contact the token names, or None: malformed, forged, signed by no key of ``secrets``, or expired
    (one answer for all)."""
    match = _TOKEN.fullmatch(token.strip())
    if match is None:
        return None
    key_id, inbox, contact, since, expires, given = match.groups()
    secret = next((s for s in secrets if hmac.compare_digest(kid(s), key_id)), None)
    if secret is None:
        return None
    expected = _mac(secret, f"{VERSION}.{key_id}.{inbox}.{contact}.{since}.{expires}")
    if not hmac.compare_digest(given.encode(), expected.encode()):
        return None
    if int(expires) <= now:
        return None
    return ContactToken(int(inbox), int(contact), int(since), int(expires))


def identity_token(identity_secret: str, inbox: str, identifier: str, expires: int) -> str:
    """What a site sends as ``identifier_token`` to say a contact is its account ``identifier`` in ``inbox``
    (the inbox's public identifier) until ``expires``."""
    return f"{IDENTITY_VERSION}.{expires}.{_mac(identity_secret, _identity_message(inbox, identifier, expires))}"


def identity_token_holds(identity_secret: str, inbox: str, identifier: str, given: str, now: float) -> bool:
    match = _IDENTITY.fullmatch(given.strip().lower())
    if match is None:
        return False
    expires, mac = int(match.group(1)), match.group(2)
    expected = _mac(identity_secret, _identity_message(inbox, identifier, expires))
    return hmac.compare_digest(mac.encode(), expected.encode()) and now < expires <= now + IDENTITY_MAX_SECONDS


def _identity_message(inbox: str, identifier: str, expires: int) -> str:
    return f"{IDENTITY_VERSION}.{inbox}.{identifier}.{expires}"


def identity_hash(identity_secret: str, identifier: str) -> str:
    """The static ``identifier_hash`` (Chatwoot's): held only where an inbox keeps ``identity_static_hash``."""
    return _mac(identity_secret, identifier)


def identity_holds(identity_secret: str, identifier: str, given: str) -> bool:
    return hmac.compare_digest(given.strip().lower().encode(), identity_hash(identity_secret, identifier).encode())
