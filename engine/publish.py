"""Publish: project the compiled registry into the ``bots`` rows, in one transaction."""

from __future__ import annotations

import logging

from engine.content import Registry
from engine.store.db import Database

log = logging.getLogger(__name__)


async def publish(db: Database, registry: Registry) -> list[str]:
    async with db.transaction("publish") as conn:
        for bot in registry.bots.values():
            await conn.execute(
                db.q["upsert_bot"], bot.slug, bot.name, bot.user_id, list(bot.surfaces),
                bot.model_dump(mode="json", by_alias=True),
            )
        await conn.execute(db.q["withdraw_bots_except"], list(registry.bots))
    log.info("published %d bot(s): %s", len(registry.bots), ", ".join(registry.bots))
    return list(registry.bots)
