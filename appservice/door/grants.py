"""Door grants: what a process outside the deployment (a voice front end's worker, a script) holds instead of
a person's session. Pure: no I/O; ``now`` is handed in.

A grant is one door and a short clock: one bot, one person, one room (or none), whether its front end said the
session is one-to-one, the ceilings the runs it asks for may not exceed, an audience (which door it opens), when it was made and when it dies (at most thirty
minutes later), and an id of its own. It is signed rather than stored because the door verifies it on every
turn, and a lookup per turn is a round trip in the middle of somebody speaking:

    sg1.<key id>.<payload>.<signature>

``payload`` is the grant as compact JSON in unpadded base64url; ``signature`` is HMAC-SHA256 under the key the
key id names, over everything before it (the version and the key id included, so neither can be swapped).
Several keys may verify at once and one signs, so a key is rotated by adding the new one, signing with it, and
removing the old one once its last grants have expired (thirty minutes at most).

Every way a grant can fail — malformed, an unknown key, a bad signature, any field tampered, expired, for
another audience — raises the same ``GrantRefused``; its message is for the log, never for the caller.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from appservice.door.errors import GrantRefused
from engine.core.limits import WINDOWS, Ceilings

VERSION = "sg1"
MAX_MINUTES = 30.0
# A grant made by a clock a little ahead of the verifier's is still good; one made far in the future is not.
SKEW_SECONDS = 60
MAX_TOKEN_CHARS = 4096
MIN_KEY_CHARS = 32

KEY_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")
BOT = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
USER_ID = re.compile(r"@[^\s:]{1,255}:[^\s]{1,255}")
# A room id: ``!opaque:server``, or from room version 12 on, ``!opaque`` with no server part.
ROOM_ID = re.compile(r"![^\s:]{1,255}(?::[^\s]{1,255})?")
GRANT_ID = re.compile(r"[A-Za-z0-9_-]{16,64}")
_FIELDS = frozenset({"v", "id", "bot", "sub", "room", "aud", "iat", "exp", "lim", "by"})
_LIMIT_FIELDS = frozenset({"steps", "spend", "minutes", "per"})

MintedBy = Literal["start", "operator"]


@dataclass(frozen=True)
class Grant:
    id: str
    bot: str
    person: str
    room: str | None
    audience: str
    issued_at: datetime
    expires_at: datetime
    ceilings: Ceilings
    minted_by: MintedBy
    # The front end said the session is one-to-one (a headset, a phone to the ear): with no room, it is then the
    # person's alone, and a personal tool may answer there. Otherwise whoever is near may hear it.
    one_to_one: bool = False


def new_grant(*, bot: str, person: str, room: str | None, audience: str, ceilings: Ceilings, now: datetime,
              minutes: float, minted_by: MintedBy, one_to_one: bool = False) -> Grant:
    """A grant from ``now`` for ``minutes`` (at most thirty), with an id of its own. Raises ``ValueError`` for a
    field no grant may carry (the caller's mistake, not a refusal)."""
    if not 0 < minutes <= MAX_MINUTES:
        raise ValueError(f"a grant lives for at most {MAX_MINUTES:g} minutes, not {minutes:g}")
    if not _text(person, USER_ID):
        raise ValueError(f"a grant is for a person, @name:server, not {person[:80]!r}")
    if room is not None and not _text(room, ROOM_ID):
        raise ValueError(f"a grant names a room by its id (!id:server, or !id), not {room[:80]!r}")
    if not _text(bot, BOT):
        raise ValueError(f"{bot[:80]!r} is not a bot's slug")
    issued = now.astimezone(UTC).replace(microsecond=0)
    grant = Grant(id=secrets.token_urlsafe(18), bot=bot, person=person, room=room, audience=audience,
                  issued_at=issued, expires_at=issued + timedelta(seconds=int(minutes * 60)), ceilings=ceilings,
                  minted_by=minted_by, one_to_one=one_to_one)
    _check(_payload(grant))  # what would not verify is not minted
    return grant


def mint(grant: Grant, key_id: str, key: str) -> str:
    """The signed token for ``grant`` under ``key`` (named ``key_id``)."""
    if not KEY_ID.fullmatch(key_id):
        raise ValueError(f"a key id is 1-32 letters, digits, '_' or '-', not {key_id!r}")
    if len(key) < MIN_KEY_CHARS:
        raise ValueError(f"a grant key is at least {MIN_KEY_CHARS} characters")
    body = json.dumps(_payload(grant), separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    signed = f"{VERSION}.{key_id}.{_b64(body.encode())}"
    return f"{signed}.{_b64(_sign(key, signed))}"


def verify(token: str, keys: Mapping[str, str], *, audience: str, now: datetime) -> Grant:
    """The grant ``token`` carries, when it verifies under one of ``keys`` (key id → key) for ``audience`` at
    ``now``; otherwise ``GrantRefused`` (why is in its message, for the log)."""
    if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS:
        raise GrantRefused("malformed: not a grant")
    parts = token.split(".")
    if len(parts) != 4:
        raise GrantRefused("malformed: not four parts")
    version, key_id, payload, signature = parts
    if version != VERSION:
        raise GrantRefused(f"unknown version {version[:8]!r}")
    key = keys.get(key_id)
    if key is None:
        raise GrantRefused(f"unknown key id {key_id[:32]!r}")
    try:
        given = _unb64(signature)
    except ValueError:
        raise GrantRefused("malformed signature") from None
    # Compared in constant time, so how long a refusal takes says nothing about how much of it was right.
    if not hmac.compare_digest(_sign(key, f"{version}.{key_id}.{payload}"), given):
        raise GrantRefused(f"bad signature (key {key_id})")
    try:
        fields = json.loads(_unb64(payload))
    except (ValueError, UnicodeDecodeError):
        raise GrantRefused("malformed payload under a good signature") from None
    grant = _check(fields)
    if grant.audience != audience:
        raise GrantRefused(f"grant {grant.id} is for another audience ({grant.audience[:64]!r})")
    if now >= grant.expires_at:
        raise GrantRefused(f"grant {grant.id} expired at {grant.expires_at.isoformat()}")
    if grant.issued_at > now + timedelta(seconds=SKEW_SECONDS):
        raise GrantRefused(f"grant {grant.id} was issued in the future ({grant.issued_at.isoformat()})")
    return grant


# --- the payload ------------------------------------------------------------------------------------------

def _payload(grant: Grant) -> dict[str, Any]:
    c = grant.ceilings
    return {
        "v": 1, "id": grant.id, "bot": grant.bot, "sub": grant.person, "room": grant.room, "aud": grant.audience,
        "iat": int(grant.issued_at.timestamp()), "exp": int(grant.expires_at.timestamp()),
        "lim": {"steps": c.steps, "spend": c.spend, "minutes": c.minutes, "per": dict(c.per)},
        "by": grant.minted_by, "one": grant.one_to_one,
    }


def _check(fields: Any) -> Grant:
    """A payload read back, every field of the right kind, or ``GrantRefused``. (A payload that verified was
    made by us; this is the second line, for a key that leaked or a version that changed.)"""
    # "one" (one-to-one) came later: a grant made before it (30 minutes at most) still verifies, as not one.
    if not isinstance(fields, dict) or set(fields) - {"one"} != _FIELDS or fields.get("v") != 1:
        raise GrantRefused("payload has the wrong fields or version")
    one = fields.get("one", False)
    lim = fields["lim"]
    room = fields["room"]
    ok = (
        _text(fields["id"], GRANT_ID) and _text(fields["bot"], BOT) and _text(fields["sub"], USER_ID)
        and (room is None or _text(room, ROOM_ID)) and isinstance(fields["aud"], str) and 0 < len(fields["aud"]) <= 200
        and _whole(fields["iat"]) and _whole(fields["exp"]) and fields["by"] in ("start", "operator")
        and isinstance(lim, dict) and set(lim) == _LIMIT_FIELDS and _whole(lim["steps"]) and lim["steps"] > 0
        and _money(lim["spend"]) and _number(lim["minutes"]) and lim["minutes"] > 0
        and isinstance(lim["per"], dict) and all(w in WINDOWS and _money(usd) for w, usd in lim["per"].items())
        and isinstance(one, bool)
    )
    if not ok:
        raise GrantRefused("payload field of the wrong kind")
    issued = datetime.fromtimestamp(fields["iat"], UTC)
    expires = datetime.fromtimestamp(fields["exp"], UTC)
    if not issued < expires <= issued + timedelta(minutes=MAX_MINUTES):
        raise GrantRefused(f"grant {fields['id']} lives longer than {MAX_MINUTES:g} minutes, or not at all")
    return Grant(id=fields["id"], bot=fields["bot"], person=fields["sub"], room=room, audience=fields["aud"],
                 issued_at=issued, expires_at=expires, minted_by=fields["by"], one_to_one=one,
                 ceilings=Ceilings(steps=lim["steps"], spend=float(lim["spend"]), minutes=float(lim["minutes"]),
                                   per={w: float(usd) for w, usd in lim["per"].items()}))


def _text(value: Any, pattern: re.Pattern[str]) -> bool:
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**53


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < float("inf")


def _money(value: Any) -> bool:
    return _number(value)


def _sign(key: str, signed: str) -> bytes:
    return hmac.new(key.encode(), signed.encode(), hashlib.sha256).digest()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    """Unpadded base64url, strictly and in its one canonical spelling (a text whose unused trailing bits were
    changed decodes to the same bytes, and is refused): anything else is a ValueError."""
    if not re.fullmatch(r"[A-Za-z0-9_-]*", text) or len(text) % 4 == 1:
        raise ValueError("not base64url")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error as exc:
        raise ValueError("not base64url") from exc
    if _b64(raw) != text:
        raise ValueError("not canonical base64url")
    return raw
