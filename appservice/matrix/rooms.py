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
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import asyncpg
from mautrix.appservice import AppServiceAPI
from mautrix.errors import MatrixError as MautrixError
from mautrix.types import PresenceState, RoomID, UserID

from appservice.matrix.followups import (
    KINDS,
    Decline,
    Followup,
    InvitePuppet,
    Join,
    LeaveEncrypted,
    PuppetLeaves,
)
from appservice.matrix.ingest import RETRY_WHOLE, Ingest
from engine.content import Registry
from engine.store.db import Database

log = logging.getLogger(__name__)

FIRST_TRY_SECONDS = 60.0  # how long an attempt holds its action's row before another may take it up
ATTEMPT_SECONDS = 45.0  # an attempt gives up before its hold runs out, so no action runs twice at once
RETRY_SECONDS = 15.0  # then 60 s, 4 min, 16 min, …
MAX_ATTEMPTS = 6
RESUME_SECONDS = 30.0
# What the homeserver says when it never will (the invite was withdrawn, the room is gone).
PERMANENT = frozenset({"M_FORBIDDEN", "M_NOT_FOUND", "M_BAD_JSON", "M_INVALID_PARAM", "M_UNKNOWN_TOKEN"})


class NotLeft(MautrixError):
    """Some of our users are still in a room they must leave."""


def followup_of(action: Any) -> Followup | None:
    """A remembered action read back (None: a kind or a shape this version does not know)."""
    if not isinstance(action, dict):
        return None
    cls = KINDS.get(str(action.get("kind")))
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
    def __init__(self, db: Database, api: AppServiceAPI, ingest: Ingest, registry: Callable[[], Registry], *,
                 on_done: Callable[[Followup], Awaitable[None]] | None = None) -> None:
        self.db = db
        self.api = api
        self.ingest = ingest
        self._registry = registry
        self.on_done = on_done  # told of each action done, however it got done (a puppet's join: its commands)

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
        """Carry out a remembered action (within ATTEMPT_SECONDS, inside the time its row is held) and
        write down how it went; True when it is done."""
        try:
            async with asyncio.timeout(ATTEMPT_SECONDS):
                why = await self.carry_out(followup)
        except TimeoutError:
            why = (f"the homeserver did not finish within {ATTEMPT_SECONDS:g}s", False)
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
            why = (f"storing what it said failed ({type(exc).__name__}: {exc})", False)
        except Exception as exc:  # a bug or a shape we did not expect: counted, so it is given up in the end
            log.exception("carrying out %s failed", followup, extra={"room": followup.room_id})
            why = (f"{type(exc).__name__}: {exc}", False)
        if why is None:
            await self.db.execute("room_action_done", action_id)
            if self.on_done is not None:
                await self.on_done(followup)
            return True
        error, permanent = why
        status = await self.db.fetchval("room_action_failed", action_id, error, RETRY_SECONDS, permanent,
                                        MAX_ATTEMPTS)
        log.log(logging.ERROR if status == "failed" else logging.WARNING, "%s: %s (%s)", followup, error,
                "given up" if status == "failed" else "will try again", extra={"room": followup.room_id})
        return False

    async def resume_once(self, limit: int = 50) -> int:
        """Carry out what is due — remembered before a crash, or failing and due again — one at a time, each
        held for FIRST_TRY_SECONDS. How many were done."""
        done = 0
        for _ in range(limit):
            row = await self.db.fetchrow("claim_room_action", FIRST_TRY_SECONDS)
            if row is None:
                break
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
                mine: list[Followup] = []
                try:
                    async with conn.transaction():  # one bad state event never loses the rest
                        await self.ingest.event(conn, raw, mine, backfill=True)
                except RETRY_WHOLE:
                    raise
                except Exception:
                    log.exception("state event %s of %s could not be stored; skipped", raw.get("event_id"),
                                  join.room_id, extra={"room": join.room_id})
                    continue
                followups.extend(mine)
            # We are already in; only what the state says now (it is encrypted) matters, remembered like any.
            remembered = await self.remember(conn, [f for f in followups if not isinstance(f, Join)])
        for action_id, f in remembered:
            await self.carry_out_remembered(action_id, f)

    async def _leave_all(self, room_id: str, reason: str) -> None:
        ours = [b.user_id for b in self._registry().bots.values()] + [self.ingest.service_user]
        rows = await self.db.fetch("our_members", room_id, ours)
        stayed = []
        for r in rows:
            try:
                await self.api.intent(UserID(r["user_id"])).leave_room(RoomID(room_id), reason=reason)
            except MautrixError as exc:
                if getattr(exc, "errcode", None) in PERMANENT:
                    continue  # not in it (any more): nothing to leave
                log.error("could not leave %s as %s: %s", room_id, r["user_id"], exc, extra={"room": room_id})
                stayed.append(r["user_id"])
        if stayed:
            # Raised, so the action is tried again (it is remembered) until every one of ours is out.
            raise NotLeft(f"still in the room: {', '.join(stayed)}")
        await self.db.execute("mark_room_left", room_id)
        log.warning("left the encrypted room %s", room_id, extra={"room": room_id})
