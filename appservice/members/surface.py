"""The ``members`` surface: where a member bot's editions are delivered (engine/surface.py's four asks).

An edition is judged as the run finishes, in the same commit (``appservice.members.edition.judge``):

- an edition (it answered, and reached at least one of its sources when it has any) is queued in the outbox
  for the bot's own room — the card over the text, as the builder's puppet (whose name there is the
  persona's) — and clears any outage;
- a failed edition (it errored, came back empty, or reached none of its sources) counts one more failure in
  Postgres (so a restart forgives nothing): the first of an outage posts the explanation once, with a note
  that it keeps trying; later ones post nothing (the tick stretches an interval bot's schedule meanwhile).

A dry run (the gate of a bot's birth) is delivered nowhere: the builder reads its outcome itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from appservice.matrix.tables.outbox import OutboxTables
from appservice.members.book import Book, Kept
from appservice.members.content import edition_content, notice
from appservice.members.edition import accepted_card, judge
from appservice.members.errors import CharterUnreadable
from appservice.members.runs import SURFACE, schedule_words
from appservice.members.tables import MemberTables
from engine.content import Registry
from engine.content.audience import AudienceFacts
from engine.core.messages import load_step
from engine.store import Families, Tx
from engine.surface import Answered, Ended, Outcome, RunInfo

log = logging.getLogger(__name__)


def edition_txn(run_id: int) -> str:
    return f"summon.member.run{run_id}"


class MembersSurface:
    name = SURFACE

    def __init__(self, book: Book, registry: Callable[[], Registry], *, server_name: str,
                 host: str | None = None) -> None:
        self.book = book
        self._registry = registry
        self.server_name = server_name
        self.host = host  # the builder, whose puppet posts in every member bot's room

    async def facts(self, db: Families, room_id: str | None, user_id: str | None, *,
                    site_classes: frozenset[str] = frozenset()) -> AudienceFacts:
        # An edition is asked by nobody: who anybody is changes nothing it may use.
        return AudienceFacts(user_id=user_id, local_server=self.server_name, site_classes=site_classes)

    async def working(self, run: RunInfo, on: bool) -> None:
        return None

    async def published(self, registry: Registry) -> None:
        return None

    async def deliver(self, tx: Tx, run: RunInfo, outcome: Outcome) -> None:
        context = await tx.runs.context(run.id)
        charter_id = context.get("charter")
        if context.get("dry_run") is not None or not isinstance(charter_id, str):
            return
        try:
            kept = await self.book.read(tx, charter_id)
        except CharterUnreadable as exc:
            log.error("edition of run %s not posted: %s", run.id, exc, extra={"run": run.id, "charter": charter_id})
            return
        bot = self._registry().get(run.bot)
        if kept is None or kept.charter.room_id is None or bot is None:
            log.info("edition of run %s not posted: its bot was removed meanwhile", run.id, extra={"run": run.id})
            return
        steps = [load_step(p) for p in await tx.runs.steps(run.id)]
        answer = outcome.text if isinstance(outcome, Answered) else None
        error = outcome.reason or outcome.ending if isinstance(outcome, Ended) else None
        verdict = judge(steps, answer, has_sources=bool(kept.charter.fetches), error=error)
        room_id = kept.charter.room_id
        if verdict.ok:
            cleared = await tx.of(MemberTables).succeeded(charter_id)
            if cleared:
                log.info("member bot %s is back after %d failed edition(s)", charter_id, cleared,
                         extra={"charter": charter_id, "run": run.id})
            await tx.of(OutboxTables).enqueue(txn_id=edition_txn(run.id), room_id=room_id, sender=bot.user_id,
                                    event_type="m.room.message",
                                    content=edition_content(answer or "", accepted_card(steps)), run_id=run.id)
            return
        await self.failed_edition(tx, kept, verdict.why, txn=edition_txn(run.id), sender=bot.user_id, run_id=run.id)

    async def failed_edition(self, tx: Tx, kept: Kept, why: str, *, txn: str, sender: str,
                             run_id: int | None = None) -> None:
        """One more failed edition in a row (counted in Postgres, so a restart forgives nothing): the first of an
        outage posts the explanation once in the bot's room, with a note that it keeps trying; later ones post
        nothing."""
        charter = kept.charter
        failures = await tx.of(MemberTables).failed(kept.id)
        log.warning("member bot %s: failed edition (%d in a row): %s", kept.id, failures, why,
                    extra={"charter": kept.id, "run": run_id})
        if failures == 1 and charter.room_id is not None:
            words = (self._registry().strings.get("members", "outage") or "{name}: {why}").format(
                name=f"{charter.glyph} {charter.name}", why=why, when=schedule_words(charter))
            await tx.of(OutboxTables).enqueue(txn_id=txn, room_id=charter.room_id, sender=sender, event_type="m.room.message",
                                    content=notice(words), run_id=run_id)

    async def refused(self, tx: Tx, kept: Kept, occurrence: str, reason: str) -> None:
        """An edition the summons refused (no provider can answer, the day's cap was reached…): skipped, and
        said once to the owner as a failed edition — never lost without a word."""
        registry = self._registry()
        bot = registry.get(self.host) if self.host else None
        why = registry.strings.get("members", "no_provider") if reason == "no_provider" else None
        if why is None:
            why = (registry.strings.get("members", "refused") or "{reason}").format(reason=reason)
        if bot is not None:
            await self.failed_edition(tx, kept, why, txn=f"summon.member.{kept.id}.{occurrence}.refused",
                                      sender=bot.user_id)
