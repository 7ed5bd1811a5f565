"""Knowing a bridged conversation (SPEC §14): a room is bridged when its state says so — ``m.bridge`` or the
older ``uk.half-shot.bridge`` (MSC2346: ``bridgebot``, ``protocol``, ``network``, ``channel``) — or when one of
its members is a puppet of a bridge the config names (``social.bridges``: a namespace, as the bridge's own
registration writes it). What it is, is recorded once, when the state arrives (``Bridges.state``).

What kind of conversation it is comes from the bridge, as Beeper's and the mautrix bridges write it
(``com.beeper.room_type``: ``dm``, ``group_dm``; this service also reads ``comments`` for a post's comment
thread), else from the room itself (a direct chat is a DM), else it is a group. A line there is of the
conversation's kind: a DM message, a comment, a group message.

A guest is a bridge puppet (a namespace's member, or the room's bridge bot): never one of our people — no
account, no personal data, no memory. ``read_bridge`` and ``guest`` are pure.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from appservice.config import SocialBridge
from appservice.matrix.tables.rooms import RoomTables
from appservice.social.tables import Bridged, SocialTables
from engine.store import Tx

log = logging.getLogger(__name__)

BRIDGE_STATE = ("m.bridge", "uk.half-shot.bridge")
ROOM_TYPES = {"dm": "dm", "group_dm": "group", "group": "group", "comments": "comments", "comment": "comments",
              "post": "comments", "thread": "comments"}
LINE_KINDS = {"dm": "dm", "comments": "comment", "group": "group"}
FIELD_CHARS = 200


def _name(value: object) -> tuple[str | None, str | None]:
    """An MSC2346 section (``{"id", "displayname"}``): its id and what it is called."""
    if not isinstance(value, Mapping):
        return None, None
    ident, shown = value.get("id"), value.get("displayname")
    ident = ident[:FIELD_CHARS] if isinstance(ident, str) and ident else None
    shown = shown[:FIELD_CHARS] if isinstance(shown, str) and shown else None
    return ident, shown


def read_bridge(room_id: str, content: Mapping[str, Any], *, direct: bool) -> Bridged | None:
    """The bridge an ``m.bridge`` state event's content says the room is (None: it says nothing usable — an
    empty content is how a bridge unbridges a room). Pure."""
    protocol, protocol_name = _name(content.get("protocol"))
    if protocol is None:
        return None
    network_id, network_name = _name(content.get("network"))
    channel_id, channel_name = _name(content.get("channel"))
    bot = content.get("bridgebot")
    kind = content.get("com.beeper.room_type")
    conversation = ROOM_TYPES.get(kind, "") if isinstance(kind, str) else ""
    if not conversation:
        conversation = "dm" if direct else "group"
    return Bridged(room_id=room_id, bridge=bot[:FIELD_CHARS] if isinstance(bot, str) and bot else protocol,
                   protocol=protocol, network=network_name or protocol_name or network_id or protocol,
                   channel=channel_name or channel_id, conversation=conversation, known_by="state", bridged=True)


def guest(user_id: str, bridges: Sequence[SocialBridge], room: Bridged | None = None) -> bool:
    """Whether ``user_id`` is a bridge's puppet (a guest), by the config's namespaces or as the room's bridge bot."""
    if room is not None and room.bridge == user_id:
        return True
    return any(re.fullmatch(b.users, user_id) for b in bridges)


class Bridges:
    """Records bridged rooms as their state arrives: the dispatcher hands it every state event, after the
    rooms surface kept it (``appservice.matrix.dispatch``'s state watchers)."""

    def __init__(self, bridges: Sequence[SocialBridge]) -> None:
        self.bridges = tuple(bridges)

    def is_guest(self, user_id: str, room: Bridged | None = None) -> bool:
        return guest(user_id, self.bridges, room)

    async def state(self, tx: Tx, room_id: str, event: Mapping[str, Any]) -> None:
        event_type, content = event.get("type"), event.get("content")
        content = content if isinstance(content, Mapping) else {}
        if event_type in BRIDGE_STATE:
            stored = await tx.of(RoomTables).get(room_id)
            room = read_bridge(room_id, content, direct=stored is not None and stored.direct)
            if room is None:
                if await tx.of(SocialTables).unbridge(room_id):
                    log.info("room %s is no longer bridged (its %s state was cleared)", room_id, event_type,
                             extra={"room": room_id})
                return
            if await tx.of(SocialTables).keep_room(room):
                log.info("room %s is bridged: %s on %s (%s)", room_id, room.conversation, room.network, room.bridge,
                         extra={"room": room_id})
        elif event_type == "m.room.member" and content.get("membership") == "join":
            user = event.get("state_key")
            match = next((b for b in self.bridges if isinstance(user, str) and re.fullmatch(b.users, user)), None)
            if match is None or await tx.of(SocialTables).room(room_id) is not None:
                return
            stored = await tx.of(RoomTables).get(room_id)
            network = match.network or "bridge"
            room = Bridged(room_id=room_id, bridge=match.users, protocol=network.lower(), network=network,
                           channel=None, conversation="dm" if stored is not None and stored.direct else "group",
                           known_by="members", bridged=True)
            if await tx.of(SocialTables).keep_room(room):
                log.info("room %s is bridged: %s's puppet %s is in it", room_id, match.users, user,
                         extra={"room": room_id})
