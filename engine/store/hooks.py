"""A site's webhook deliveries, each acted on once (``sql/queries/hooks.sql``)."""

from __future__ import annotations

from engine.store.base import Family


class Hooks(Family):
    __slots__ = ()

    async def record_delivery(self, delivery: str, signature: str, key_id: str, event: str) -> bool:
        """Remember a delivery; False when it was seen before (a replay: wake nothing)."""
        return await self._value("record_hook_delivery", delivery, signature, key_id, event) is not None

    async def prune(self, keep_seconds: float) -> int:
        return await self._run("prune_hook_deliveries", keep_seconds)
