"""The inbound webhook a site posts its own events to: ``POST /hooks/events/site.<name>`` (SPEC §6).

Signed the way Chatwoot signs its webhooks, so a site's existing code can do it:

- ``X-Summon-Key``: the id of a key in ``hooks.keys``; each key may post only the events it is scoped to
  (a name, or a prefix ``site.support.*``), for the rooms it is scoped to (room ids, or ``*``);
- ``X-Summon-Timestamp``: unix seconds, inside the signed string, more than five minutes off → 401;
- ``X-Summon-Delivery``: a UUID, the same on every retry: a delivery is acted on once;
- ``X-Summon-Signature``: ``sha256=<hex HMAC-SHA256(secret, "<timestamp>.<event name>.<raw body>")>``,
  compared in constant time. The event's name is signed, so a post signed for one event cannot be
  replayed to another event the same key may post.

The body is read under its cap while it streams in (413 past it). Anything wrong with who is posting
is 401 (403 for a good key not scoped to the event) and the body is never read as JSON. The body is a
JSON object: ``room_id`` (the room the bots speak in) is required, and must be one the key is scoped
to (403 otherwise); ``subject`` (who it is about: ``serves:`` is checked against it) and
``conversation`` (one run per bot per conversation at a time; the subject, else the room, when absent)
are optional; all of it rides on the run, untouched, as its facts. Every verified delivery is
remembered (a replay is 200, and wakes nothing); the bots that hear it are woken in the same
transaction, and an event no bot hears is 202 with no runs.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from appservice.bodies import read_capped, too_large
from appservice.config import ANY_ROOM, HookKey
from engine.clock import Clock
from engine.content import Registry
from engine.run.events import hearers, wake
from engine.run.summon import Summoned
from engine.store import Store
from engine.surface import SurfaceFacts

log = logging.getLogger(__name__)

KEY = "X-Summon-Key"
TIMESTAMP = "X-Summon-Timestamp"
DELIVERY = "X-Summon-Delivery"
SIGNATURE = "X-Summon-Signature"
HEADERS = (KEY, TIMESTAMP, DELIVERY, SIGNATURE)
TOLERANCE_SECONDS = 300
MAX_BODY = 64 * 1024  # facts for a prompt, not a file upload
SITE_EVENT = re.compile(r"site\.[a-z0-9][a-z0-9_-]*(?:\.[a-z0-9][a-z0-9_-]*)*")
ROOM_ID = re.compile(r"![^:\s]+:\S+")
_DIGITS = re.compile(r"[0-9]{1,12}")
# Compared against when the key id is unknown, so an unknown key takes as long as a bad signature.
_NO_SECRET = "summon: no such key"


@dataclass(frozen=True)
class Verified:
    key_id: str
    delivery: str
    signature: str


@dataclass(frozen=True)
class Rejected:
    status: int
    reason: str  # said to the sender: never which of key and signature was wrong


@dataclass(frozen=True)
class SiteEvent:
    room_id: str
    subject: str | None
    conversation: str
    facts: dict[str, Any]


def sign(secret: str, timestamp: str, event: str, body: bytes) -> str:
    """The ``X-Summon-Signature`` value for ``body`` posted as ``event`` at ``timestamp``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.{event}.".encode() + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def in_scope(event: str, scopes: tuple[str, ...]) -> bool:
    """Whether a key scoped to ``scopes`` (names, or prefixes ending in ``.*``) may post ``event``."""
    return any(event.startswith(s[:-1]) if s.endswith(".*") else event == s for s in scopes)


def room_in_scope(room_id: str, rooms: tuple[str, ...]) -> bool:
    """Whether a key scoped to ``rooms`` (room ids, or ``*`` for any) may post for ``room_id``."""
    return ANY_ROOM in rooms or room_id in rooms


def verify(headers: Mapping[str, str], body: bytes, event: str, keys: Mapping[str, HookKey], now: float,
           *, tolerance: float = TOLERANCE_SECONDS) -> Verified | Rejected:
    """Who posted ``body`` and whether they may post ``event``. Pure: ``now`` is unix seconds."""
    missing = [name for name in HEADERS if not headers.get(name)]
    if missing:
        return Rejected(401, f"missing {', '.join(missing)}")
    key_id, ts, delivery, given = (headers[name] for name in HEADERS)
    if not _DIGITS.fullmatch(ts):
        return Rejected(401, f"{TIMESTAMP} is unix seconds")
    if abs(now - int(ts)) > tolerance:
        return Rejected(401, f"{TIMESTAMP} is more than {tolerance / 60:g} minutes off")
    key = keys.get(key_id)
    expected = sign(key.secret if key is not None else _NO_SECRET, ts, event, body)
    if not hmac.compare_digest(given.encode(), expected.encode()) or key is None:
        return Rejected(401, "unknown key or bad signature")
    if not in_scope(event, key.events):
        return Rejected(403, f"key {key_id} may not post {event}")
    try:
        delivery = str(uuid.UUID(delivery))
    except ValueError:
        return Rejected(400, f"{DELIVERY} is not a UUID")
    return Verified(key_id, delivery, expected)


