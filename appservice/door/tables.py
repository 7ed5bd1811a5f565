"""The door's rows: grants minted, voice sessions and the room each is bound to, and the turns asked through it
(``sql/queries/door.sql``). A turn is an ordinary run; these keep only what the door needs besides."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.store.base import Family, maybe, rows
from engine.store.store import Families


@dataclass(frozen=True, slots=True)
class GrantRow:
    id: str
    bot: str
    person: str
    room_id: str | None
    key_id: str
    minted_by: str
    issued_at: datetime
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class Session:
    """A voice session: whose, with which bot, the room it is bound to (None: the person's DM with the bot),
    the room a claim is being checked for, and how many claims it has had."""

    grant_id: str
    bot: str
    person: str
    room_id: str | None
    room_name: str | None
    pending_room: str | None
    claim: int


@dataclass(frozen=True, slots=True)
class Finished:
    """A door turn handed over by the run's finishing commit: whether a response still waits for it, the room
    it was asked from, and its session."""

    waiting: bool
    origin_room: str | None
    grant_id: str


@dataclass(frozen=True, slots=True)
class Turn:
    run_id: int
    grant_id: str
    origin_room: str | None
    waiting: bool
    finished: bool
    delivered_to: str | None


@dataclass(frozen=True, slots=True)
class PastTurn:
    id: int
    prompt: str
    answer: str | None
    ending: str | None


@dataclass(frozen=True, slots=True)
class EndedRun:
    id: int
    status: str
    answer: str | None
    ending: str | None
    reason: str | None


class DoorTables(Family):
    __slots__ = ()

    # --- grants ----------------------------------------------------------------------------------------

    async def record_grant(self, *, id: str, bot: str, person: str, room_id: str | None, key_id: str,
                           minted_by: str, issued_at: datetime, expires_at: datetime) -> None:
        await self._run("record_door_grant", id, bot, person, room_id, key_id, minted_by, issued_at, expires_at)

    async def grant(self, grant_id: str) -> GrantRow | None:
        return maybe(GrantRow, await self._one("door_grant", grant_id))

    # --- sessions and the rooms they are bound to ------------------------------------------------------------

    async def open_session(self, grant_id: str, *, bot: str, person: str, expires_at: datetime,
                           one_to_one: bool = False) -> Session:
        """The session a grant opens (made on first use), locked for the rest of the transaction."""
        await self._run("ensure_door_session", grant_id, bot, person, expires_at, one_to_one)
        session = maybe(Session, await self._one("lock_door_session", grant_id))
        assert session is not None
        return session

    async def session(self, grant_id: str) -> Session | None:
        return maybe(Session, await self._one("door_session", grant_id))

    async def claim(self, grant_id: str, room_id: str | None) -> int:
        """A newer claim on the session (pending; a different room releases the bound one); its number."""
        return int(await self._value("claim_door_room", grant_id, room_id))

    async def bind(self, grant_id: str, claim: int, room_id: str | None, room_name: str | None) -> bool:
        """Claim ``claim`` was verified: bind it, unless a newer claim superseded it (False)."""
        return await self._value("bind_door_room", grant_id, claim, room_id, room_name) is not None

    async def refuse(self, grant_id: str, claim: int) -> bool:
        """Claim ``claim`` was refused: nothing bound (the DM), unless a newer claim superseded it (False)."""
        return await self._value("refuse_door_room", grant_id, claim) is not None

    async def binding_of_run(self, run_id: int) -> Session | None:
        """The session a door turn belongs to, as it stands now."""
        return maybe(Session, await self._one("door_binding_of_run", run_id))

    async def shared_rooms(self, person: str, puppet: str) -> list[str]:
        """The readable rooms ``person`` and the bot's ``puppet`` are both joined to, fewest readers first."""
        return [str(r["room_id"]) for r in await self._all("door_shared_rooms", person, puppet)]

    # --- turns ------------------------------------------------------------------------------------------

    async def insert_turn(self, run_id: int, grant_id: str, origin_room: str | None) -> None:
        await self._run("insert_door_turn", run_id, grant_id, origin_room)

    async def past_turns(self, grant_id: str, limit: int, origin: str | None) -> list[PastTurn]:
        """The session's last ``limit`` ended turns asked where it is now (``origin``: a room, None none), oldest
        first."""
        return rows(PastTurn, await self._all("door_session_turns", grant_id, limit, origin))

    async def alone(self, person: str) -> bool:
        """Whether ``person``'s voice sessions bound to no room are theirs alone (their front ends said so)."""
        return bool(await self._value("door_person_alone", person))

    async def finish_turn(self, run_id: int) -> Finished | None:
        """Mark the turn handed over (in the run's finishing commit); None when the run is no door turn."""
        return maybe(Finished, await self._one("finish_door_turn", run_id))

    async def outlive(self, run_id: int) -> bool:
        """Stop waiting for the turn: True when its work now outlives it, False when it had already finished."""
        return await self._value("outlive_door_turn", run_id) is not None

    async def posted(self, run_id: int, room_id: str) -> None:
        await self._run("door_turn_posted", run_id, room_id)

    async def turn(self, run_id: int) -> Turn | None:
        return maybe(Turn, await self._one("door_turn", run_id))

    async def ended(self, run_ids: list[int]) -> list[EndedRun]:
        """Of ``run_ids``, those that have ended, with their answer or ending."""
        return rows(EndedRun, await self._all("door_runs_ended", run_ids))

    async def usage(self, run_id: int) -> tuple[int, int]:
        """The tokens in and out the run's model calls used."""
        record = await self._one("door_run_usage", run_id)
        return int(record["tokens_in"]), int(record["tokens_out"])

    # --- client tools ----------------------------------------------------------------------------------

    async def hand_call(self, run_id: int, call_id: str, name: str, arguments: dict[str, Any]) -> None:
        """Keep run ``run_id``'s call of a client tool until its client answers, and tell the response."""
        await self._value("hand_door_call", run_id, call_id, name, arguments)

    async def call_answer(self, run_id: int, call_id: str) -> tuple[str, bool] | None:
        """What the client said came of the call (its result, whether an error); None while it has not."""
        record = await self._one("door_call_answer", run_id, call_id)
        return None if record is None else (str(record["result"] or ""), bool(record["is_error"]))

    async def answer_call(self, grant_id: str, call_id: str, result: str) -> int | None:
        """Keep the client's result for a call of session ``grant_id``; the run that waits for it (None: none)."""
        run_id = await self._value("answer_door_call", grant_id, call_id, result)
        return None if run_id is None else int(run_id)

    async def notify(self, run_id: int) -> None:
        """Wake the door's listeners when this transaction commits."""
        await self._value("notify_door", str(run_id))

    async def cancel(self, run_id: int, grant_id: str) -> bool:
        """Ask the session's turn ``run_id`` to stop; False when it is not queued or running."""
        return await self._value("cancel_door_run", run_id, grant_id) is not None

    async def prune(self, keep_seconds: float) -> int:
        return int(await self._value("prune_door_sessions", keep_seconds))


# A door session (and the grant that opened it) is kept a day past its grant's expiry: its turns stay runs.
KEEP_DOOR_SESSIONS = 86_400.0


async def forget_door_sessions(store: Families) -> int:
    """The door's share of the ticks' pruning: expired sessions and their grants; how many rows went."""
    return await store.of(DoorTables).prune(KEEP_DOOR_SESSIONS)
