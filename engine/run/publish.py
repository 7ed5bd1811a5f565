"""Publish: project the compiled registry into its rows — bots, skills, tools, commands and which
skills and tools each bot has — in one named transaction, so a publish that fails leaves the last one
whole. A thing whose file is gone is withdrawn, not deleted: its runs keep their history."""

from __future__ import annotations

import logging

from engine.content import Registry
from engine.store.db import Database
from engine.tools.search import index_rows

log = logging.getLogger(__name__)


async def publish(db: Database, registry: Registry) -> list[str]:
    """Publish ``registry``; returns the slugs of the bots now live."""
    q = db.q
    async with db.transaction("publish") as conn:
        await conn.execute(q["publish_lock"])
        for bot in registry.bots.values():
            await conn.execute(
                q["upsert_bot"], bot.slug, bot.name, bot.user_id, list(bot.surfaces),
                bot.model_dump(mode="json", by_alias=True),
            )
        await conn.execute(q["withdraw_bots_except"], list(registry.bots))
        for skill in registry.skills.values():
            await conn.execute(q["upsert_skill"], skill.name, skill.description, skill.model_dump(mode="json", by_alias=True))
        await conn.execute(q["withdraw_skills_except"], list(registry.skills))
        for tool in registry.tools.values():
            await conn.execute(q["upsert_tool"], tool.name, tool.kind, tool.model_dump(mode="json", by_alias=True))
        await conn.execute(q["withdraw_tools_except"], list(registry.tools))
        for command in registry.commands.values():
            await conn.execute(
                q["upsert_command"], command.name, command.bot, command.tool, list(command.surfaces or ()),
                command.shape(), command.prompt, command.model_dump(mode="json", by_alias=True),
            )
        await conn.execute(q["withdraw_commands_except"], list(registry.commands))

        await conn.execute(q["clear_bot_links"])
        pairs = [(bot.slug, skill.name) for bot in registry.bots.values() for skill in registry.skills_of(bot)]
        await conn.execute(q["insert_bot_skills"], [b for b, _ in pairs], [s for _, s in pairs])
        pairs = [(bot.slug, tool) for bot in registry.bots.values() for tool in bot.tools]
        await conn.execute(q["insert_bot_tools"], [b for b, _ in pairs], [t for _, t in pairs])

        # search_site's index, rebuilt whole: what was published is what is found.
        await conn.execute(q["clear_site_search"])
        rows = index_rows(registry)
        await conn.execute(q["insert_site_search"], *([row[i] for row in rows] for i in range(4)))
    log.info(
        "published %d bot(s), %d skill(s), %d tool(s), %d command(s): %s",
        len(registry.bots), len(registry.skills), len(registry.tools), len(registry.commands),
        ", ".join(registry.bots),
    )
    return list(registry.bots)
