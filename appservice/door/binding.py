"""Room binding: the room a voice session names is a claim. It becomes the session's origin only when verified —
the person and the bot both joined, read from our own state and asked of the homeserver when our state does not
say so — and the answer (the ack) says which room the session is bound to now.

- A different room releases the bound one *before* the check, so nothing is said in a room the person may have
  left while the check runs.
- A newer claim supersedes a pending one: every claim is counted, and a verdict for a claim that is no longer
  the latest binds nothing.
- A refusal, an error or silence (no answer within ``check_seconds``) leaves the session on the person's DM
  with the bot (bound to no room).
- Re-announcing the room already bound changes nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from appservice.door.grants import Grant
from appservice.door.shapes import Claim
from appservice.door.tables import DoorTables
from appservice.matrix.errors import MatrixError
from appservice.matrix.tables.rooms import RoomTables
from engine.content import Registry
from engine.store import Families, Store

log = logging.getLogger(__name__)

Verdict = Literal["joined", "person_not_joined", "bot_not_joined", "encrypted", "unknown"]


class MemberState(Protocol):
    """The homeserver, as the binding asks it (``appservice.matrix.delivery.homeserver.Homeserver``)."""

    async def state_event(self, user_id: str, room_id: str, event_type: str, state_key: str) -> Any: ...


@dataclass(frozen=True)
class Ack:
    """What a claim came to: the room the session is bound to now (None: the person's DM with the bot)."""

    room_id: str | None
    room_name: str | None
    bound: bool
    surface: Literal["room", "dm", "refused"]
    reason: str | None = None  # for a refusal: person_not_joined, bot_not_joined, encrypted, no_answer, superseded

    def frame(self) -> dict[str, Any]:
        """The ``session.context.ack`` frame."""
        frame: dict[str, Any] = {"type": "session.context.ack", "version": 1, "room_id": self.room_id,
                                 "room_name": self.room_name, "bound": self.bound, "surface": self.surface}
        if self.reason is not None:
            frame["reason"] = self.reason
        return frame


class Binding:
    def __init__(self, store: Store, registry: Callable[[], Registry], homeserver: MemberState | None, *,
                 check_seconds: float) -> None:
        self.store = store
        self._registry = registry
        self.homeserver = homeserver
        self.check_seconds = check_seconds

    async def claim(self, grant: Grant, claim: Claim) -> Ack:
        """Take a claim on ``grant``'s session and verify it; the ack says what it came to."""
        bot = self._registry().get(grant.bot)
        puppet = bot.user_id if bot is not None else None
        room = claim.room_id
        async with self.store.transaction("door_claim") as tx:
            session = await tx.of(DoorTables).open_session(grant.id, bot=grant.bot, person=grant.person,
                                                 one_to_one=grant.one_to_one,
                                                 expires_at=grant.expires_at)
            if room is not None and room == session.room_id and session.pending_room is None:
                return Ack(room, session.room_name, bound=True, surface="room")  # announced again: nothing changes
            number = await tx.of(DoorTables).claim(grant.id, room)
            if room is None:
                await tx.of(DoorTables).bind(grant.id, number, None, None)
                log.info("door session %s is on the DM", grant.id, extra={"bot": grant.bot})
                return Ack(None, None, bound=False, surface="dm")
            verdict: Verdict = "bot_not_joined" if puppet is None else await self.known(tx, room, grant.person, puppet)
        if verdict == "unknown" and puppet is not None:
            verdict = await self.ask_homeserver(room, grant.person, puppet)
        async with self.store.transaction("door_claim_verdict") as tx:
            if verdict == "joined":
                latest = await tx.of(DoorTables).bind(grant.id, number, room, claim.room_name)
            else:
                latest = await tx.of(DoorTables).refuse(grant.id, number)
        if not latest:
            log.info("door session %s: the claim on %s was superseded by a newer one", grant.id, room)
            return Ack(None, None, bound=False, surface="refused", reason="superseded")
        if verdict == "joined":
            log.info("door session %s is bound to %s", grant.id, room, extra={"bot": grant.bot, "room": room})
            return Ack(room, claim.room_name, bound=True, surface="room")
        reason = "no_answer" if verdict == "unknown" else verdict
        log.info("door session %s: the claim on %s was refused (%s); it stays on the DM", grant.id, room, reason,
                 extra={"bot": grant.bot, "room": room})
        return Ack(None, None, bound=False, surface="refused", reason=reason)

    async def check(self, room_id: str, person: str, puppet: str) -> Verdict:
        """Whether ``person`` and ``puppet`` are both in ``room_id`` now — our state first, the homeserver when it
        does not settle it — with no session touched (the start route asks before it mints a grant for a room)."""
        verdict = await self.known(self.store, room_id, person, puppet)
        return await self.ask_homeserver(room_id, person, puppet) if verdict == "unknown" else verdict

    @staticmethod
    async def known(db: Families, room_id: str, person: str, puppet: str) -> Verdict:
        """What our own state says, where it can be trusted to settle it: both joined, or the room encrypted.
        Anything else is "unknown" and goes to the homeserver — our state may lag behind it (a join still on
        its way to us), and a refusal is worth the round trip to be sure of."""
        room = await db.of(RoomTables).get(room_id)
        if room is None or room.left_at is not None:
            return "unknown"
        if room.encrypted:
            return "encrypted"
        for user in (person, puppet):
            member = await db.of(RoomTables).member(room_id, user)
            if member is None or member.membership != "join":
                return "unknown"
        return "joined"

    async def ask_homeserver(self, room_id: str, person: str, puppet: str) -> Verdict:
        """The homeserver's word, as the bot's puppet reads the room (a puppet not in it may not read it); silence
        within ``check_seconds`` is "unknown"."""
        if self.homeserver is None:
            return "unknown"
        try:
            async with asyncio.timeout(self.check_seconds):
                mine = await self.homeserver.state_event(puppet, room_id, "m.room.member", puppet)
                if not _joined(mine):
                    return "bot_not_joined"
                theirs = await self.homeserver.state_event(puppet, room_id, "m.room.member", person)
                return "joined" if _joined(theirs) else "person_not_joined"
        except TimeoutError:
            log.warning("the homeserver did not answer about %s within %ss; the claim is refused", room_id,
                        self.check_seconds, extra={"room": room_id})
            return "unknown"
        except MatrixError as exc:
            if exc.status in (403, 404):
                return "bot_not_joined"  # the puppet may not read the room: it is not in it
            log.warning("could not ask the homeserver about %s: %s", room_id, exc, extra={"room": room_id})
            return "unknown"


def _joined(content: Any) -> bool:
    return isinstance(content, dict) and content.get("membership") == "join"
