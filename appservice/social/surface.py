"""The social surface as the engine sees it: an ``engine.surface.Surface``. A rule's run is asked by nobody — a
guest is nobody of ours (``facts``) — and what it answers is a draft (``deliver``): it waits in the review place
for a person, unless its rule sends automatically, and then it is sent only after the rule's authority is asked
again. An ending with no answer is said in the review place, never to the guest."""

from __future__ import annotations

import logging
from collections.abc import Callable

from appservice.matrix.tables.lines import LineTables
from appservice.matrix.tables.rooms import RoomTables
from appservice.social.authority import guest_facts
from appservice.social.kind import NAME
from appservice.social.review import Review
from appservice.social.tables import SocialTables
from engine.content import Registry
from engine.content.audience import AudienceFacts
from engine.store import Families, Tx
from engine.surface import Answered, Outcome, RunInfo

log = logging.getLogger(__name__)


class SocialSurface:
    name = NAME

    def __init__(self, review: Review, registry: Callable[[], Registry], *, server_name: str) -> None:
        self.review = review
        self._registry = registry
        self.server_name = server_name

    async def facts(self, db: Families, place: str | None, user_id: str | None, *,
                    site_classes: frozenset[str] = frozenset()) -> AudienceFacts:
        """Whoever asks, a rule's run is for a guest: no account, no personal data, never ``private``."""
        return guest_facts(self.server_name)

    async def deliver(self, tx: Tx, run: RunInfo, outcome: Outcome) -> None:
        draft = await tx.of(SocialTables).draft_of_run(run.id)
        rule = await tx.of(SocialTables).rule(draft.rule_id) if draft is not None else None
        if draft is None or rule is None:
            log.error("run %s has no social draft to deliver to", run.id, extra={"run": run.id})
            return
        # The whole answer, as written: a numbered list in a reply to a guest is words, not buttons to press.
        text = outcome.text.strip() if isinstance(outcome, Answered) else ""
        written = await tx.of(SocialTables).written(draft.id, text, "pending" if text else "ended")
        if written is None:
            log.warning("run %s: its draft %s was settled before it was written", run.id, draft.id,
                        extra={"run": run.id})
            return
        if not text:
            await tx.of(SocialTables).happened(rule.id, "ended", draft_id=draft.id, run_id=run.id,
                                               why=None if isinstance(outcome, Answered) else str(outcome.ending))
            bot = self._registry().get(rule.bot)
            await self.review.note(tx, written, ".ended", self.review.say()("ended", bot=bot.name if bot else rule.bot))
            return
        await tx.of(SocialTables).happened(rule.id, "drafted", draft_id=draft.id, run_id=run.id)
        if rule.auto and rule.state == "active":
            await self.review.send(tx, written, rule, by=None)
            return
        row = await tx.runs.get(run.id)
        await self.review.drafted(tx, written, rule, row.prompt if row is not None else "",
                                  await self._guest(tx, draft.room_id, draft.line_event))

    async def _guest(self, tx: Tx, room_id: str, event_id: str) -> str:
        """What the guest who wrote the line is called in the room (their display name, as the bridge set it)."""
        sender = await tx.of(LineTables).sender_of(event_id, room_id) or ""
        member = await tx.of(RoomTables).member(room_id, sender) if sender else None
        return member.display_name if member is not None and member.display_name else sender

    async def working(self, run: RunInfo, on: bool) -> None:
        """Nothing is shown: a bridged room's typing would reach the platform before anyone decided to answer."""

    async def published(self, registry: Registry) -> None:
        """Nothing to show: rules name bots by their slugs, read at each line."""