def site_event(body: bytes) -> SiteEvent | Rejected:
    """The body as an event: a JSON object naming its room, and maybe its subject and conversation."""
    try:
        facts = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return Rejected(400, "the body is not JSON")
    if not isinstance(facts, dict):
        return Rejected(400, "the body is not a JSON object")
    for field in ("room_id", "subject", "conversation"):
        value = facts.get(field)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            return Rejected(400, f"{field} is text")
    room_id, subject, conversation = facts.get("room_id"), facts.get("subject"), facts.get("conversation")
    if room_id is None or not ROOM_ID.fullmatch(room_id):
        # The bots answer in a room; a run with nowhere to speak would think for nothing.
        return Rejected(400, "room_id names the room the bots speak in, like !abc:example.org")
    return SiteEvent(room_id, subject, conversation or subject or room_id, facts)


def _error(status: int, reason: str) -> web.Response:
    return web.json_response({"error": reason}, status=status)


class EventHooks:
    def __init__(self, store: Store, registry: Callable[[], Registry], keys: Mapping[str, HookKey],
                 clock: Clock, surface: SurfaceFacts) -> None:
        self.store = store
        self.surface = surface  # the rooms the woken bots speak in
        self._registry = registry
        self._keys = keys
        self._clock = clock

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/hooks/events/{name}", self.event)

    async def event(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if not SITE_EVENT.fullmatch(name):
            return _error(404, "a site posts its own events here, named site.<name>")
        body = await read_capped(request, MAX_BODY)
        if body is None:
            log.warning("site event %s refused: body larger than %d bytes", name, MAX_BODY,
                        extra={"event": name, "key": request.headers.get(KEY)})
            return too_large(_error(413, f"the body is larger than {MAX_BODY} bytes"))
        verdict = verify(request.headers, body, name, self._keys, self._clock.now().timestamp())
        if isinstance(verdict, Rejected):
            return self._refused(name, request.headers.get(KEY), verdict)
        event = site_event(body)
        if isinstance(event, Rejected):
            return self._refused(name, verdict.key_id, event)
        if not room_in_scope(event.room_id, self._keys[verdict.key_id].rooms):
            elsewhere = Rejected(403, f"key {verdict.key_id} may not post for {event.room_id}")
            return self._refused(name, verdict.key_id, elsewhere)
        registry = self._registry()
        heard = hearers(registry, name)
        async with self.store.transaction("wake_site_event") as tx:
            # Every verified delivery is remembered, heard or not: a replay is known as one either way.
            if not await tx.hooks.record_delivery(verdict.delivery, verdict.signature, verdict.key_id, name):
                log.info("site event %s delivery %s replayed; nothing woken", name, verdict.delivery,
                         extra={"event": name, "key": verdict.key_id})
                return web.json_response({"delivery": verdict.delivery, "replayed": True})
            if not heard:
                log.info("site event %s delivery %s recorded; no bot hears it", name, verdict.delivery,
                         extra={"event": name, "key": verdict.key_id})
                return web.json_response({"delivery": verdict.delivery, "runs": []}, status=202)
            results = await wake(tx, registry, name, surface=self.surface, occurrence=verdict.delivery,
                                 place=event.room_id, subject=event.subject, facts=event.facts,
                                 conversation=event.conversation)
        runs = [r.run_id for r in results if isinstance(r, Summoned)]
        refused = [r.reason for r in results if not isinstance(r, Summoned)]
        log.info("site event %s woke %d run(s)", name, len(runs), extra={"event": name, "key": verdict.key_id})
        return web.json_response({"delivery": verdict.delivery, "runs": runs, "refused": refused}, status=202)

    def _refused(self, name: str, key: str | None, rejected: Rejected) -> web.Response:
        log.warning("site event %s refused (%s): %s", name, rejected.status, rejected.reason,
                    extra={"event": name, "key": key})
        return _error(rejected.status, rejected.reason)
