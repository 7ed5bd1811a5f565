"""Room state as we keep it (members, power levels, creation, history visibility, encryption), and what a
change means: one of ours invited (join, or decline and say why), a room turning encrypted (every one of
ours leaves, every run there is cancelled), a person coming or going (the bots that hear it wake, SPEC §6).
What must be said to the homeserver is decided here as a ``Followup`` and carried out by ``rooms`` after
the commit."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Literal

from appservice.matrix.inbound.followups import Decline, Followup, Join, LeaveEncrypted
from appservice.matrix.ours import Ours
from appservice.matrix.tables.lines import LineTables
from appservice.matrix.tables.rooms import Member, RoomTables
from engine.content import Registry
from engine.run.events import hearers, wake
from engine.store import Tx
from engine.surface import SurfaceFacts

log = logging.getLogger(__name__)

# Whose invites our users accept (``appservice.invites``): people on our own server, anybody, or people on
# the servers listed.
Invites = Literal["local", "any"] | tuple[str, ...]


def invite_refusal(invites: Invites, inviter: object, server_name: str) -> str | None:
    """Why an invite from ``inviter`` is declined under the policy (a key of ``rooms.REASONS``), or None. A
    stranger's invite is where spending the operator's money starts, so the default takes only our own."""
    if invites == "any":
        return None
    server = inviter.split(":", 1)[1] if isinstance(inviter, str) and ":" in inviter else None
    if invites == "local":
        return None if server == server_name else "not_local"
    return None if server in invites else "not_listed"


class StateHandler:
    def __init__(self, registry: Callable[[], Registry], ours: Ours, surface: SurfaceFacts, *,
                 invites: Invites = "local") -> None:
        self._registry = registry
        self.ours = ours
        self.surface = surface  # the rooms surface: whom a waking event's bots answer on
        self.invites = invites

    async def event(self, tx: Tx, room_id: str, event: Mapping[str, Any], followups: list[Followup], *,
                    backfill: bool = False) -> None:
        """Keep one state event. ``backfill`` (a room's state read after a join) only records: nothing in
        it is news, so nobody is woken."""
        event_type = event["type"]
        content = event.get("content")
        content = content if isinstance(content, dict) else {}
        state_key = event.get("state_key")
        if event_type == "m.room.member" and isinstance(state_key, str):
            membership = content.get("membership")
            if not isinstance(membership, str):
                return
            name = content.get("displayname")
            before = await tx.of(RoomTables).member(room_id, state_key)
            await tx.of(RoomTables).set_member(room_id, state_key, membership, name if isinstance(name, str) else None)
            if self.ours(state_key):
                await self._our_membership(tx, room_id, state_key, membership, event, followups)
            elif not backfill:
                await self._came_or_went(tx, room_id, state_key, membership, before, event)
        elif event_type == "m.room.encryption" and state_key == "":
            if await tx.of(RoomTables).mark_encrypted(room_id):
                cancelled = await tx.runs.cancel_in_room(room_id)
                log.warning("room %s turned encrypted: leaving; %d run(s) cancelled", room_id, len(cancelled),
                            extra={"room": room_id})
                followups.append(LeaveEncrypted(room_id))
        elif event_type == "m.room.power_levels" and state_key == "":
            await tx.of(RoomTables).set_power_levels(room_id, content)
        elif event_type == "m.room.create" and state_key == "":
            version = content.get("room_version", "1")
            sender = event.get("sender")
            await tx.of(RoomTables).set_create(room_id, content, sender if isinstance(sender, str) else None,
                                      version if isinstance(version, str) else "1")
        elif event_type == "m.room.join_rules" and state_key == "":
            rule = content.get("join_rule")
            if isinstance(rule, str):
                await tx.of(RoomTables).set_join_rule(room_id, rule)
        elif event_type == "m.room.history_visibility" and state_key == "":
            vis = content.get("history_visibility")
            if isinstance(vis, str):
                await tx.of(RoomTables).set_history_visibility(room_id, vis)

    async def _our_membership(self, tx: Tx, room_id: str, user_id: str, membership: str,
                              event: Mapping[str, Any], followups: list[Followup]) -> None:
        if membership == "invite":
            if _stripped_state_encrypted(event):
                await tx.of(RoomTables).mark_encrypted(room_id)
                followups.append(Decline(room_id, user_id, "encrypted"))
                return
            room = await tx.of(RoomTables).get(room_id)
            if room is not None and room.encrypted:
                followups.append(Decline(room_id, user_id, "encrypted"))
                return
            inviter = event.get("sender")
            # One of ours inviting (`!bots add`) was itself let in under the policy.
            refused = None if isinstance(inviter, str) and self.ours(inviter) else invite_refusal(
                self.invites, inviter, self.ours.server_name)
            if refused is not None:
                log.info("declining %s's invite of %s to %s: %s", inviter, user_id, room_id, refused,
                         extra={"room": room_id})
                followups.append(Decline(room_id, user_id, refused))
                return
            # A bot not offered in rooms joins only where one of ours invited it (the desk's staff room).
            by_ours = isinstance(inviter, str) and self.ours(inviter)
            if user_id != self.ours.service_user and not by_ours and not self.ours.offered_in_rooms(user_id):
                followups.append(Decline(room_id, user_id, "not_offered"))
                return
            content = event.get("content")
            if isinstance(content, Mapping) and content.get("is_direct") is True:
                await tx.of(RoomTables).mark_direct(room_id)  # a DM with this bot, as the inviter's client made it
            followups.append(Join(room_id, user_id))
        elif membership == "join":
            await tx.of(RoomTables).mark_joined(room_id)

    async def reacted(self, tx: Tx, room_id: str, event: Mapping[str, Any]) -> None:
        """A person's reaction on a bot's own line — not a keycap on its choices (a press), not a stop sign (a
        cancel): the bot whose line it was wakes if it hears ``reaction`` (SPEC §6), and no other."""
        content = event.get("content")
        rel = content.get("m.relates_to") if isinstance(content, Mapping) else None
        sender, event_id = event.get("sender"), event.get("event_id")
        if not isinstance(rel, Mapping) or rel.get("rel_type") != "m.annotation" or not isinstance(sender, str):
            return
        target, key = rel.get("event_id"), rel.get("key")
        if not isinstance(target, str) or not isinstance(key, str) or not isinstance(event_id, str) or self.ours(sender):
            return
        registry = self._registry()
        if not hearers(registry, "reaction"):
            return  # nobody hears it: costs nothing
        author = await tx.of(LineTables).sender_of(target, room_id)
        if author is None or not self.ours(author):
            return
        said = await tx.of(LineTables).now_reads(target, room_id)
        await wake(tx, registry, "reaction", surface=self.surface, occurrence=event_id, place=room_id,
                   subject=sender, conversation=room_id, only=author,
                   facts={"key": key[:64], "by": sender, "line": target, "said": said[:1000]})

    async def created(self, tx: Tx, room_id: str, create: Mapping[str, Any]) -> None:
        """A room made with our bots in it (their puppets joined within minutes of its creation): the bots in it
        that hear ``room.created`` wake, once for the room (the creation's event id is the occurrence)."""
        event_id, creator = create.get("event_id"), create.get("sender")
        if not isinstance(event_id, str) or not hearers(self._registry(), "room.created"):
            return
        name = await tx.of(LineTables).room_name(room_id)
        await wake(tx, self._registry(), "room.created", surface=self.surface, occurrence=event_id, place=room_id,
                   subject=creator if isinstance(creator, str) else None, conversation=room_id,
                   facts={"creator": creator, "name": name})

    async def _came_or_went(self, tx: Tx, room_id: str, user_id: str, membership: str, before: Member | None,
                            event: Mapping[str, Any]) -> None:
        """A person (never one of ours) joined or left: the bots in the room that hear it wake (SPEC §6).
        Only a change counts: a join that renames is not a joining, and leaving needs having joined."""
        was_joined = before is not None and before.membership == "join"
        if membership == "join" and not was_joined:
            happened = "member.joined"
        elif membership in ("leave", "ban") and was_joined:
            happened = "member.left"
        else:
            return
        event_id = event.get("event_id")
        if not isinstance(event_id, str):
            return
        content = event.get("content")
        name = content.get("displayname") if isinstance(content, dict) else None
        if not isinstance(name, str):
            name = before.display_name if before is not None else None
        await wake(tx, self._registry(), happened, surface=self.surface, occurrence=event_id, place=room_id,
                   subject=user_id, conversation=room_id,
                   facts={"user": user_id, "display_name": name, "membership": membership,
                          "by": event.get("sender")})


def _stripped_state_encrypted(event: Mapping[str, Any]) -> bool:
    unsigned = event.get("unsigned")
    state = unsigned.get("invite_room_state") if isinstance(unsigned, dict) else None
    if not isinstance(state, list):
        return False
    return any(isinstance(s, dict) and s.get("type") == "m.room.encryption" for s in state)
