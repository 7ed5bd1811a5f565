"""Publishing: compiled content projected into its rows, one publish at a time (``sql/queries/content.sql``)."""

from __future__ import annotations

from typing import Any

from engine.store.base import Family


class Content(Family):
    __slots__ = ()

    async def lock(self) -> None:
        """One publish at a time, for the rest of the transaction."""
        await self._value("publish_lock")

    async def upsert_bot(self, slug: str, name: str, puppet: str, surfaces: list[str], compiled: dict[str, Any]) -> None:
        await self._run("upsert_bot", slug, name, puppet, surfaces, compiled)

    async def withdraw_bots_except(self, slugs: list[str]) -> None:
        await self._run("withdraw_bots_except", slugs)

    async def upsert_skill(self, name: str, description: str, compiled: dict[str, Any]) -> None:
        await self._run("upsert_skill", name, description, compiled)

    async def withdraw_skills_except(self, names: list[str]) -> None:
        await self._run("withdraw_skills_except", names)

    async def upsert_tool(self, name: str, kind: str, compiled: dict[str, Any]) -> None:
        await self._run("upsert_tool", name, kind, compiled)

    async def withdraw_tools_except(self, names: list[str]) -> None:
        await self._run("withdraw_tools_except", names)

    async def upsert_command(self, *, name: str, bot: str | None, tool: str | None, surfaces: list[str],
                             shape: dict[str, Any], prompt: str | None, compiled: dict[str, Any]) -> None:
        await self._run("upsert_command", name, bot, tool, surfaces, shape, prompt, compiled)

    async def withdraw_commands_except(self, names: list[str]) -> None:
        await self._run("withdraw_commands_except", names)

    async def link(self, skills: list[tuple[str, str]], tools: list[tuple[str, str]]) -> None:
        """Which skills and tools each bot has, written again whole: (bot, skill) and (bot, tool) pairs."""
        await self._run("clear_bot_links")
        await self._run("insert_bot_skills", [b for b, _ in skills], [s for _, s in skills])
        await self._run("insert_bot_tools", [b for b, _ in tools], [t for _, t in tools])
