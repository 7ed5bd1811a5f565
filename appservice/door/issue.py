"""Minting a grant and keeping a record of it: the start route (from a person's own Matrix session) and
``summon grant`` (an operator) both come here. The grant carries the bot's own ceilings as its file says them
now, so nothing downstream of it can raise them."""

from __future__ import annotations

import logging
from datetime import datetime

from appservice.config import Door as DoorConfig
from appservice.door.grants import Grant, MintedBy, mint, new_grant
from appservice.door.tables import DoorTables
from engine.content import Bot
from engine.core.limits import Ceilings
from engine.store import Families

log = logging.getLogger(__name__)


def ceilings_of(bot: Bot) -> Ceilings:
    """The bot's own limits and per-person windows: the most a grant for it may carry."""
    limits = bot.limits
    return Ceilings(steps=limits.steps, spend=limits.spend, minutes=limits.minutes, per=dict(limits.per or {}))


async def issue(db: Families, door: DoorConfig, *, server_name: str, bot: Bot, person: str, room: str | None,
                now: datetime, minutes: float, minted_by: MintedBy, one_to_one: bool = False) -> tuple[str, Grant]:
    """A signed grant for ``person`` to talk to ``bot`` (in ``room``, or in no particular room) for ``minutes``,
    recorded; the token and the grant. The token itself is never stored."""
    grant = new_grant(bot=bot.slug, person=person, room=room, audience=door.audience_for(server_name),
                      ceilings=ceilings_of(bot), now=now, minutes=minutes, minted_by=minted_by, one_to_one=one_to_one)
    token = mint(grant, door.signing_key, door.keys[door.signing_key])
    await db.of(DoorTables).record_grant(id=grant.id, bot=grant.bot, person=grant.person, room_id=grant.room,
                               key_id=door.signing_key, minted_by=minted_by, issued_at=grant.issued_at,
                               expires_at=grant.expires_at)
    log.info("grant %s minted (%s) for %s to talk to %s until %s", grant.id, minted_by, person, bot.slug,
             grant.expires_at.isoformat(), extra={"bot": bot.slug, "room": room})
    return token, grant
