"""The member bots' clock (SPEC §10): kept in Postgres as a ``bot_clock`` row per charter (on the bot that
hosts them, under ``member:<id>``), so it survives restarts. Each tick, each charter in its own transaction:
its clock locked (``FOR UPDATE SKIP LOCKED``: two services fire it once), the charter re-read (an edit or a
removal takes effect at once; one that will not open is skipped, logged, and the others go on), the next
occurrence armed *first* — the clock advanced in the same commit as the run is summoned, so a crash never
silences the bot and a refused or failed run still counts as fired — then the edition is summoned as an
ordinary run. When nothing is owed the tick writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from appservice.members.book import Book, Kept
from appservice.members.errors import CharterUnreadable
from appservice.members.runs import edition_summons
from appservice.members.schedule import owed
from appservice.members.tables import MemberTables
from engine.content import Registry
from engine.errors import StoreError
from engine.run.refusals import Refused
from engine.run.summon import summon
from engine.store import Store, Tx

log = logging.getLogger(__name__)


def clock_key(charter_id: str) -> str:
    return f"member:{charter_id}"


# What a surface does with an edition its summons refused (in the tick's transaction): the charter, the
# occurrence, why.
OnRefused = Callable[[Tx, Kept, str, str], Awaitable[None]]


async def member_tick(store: Store, book: Book, registry: Registry, *, host: str,
                      refused: OnRefused | None = None) -> list[int]:
    """Fire every member bot's owed edition at the database's now; the runs started. An edition the summons
    refuses (no provider can answer, the day's cap) is skipped and handed to ``refused`` — said once to its owner
    as a failed edition, never lost without a word."""
    if registry.get(host) is None:
        return []  # the builder is off (withdrawn, or renamed without telling the config): nothing runs
    started: list[int] = []
    for charter_id in await store.of(MemberTables).ids():
        try:
            run_id = await _fire(store, book, registry, charter_id, host, refused)
        except StoreError:
            log.exception("member bot %s: its tick failed; will try again", charter_id, extra={"charter": charter_id})
            continue
        if run_id is not None:
            started.append(run_id)
    return started


async def _fire(store: Store, book: Book, registry: Registry, charter_id: str, host: str,
                refused: OnRefused | None) -> int | None:
    async with store.transaction("member_tick") as tx:
        clock = await tx.schedules.clock_for_update(host, clock_key(charter_id))
        if clock is None:
            return None  # another tick holds it, or it was removed meanwhile
        now = await tx.schedules.now()
        row = await tx.of(MemberTables).get(charter_id)
        if row is None:
            return None
        try:
            kept = book.unseal(row)
        except CharterUnreadable as exc:
            log.error("member bot skipped: %s", exc, extra={"charter": charter_id})
            return None
        occurrence = owed(kept.charter.schedule, clock.last_fired_at, kept.failures, now)
        if occurrence is None:
            return None
        await tx.schedules.advance_clock(host, clock_key(charter_id), occurrence)
        if kept.charter.room_id is None:
            log.error("member bot %s has no room; its edition of %s counts as fired", charter_id, occurrence,
                      extra={"charter": charter_id})
            return None
        outcome = await summon(tx, registry, edition_summons(
            charter_id, kept.charter, host=host, local_server=registry.server_name, occurrence=occurrence))
        if isinstance(outcome, Refused) and refused is not None:
            await refused(tx, kept, occurrence.isoformat(), outcome.reason)
    if isinstance(outcome, Refused):
        log.warning("member bot %s: its edition of %s was refused (%s); it counts as fired", charter_id,
                    occurrence, outcome.reason, extra={"charter": charter_id})
        return None
    log.info("member bot %s: edition of %s is run %s", charter_id, occurrence, outcome.run_id,
             extra={"charter": charter_id, "run": outcome.run_id})
    return outcome.run_id
