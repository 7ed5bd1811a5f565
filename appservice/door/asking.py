"""A turn through the door asks its bot: the door's side of the one door in (``engine.run.summon``).

The caller is a process outside the deployment holding a grant, so every check a mention gets is made against
the person the grant names (their ceilings, their live runs, the bot's ``for:`` where the session is), with the
grant's ceilings under the bot's own. The run is asked on the ``voice`` surface, in the room the session is
bound to (None: the person's DM), about the person. Its context is the session's own earlier turns as this
door recorded them — never what the client says was said — and only those asked where the session is now.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from appservice.door.grants import Grant
from appservice.door.surface import SURFACE, DoorSurface
from appservice.door.tables import DoorTables, PastTurn, Session
from engine.content import Registry
from engine.core.prompt import capped
from engine.run.refusals import Refused
from engine.run.summon import Summoned, Summons, summon
from engine.store import Store

log = logging.getLogger(__name__)

# How many earlier turns of the session a turn is given, and how much of each (it is a conversation, spoken).
PAST_TURNS = 12
TURN_TOKENS = 400


@dataclass(frozen=True)
class Asked:
    run_id: int
    session: Session


class DoorAsking:
    def __init__(self, store: Store, registry: Callable[[], Registry], surface: DoorSurface, *,
                 max_attempts: int = 3) -> None:
        self.store = store
        self._registry = registry
        self.surface = surface
        self.max_attempts = max_attempts

    async def ask(self, grant: Grant, text: str) -> Asked | Refused:
        registry = self._registry()
        async with self.store.transaction("door_turn") as tx:
            session = await tx.of(DoorTables).open_session(grant.id, bot=grant.bot, person=grant.person,
                                                 expires_at=grant.expires_at, one_to_one=grant.one_to_one)
            facts = await self.surface.facts(tx, session.room_id, grant.person)
            # Only the turns asked where the session is now: what was said in another room stays there.
            past = await tx.of(DoorTables).past_turns(grant.id, PAST_TURNS, session.room_id)
            result = await summon(tx, registry, Summons(
                bot=grant.bot, surface=SURFACE, prompt=text, asked_by=grant.person, subject=grant.person,
                facts=facts, place=session.room_id, context=self.context(registry, grant, session, past, text),
                ceilings=grant.ceilings,
            ), max_attempts=self.max_attempts)
            if isinstance(result, Summoned):
                await tx.of(DoorTables).insert_turn(result.run_id, grant.id, session.room_id)
        if isinstance(result, Refused):
            log.info("door turn refused: %s", result.reason,
                     extra={"bot": grant.bot, "asker": grant.person, "room": session.room_id})
            return result
        log.info("door turn: run %s", result.run_id, extra={"bot": grant.bot, "run": result.run_id,
                                                             "room": session.room_id})
        return Asked(result.run_id, session)

    def context(self, registry: Registry, grant: Grant, session: Session, past: list[PastTurn],
                text: str) -> dict[str, object]:
        """The session as a person reads it: its earlier turns, oldest first, then what is asked now; where it
        is (the room it is bound to, or none)."""
        strings = registry.strings
        bot = registry.get(grant.bot)
        name = bot.name if bot is not None else grant.bot
        lines: list[dict[str, str]] = []
        for turn in past:
            lines.append({"name": grant.person, "sender": grant.person, "said": capped(turn.prompt, TURN_TOKENS)})
            said = turn.answer if turn.answer is not None else self.surface.ending_words(grant.bot, turn.ending)
            if said:
                lines.append({"name": name, "sender": name, "said": capped(said, TURN_TOKENS)})
        lines.append({"name": grant.person, "sender": grant.person, "said": text})
        context: dict[str, object] = {"kind": "door", "lines": lines}
        header = strings.get("door", "header")
        if header:
            context["header"] = header.format(name=grant.person)
        if session.room_id is not None:
            where = strings.get("door", "in_room")
            note = where.format(room=session.room_name or session.room_id) if where else None
        else:
            note = strings.get("door", "no_room")
        if note:
            context["note"] = note
        return context
