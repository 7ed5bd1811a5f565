"""The in-memory surface: the smallest complete ``engine.surface.Surface``, and the pattern a new surface
follows (the desk, the door, member bots' rooms). It imports nothing of Matrix — the engine needs nothing of
Matrix — and it keeps what the engine hands it in lists a test reads.

A surface answers the engine four things (``engine/surface.py``):

- ``facts``: who a person is where the run is. Here: what the test said of them (``people``), else a
  plain member. A real surface reads its own notion of standing (a Matrix room: its power levels).
- ``deliver``: the answer or the ending, inside the transaction that finishes the run. A real surface
  queues it there (``tx.of(OutboxTables).enqueue``) so it stands or falls with the run; this one keeps it in memory.
- ``working``: that a run is being worked on (typing, a progress line); here, a record of it.
- ``published``: content was republished; here, a count.

And one way in: a surface turns what its people say into a ``Summons`` and hands it to
``engine.run.summon`` inside a store transaction (``ask`` below), with every refusal made there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from engine.content import Registry
from engine.content.audience import AudienceFacts
from engine.run.refusals import Refused
from engine.run.summon import Summoned, Summons, summon
from engine.store import Families, Store, Tx
from engine.surface import Outcome, RunInfo
from tests.book import BOOK


class MemorySurface:
    def __init__(self, name: str = "desk", *, local_server: str = "memory",
                 people: Mapping[str, AudienceFacts] | None = None) -> None:
        self.name = name
        self.local_server = local_server
        self.people = dict(people or {})
        self.delivered: list[tuple[RunInfo, Outcome]] = []
        self.working_on: list[tuple[int, bool]] = []
        self.published_count = 0
        self._arrived = asyncio.Condition()

    # --- the engine asks ----------------------------------------------------------------------------

    async def facts(self, db: Families, room_id: str | None, user_id: str | None, *,
                    site_classes: frozenset[str] = frozenset()) -> AudienceFacts:
        known = self.people.get(user_id) if user_id is not None else None
        if known is not None:
            return replace(known, site_classes=known.site_classes | site_classes)
        return AudienceFacts(user_id=user_id, local_server=self.local_server, is_member=user_id is not None,
                             site_classes=site_classes)

    async def deliver(self, tx: Tx, run: RunInfo, outcome: Outcome) -> None:
        self.delivered.append((run, outcome))
        async with self._arrived:
            self._arrived.notify_all()

    async def working(self, run: RunInfo, on: bool) -> None:
        self.working_on.append((run.id, on))

    async def published(self, registry: Registry) -> None:
        self.published_count += 1

    # --- what a surface does with what its people say -----------------------------------------------

    async def ask(self, store: Store, registry: Registry, *, bot: str, who: str | None, said: str,
                  where: str, script: list[dict[str, Any]] | None = None) -> Summoned | Refused:
        """Someone said something to ``bot``: the one door in, every refusal made there. ``script``: what the
        tests' stand-in answers it by (put in its book)."""
        BOOK.say(said, script)
        async with store.transaction("memory_ask") as tx:
            facts = await self.facts(tx, None, who)
            return await summon(tx, registry, Summons(
                bot=bot, surface=self.name, prompt=said, asked_by=who, facts=facts, trigger_event=where,
                context={"kind": "memory", "lines": [{"name": who or "nobody", "said": said}]},
            ))

    async def answer_for(self, run_id: int, timeout: float = 15.0) -> Outcome:
        """What run ``run_id`` delivered, once it has."""
        async with self._arrived:
            await asyncio.wait_for(self._arrived.wait_for(lambda: any(r.id == run_id for r, _ in self.delivered)),
                                   timeout)
        return next(outcome for r, outcome in self.delivered if r.id == run_id)
