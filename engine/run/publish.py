"""Publish: project the compiled registry into its rows — bots, skills, tools, commands and which
skills and tools each bot has — in one named transaction, so a publish that fails leaves the last one
whole. A thing whose file is gone is withdrawn, not deleted: its runs keep their history."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable

from engine.content import Bot, Registry
from engine.memory.ready import recallable
from engine.store import Store
from engine.tools.search import index_rows, text_search_config

log = logging.getLogger(__name__)


def buyable(registry: Registry, unpriced: Callable[[Iterable[Bot]], list[str]]) -> tuple[Registry, dict[str, Bot],
                                                                                     list[str]]:
    """``registry`` without the bots that may be sent to a model with no price (``Answerer.unpriced``: with
    buying on, no spend limit could hold against it), those bots by slug, and a line for each: such a bot is
    refused, never the service — every other bot runs, and a provider declared free prices its models at 0."""
    refused: dict[str, Bot] = {}
    lines: list[str] = []
    for bot in registry.bots.values():
        why = unpriced([bot])
        if why:
            refused[bot.slug] = bot
            lines += [f"{line}; {bot.slug} is refused, every other bot runs" for line in why]
    for line in lines:
        log.error("%s", line)
    if not refused:
        return registry, {}, []
    kept = {slug: bot for slug, bot in registry.bots.items() if slug not in refused}
    return dataclasses.replace(registry, bots=kept), refused, lines


async def publish(store: Store, registry: Registry) -> list[str]:
    """Publish ``registry``; returns the slugs of the bots now live. A ``person+recall`` bot that cannot remember
    here (no pgvector, no embedding model) is refused in one line and left out; the rest are published. (A
    process that keeps the registry live asks ``recallable`` itself, so it never serves a refused bot.)"""
    registry, _ = await recallable(store, registry)
    async with store.transaction("publish") as tx:
        await tx.content.lock()
        for bot in registry.bots.values():
            await tx.content.upsert_bot(bot.slug, bot.name, bot.user_id, list(bot.surfaces),
                                        bot.model_dump(mode="json", by_alias=True))
        await tx.content.withdraw_bots_except(list(registry.bots))
        for skill in registry.skills.values():
            await tx.content.upsert_skill(skill.name, skill.description, skill.model_dump(mode="json", by_alias=True))
        await tx.content.withdraw_skills_except(list(registry.skills))
        for tool in registry.tools.values():
            await tx.content.upsert_tool(tool.name, tool.kind, tool.model_dump(mode="json", by_alias=True))
        await tx.content.withdraw_tools_except(list(registry.tools))
        for command in registry.commands.values():
            await tx.content.upsert_command(
                name=command.name, bot=command.bot, tool=command.tool, surfaces=list(command.surfaces or ()),
                shape=command.shape(), prompt=command.prompt, compiled=command.model_dump(mode="json", by_alias=True),
            )
        await tx.content.withdraw_commands_except(list(registry.commands))
        await tx.content.link(
            skills=[(bot.slug, skill.name) for bot in registry.bots.values() for skill in registry.skills_of(bot)],
            tools=[(bot.slug, tool) for bot in registry.bots.values() for tool in bot.tools],
        )
        # search_site's index, rebuilt whole: what was published is what is found, in the site's language.
        language = text_search_config(registry.strings.get("words", "language"))
        used = await tx.search.rebuild(index_rows(registry), language=language)
        if used != language:
            log.warning("search_site: this database has no text-search configuration %r; it searches with %r "
                        "(no stemming)", language, used)
    log.info(
        "published %d bot(s), %d skill(s), %d tool(s), %d command(s): %s",
        len(registry.bots), len(registry.skills), len(registry.tools), len(registry.commands),
        ", ".join(registry.bots),
    )
    return list(registry.bots)
