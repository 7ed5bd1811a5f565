"""Whether memories can be kept here, asked when content is published: a ``person+recall`` bot needs pgvector in
the database and the embedding model's package installed. Where either is missing, that bot is refused with one
line saying why and how to mend it, and every other bot is published and runs."""

from __future__ import annotations

import dataclasses
import logging

from engine.content import Registry
from engine.core.memory import uses_recall
from engine.memory.embedder import available
from engine.store import Store

log = logging.getLogger(__name__)


async def recallable(store: Store, registry: Registry) -> tuple[Registry, list[str]]:
    """``registry`` without the ``person+recall`` bots that cannot remember here, and a line for each refused."""
    wanting = [bot for bot in registry.bots.values() if uses_recall(bot.memory)]
    if not wanting:
        return registry, []
    why = await store.memories.ready()
    if why is None and not available():
        why = "the embedding model is not installed (pip install 'summon[recall]')"
    if why is None:
        return registry, []
    refused = [f"{bot.source_path}: memory: person+recall is refused: {why}; every other bot runs"
               for bot in wanting]
    for line in refused:
        log.error("%s", line)
    kept = {slug: bot for slug, bot in registry.bots.items() if not uses_recall(bot.memory)}
    return dataclasses.replace(registry, bots=kept), refused
