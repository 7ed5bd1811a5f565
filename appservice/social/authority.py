"""Whether a rule may send, asked again before every send (SPEC §14): the rule is live; its room is still bridged;
its bot is still published for the social surface and may still answer a guest; the person who wrote it is still
in the room that governs it (the bridged room, or the review room it was written in) with the configured power, as
that room stands now (its stored power levels and members, which the
dispatcher keeps as the homeserver sends them). The first that fails is the reason — said in the review place,
and the rule paused — and nothing is sent."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from appservice.matrix.power import standing_in
from appservice.matrix.tables.rooms import RoomTables
from appservice.social.kind import NAME
from appservice.social.tables import Rule, SocialTables
from engine.content import Registry
from engine.content.audience import AudienceFacts
from engine.run.summon import Summons, refusal
from engine.store import Families


@dataclass(frozen=True)
class Lost:
    """Why a rule may not send: a ``### social`` key (``why_author`` …) and what fills it."""

    key: str
    who: str = ""
    bot: str = ""


def guest_facts(server_name: str) -> AudienceFacts:
    """Who a bridge puppet is to a bot: nobody of ours — no account, no personal data, no memory."""
    return AudienceFacts(user_id=None, local_server=server_name, is_member=False)


def may_answer_guest(registry: Registry, bot: str, server_name: str) -> bool:
    """Whether ``bot`` is published for the social surface and its ``serves:`` lets it answer a guest (a rule's
    run is asked by nobody, so ``serves:`` is its gate, as the engine's ``summon`` checks)."""
    return refusal(registry, Summons(bot=bot, surface=NAME, prompt="", asked_by=None,
                                     facts=guest_facts(server_name))) is None


async def holds(db: Families, room_id: str, user_id: str, level: int) -> bool:
    """Whether ``user_id`` is in ``room_id`` now, with ``level`` there."""
    room = await db.of(RoomTables).get(room_id)
    member = await db.of(RoomTables).member(room_id, user_id)
    if room is None or member is None or member.membership != "join":
        return False
    return standing_in(user_id, room).holds(level)


async def lost(db: Families, rule: Rule, registry: Callable[[], Registry], *, level: int,
               server_name: str) -> Lost | None:
    """Why ``rule`` may not send now (None: it may); the person sending a reviewed draft is asked apart
    (``holds``): their lacking the power keeps the draft waiting, and the rule is not paused for it."""
    room = await db.of(SocialTables).room(rule.room_id)
    if room is None or not room.bridged:
        return Lost("why_unbridged")
    if not may_answer_guest(registry(), rule.bot, server_name):
        return Lost("why_unpublished", bot=rule.bot)
    if not await holds(db, rule.governed_in, rule.author, level):
        return Lost("why_author", who=rule.author)
    return None
