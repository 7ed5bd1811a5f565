"""How many contacts and conversations may be started, and from where: nobody mints contacts without bound,
each a fresh spender under no ceiling yet, nor fills a contact with conversations.

A call is from ``request.remote`` — unless that is one of ``desk.trusted_proxies``, when it is from the last
address in X-Forwarded-For that is none of them (the hops a client writes itself come before the proxies').
What is stored is its *origin*: an HMAC of the address (an IPv6 one cut to its /64, what one host is usually
given) under the desk's secret, so a stored row names no address and cannot be turned back into one by trying
them all; and it is forgotten after a day (``forget_origins``), the limits reading only the last hour. Counted
from the stored rows, with the origin's lock (and for contacts the inbox's row) taken, so every
``summon serve`` process agrees and racing calls are counted one after another.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
from collections.abc import Callable
from ipaddress import IPv4Network, IPv6Network
from typing import NoReturn

from aiohttp import web

from appservice.config import Desk as DeskConfig
from appservice.desk.desk import InboxConfig
from appservice.desk.errors import RequestRefused
from appservice.desk.tables import DeskTables
from engine.store import Tx

log = logging.getLogger(__name__)

HOUR = 3600.0
DAY = 86_400.0
IPV6_HOST_PREFIX = 64


def client_address(remote: str | None, forwarded: str | None,
                   trusted: tuple[IPv4Network | IPv6Network, ...]) -> str:
    """Who is calling: ``remote``, or behind trusted proxies the last hop of ``forwarded`` that is not one."""
    address = remote or ""
    if not trusted or not _is_trusted(address, trusted):
        return address
    hops = [hop.strip() for hop in (forwarded or "").split(",") if hop.strip()]
    for hop in reversed(hops):
        if not _is_trusted(hop, trusted):
            return hop
    return hops[0] if hops else address


def _is_trusted(address: str, trusted: tuple[IPv4Network | IPv6Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in trusted if network.version == ip.version)


def origin_of(address: str, secret: str) -> str:
    """The address as stored: keyed, hashed, an IPv6 one by its /64."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        key = address  # not an address (a proxy's odd hop): counted as itself
    else:
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            key = str(ip.ipv4_mapped)
        elif isinstance(ip, ipaddress.IPv6Address):
            key = str(ipaddress.ip_network(f"{ip}/{IPV6_HOST_PREFIX}", strict=False))
        else:
            key = str(ip)
    return hmac.new(secret.encode(), b"desk-origin:" + key.encode(), hashlib.sha256).hexdigest()[:32]


class Arrivals:
    """The limits on what is started, checked in the caller's transaction before it starts anything."""

    def __init__(self, config: DeskConfig, words: Callable[[str], str]) -> None:
        self.config = config
        self._words = words

    def origin(self, request: web.Request) -> str:
        address = client_address(request.remote, request.headers.get("X-Forwarded-For"), self.config.trusted_proxies)
        return origin_of(address, self.config.secret)

    async def contact(self, tx: Tx, origin: str, inbox: InboxConfig) -> None:
        """A contact may be made in ``inbox`` from ``origin``, else 429 (the origin's lock and the inbox's row stay
        taken until the commit, so the next one counts this one; the origin's always first)."""
        await tx.of(DeskTables).lock_origin(origin)
        await tx.of(DeskTables).lock_inbox(inbox.row.id)
        in_inbox, from_origin = await tx.of(DeskTables).contacts_made_lately(inbox.row.id, origin, HOUR)
        name = inbox.row.name
        if from_origin >= self.config.contacts_per_address_hour:
            self._refuse(f"{from_origin} contacts made from origin {origin} in the last hour (inbox {name})")
        if in_inbox >= inbox.settings.contacts_per_hour:
            self._refuse(f"{in_inbox} contacts made in inbox {name} in the last hour (origin {origin})")

    async def conversation(self, tx: Tx, origin: str, contact_id: int) -> None:
        """A conversation may be started from ``origin``, else 429."""
        await tx.of(DeskTables).lock_origin(origin)
        started = await tx.of(DeskTables).conversations_made_lately(origin, HOUR)
        if started >= self.config.conversations_per_address_hour:
            self._refuse(f"{started} conversations started from origin {origin} in the last hour (contact {contact_id})")

    def _refuse(self, why: str) -> NoReturn:
        log.warning("desk: a new contact or conversation refused: %s", why)
        raise RequestRefused(429, self._words("too_many_new"))
