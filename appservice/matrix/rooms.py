"""Rooms and puppets: what must be said to the homeserver about membership.

- Puppets ``@bot_<slug>`` are registered idempotently and take their bot's display name.
- They accept invites to rooms where their bot is offered (``surfaces: [rooms]``); an invite whose
  stripped state carries ``m.room.encryption`` is declined with the reason on the leave event, where
  the inviter sees it.
- A room that turns encrypted is left by every one of our users, the reason on the leave (never a
  plaintext message into an encrypted room).
- After a join, the room's current state is read and stored, so audiences and display names work from
  the first mention (the homeserver only pushes state that changes after we joined).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import aiohttp
import asyncpg
from mautrix.appservice import AppServiceAPI
from mautrix.errors import MatrixError as MautrixError
from mautrix.types import PresenceState, RoomID, UserID

from appservice.matrix.admin import InvitePuppet, PuppetLeaves
from appservice.matrix.ingest import RETRY_WHOLE, Decline, Followup, Ingest, Join, LeaveEncrypted
from engine.content import Registry
from engine.store.db import Database

log = logging.getLogger(__name__)

FIRST_TRY_SECONDS = 60.0  # how long an action is left to its first attempt before a resume takes it up
RETRY_SECONDS = 15.0  # then 60 s, 4 min, 16 min, …
MAX_ATTEMPTS = 6
RESUME_SECONDS = 30.0
# What the homeserver says when it never will (the invite was withdrawn, the room is gone).
PERMANENT = frozenset({"M_FORBIDDEN", "M_NOT_FOUND", "M_BAD_JSON", "M_INVALID_PARAM", "M_UNKNOWN_TOKEN"})
FOLLOWUPS: dict[str, type[Any]] = {cls.__name__: cls for cls in (Join, Decline, LeaveEncrypted, InvitePuppet,
                                                                 PuppetLeaves)}


def followup_of(action: Any) -> Followup | None:
    """A remembered action read back (None: a kind or a shape this version does not know)."""
    if not isinstance(action, dict):
        return None
    cls = FOLLOWUPS.get(str(action.get("kind")))
    if cls is None:
        return None
    try:
        made: Followup = cls(**{k: v for k, v in action.items() if k != "kind"})
    except TypeError:
        return None
    return made

# Leave reasons are shown by clients on the membership event; they are the operator-facing words of the
# service itself, not a bot's (a bot's words are strings).
REASONS = {
    "encrypted": "summon bots cannot read encrypted rooms, so they do not join them.",
    "not_offered": "This bot is not offered in Matrix rooms.",
    "turned_encrypted": "This room is now encrypted; summon bots cannot read encrypted rooms, so they leave.",
    "no_provider": "No model provider is available right now, so this bot cannot answer.",
}


class Rooms:
    def __init__(self, db: Database, api: AppServiceAPI, ingest: Ingest, registry: Callable[[], Registry]) -> None:
        self.db = db
        self.api = api
        self.ingest = ingest
        self._registry = registry

    async def register_puppets(self) -> None:
        for bot in self._registry().bots.values():
            intent = self.api.intent(UserID(bot.user_id))
            try:
                await intent.ensure_registered()
                if await intent.get_displayname(UserID(bot.user_id)) != bot.name:
                    await intent.set_displayname(bot.name, check_current=False)
            except MautrixError as exc:
                log.error("could not register the puppet %s: %s", bot.user_id, exc, extra={"bot": bot.slug})

    async def set_presence(self, usable: bool) -> None:
        """Online when something can answer; otherwise unavailable, with the reason as the status."""
        state = PresenceState.ONLINE if usable else PresenceState.UNAVAILABLE
        status = None if usable else REASONS["no_provider"]
        for bot in self._registry().bots.values():
            try:
                await self.api.intent(UserID(bot.user_id)).set_presence(state, status, ignore_cache=True)
            except MautrixError as exc:
                log.warning("could not set %s's presence: %s", bot.user_id, exc, extra={"bot": bot.slug})

    # --- remembered until done ------------------------------------------------------------------------

    async def remember(self, conn: asyncpg.Connection, followups: list[Followup]) -> list[tuple[int, Followup]]:
        """Record each action in the caller's transaction, so it outlives a crash before it is carried out."""
        remembered = []
        for f in followups:
            action = {"kind": type(f).__name__, **dataclasses.asdict(f)}
            action_id = await conn.fetchval(self.db.q["remember_room_action"], f.room_id, action, FIRST_TRY_SECONDS)
            remembered.append((int(action_id), f))
        return remembered

    async def carry_out_remembered(self, action_id: int, followup: Followup) -> bool:
        """Carry out a remembered action and write down how it went; True when it is done."""
        why = await self.carry_out(followup)
        if why is None:
            await self.db.execute("room_action_done", action_id)
            return True
        error, permanent = why
        status = await self.db.fetchval("room_action_failed", action_id, error, RETRY_SECONDS, permanent,
                                        MAX_ATTEMPTS)
        log.log(logging.ERROR if status == "failed" else logging.WARNING, "%s: %s (%s)", followup, error,
                "given up" if status == "failed" else "will try again", extra={"room": followup.room_id})
        return False

    async def resume_once(self, limit: int = 50) -> int:
        """Carry out what is due: remembered before a crash, or failing and due again. How many were done."""
        done = 0
        for row in await self.db.fetch("claim_room_actions", limit, FIRST_TRY_SECONDS):
            followup = followup_of(row["action"])
            if followup is None:
                await self.db.fetchval("room_action_failed", row["id"], "an action this version cannot read",
                                       RETRY_SECONDS, True, MAX_ATTEMPTS)
                continue
            done += await self.carry_out_remembered(row["id"], followup)
        return done

    async def resume(self, stop: asyncio.Event, every: float = RESUME_SECONDS) -> None:
        while not stop.is_set():
            try:
                await self.resume_once()
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError):
                log.warning("could not resume room actions (the database is unavailable); will try again")
            try:
                await asyncio.wait_for(stop.wait(), timeout=every)
            except TimeoutError:
                pass

    # --- carrying out ---------------------------------------------------------------------------------

    async def carry_out(self, followup: Followup) -> tuple[str, bool] | None:
        """Say it to the homeserver. None when done; else why not, and whether it never will be."""
        try:
            if isinstance(followup, Join):
                await self._join(followup)
            elif isinstance(followup, Decline):
                intent = self.api.intent(UserID(followup.user_id))
                await intent.leave_room(RoomID(followup.room_id), reason=REASONS[followup.why])
                log.info("declined an invite to %s for %s: %s", followup.room_id, followup.user_id, followup.why,
                         extra={"room": followup.room_id})
            elif isinstance(followup, LeaveEncrypted):
                await self._leave_all(followup.room_id, REASONS["turned_encrypted"])
            elif isinstance(followup, InvitePuppet):
                # `!bots add`: the service's user invites; the puppet accepts like any invite where it is offered.
                await self.api.intent(UserID(followup.user_id)).ensure_registered()
                await self.api.intent(UserID(followup.by)).invite_user(RoomID(followup.room_id),
                                                                       UserID(followup.user_id))
                log.info("%s invited to %s", followup.user_id, followup.room_id, extra={"room": followup.room_id})
            elif isinstance(followup, PuppetLeaves):
                # `!bots remove`: the puppet leaves by itself (a kick would need the kick level).
                await self.api.intent(UserID(followup.user_id)).leave_room(RoomID(followup.room_id),
                                                                          reason=followup.reason)
                log.info("%s left %s", followup.user_id, followup.room_id, extra={"room": followup.room_id})
        except MautrixError as exc:
            code = getattr(exc, "errcode", None)
            return f"{code or type(exc).__name__}: {exc}", code in PERMANENT
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            return f"the homeserver is unreachable ({type(exc).__name__}: {exc})", False
        return None

    async def _join(self, join: Join) -> None:
        intent = self.api.intent(UserID(join.user_id))
        await intent.ensure_registered()
        await intent.join_room_by_id(RoomID(join.room_id))
        log.info("%s joined %s", join.user_id, join.room_id, extra={"room": join.room_id})
        state = await intent.get_state(RoomID(join.room_id))
        events: list[dict[str, Any]] = []
        for ev in state:
            raw = ev.serialize()
            raw.setdefault("room_id", join.room_id)
            events.append(raw)
        followups: list[Followup] = []
        async with self.db.transaction("store_room_state") as conn:
            for raw in events:
                try:
                    async with conn.transaction():  # one bad state event never loses the rest
                        await self.ingest.event(conn, raw, followups, backfill=True)
                except RETRY_WHOLE:
                    raise
                except Exception:
                    log.exception("state event %s of %s could not be stored; skipped", raw.get("event_id"),
                                  join.room_id, extra={"room": join.room_id})
        for f in followups:
            if not isinstance(f, Join):  # we are already in; only an encryption found now matters
                await self.carry_out(f)

    async def _leave_all(self, room_id: str, reason: str) -> None:
        ours = [b.user_id for b in self._registry().bots.values()] + [self.ingest.service_user]
        rows = await self.db.fetch("our_members", room_id, ours)
        for r in rows:
            try:
                await self.api.intent(UserID(r["user_id"])).leave_room(RoomID(room_id), reason=reason)
            except MautrixError as exc:
                log.error("could not leave %s as %s: %s", room_id, r["user_id"], exc, extra={"room": room_id})
        await self.db.execute("mark_room_left", room_id)
        log.warning("left the encrypted room %s", room_id, extra={"room": room_id})
