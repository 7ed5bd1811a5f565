"""A guest's line in a bridged room asks the bots its rules name (SPEC §14): the social surface's side of the one
door in (``engine.run.summon``), every refusal made there.

- Matched against the room's live rules for lines of its kind (a DM message, a comment, a group message): the
  phrase's words, side by side, whole, whatever their case (``words.matches``), over at most ``line_chars`` of
  the line — a guest's line is untrusted input, cut once, in one pass.
- One draft per rule and line (``words.line_key``: the conversation, the guest and the words), so a bridge
  replaying its history, or the same words said ten times in a minute, makes one; and at most
  ``drafts_per_hour`` a rule, so a bridge that floods the room does not flood the model (each line over it is
  recorded in the rule's history as ``capped``).
- The run is asked by nobody (the guest is nobody of ours: ``serves:`` is the gate), about the conversation
  (``subject``: its ceilings are the conversation's, as ``limits.per`` counts a person's; it counts the
  conversation's live runs), and handed only the triggering line and a bounded history of that same
  conversation — the thread, or the DM — of the guests' lines and our bots' own replies: never the rest of the
  room, another conversation, or a line of our own people's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from appservice.config import Social
from appservice.matrix.asking.context import ContextReader, ContextSettings
from appservice.matrix.inbound.said import Line
from appservice.matrix.tables.rooms import RoomTables
from appservice.social.authority import guest_facts, lost
from appservice.social.bridged import LINE_KINDS, Bridges
from appservice.social.kind import NAME
from appservice.social.review import Review, conversation_of
from appservice.social.tables import Bridged, SocialTables
from appservice.social.words import line_key, matches, words_of
from engine.content import Registry
from engine.run.summon import Summoned, Summons, summon
from engine.store import Tx

log = logging.getLogger(__name__)
CHARS_PER_TOKEN = 4


class SocialAsking:
    def __init__(self, config: Social, registry: Callable[[], Registry], bridges: Bridges, review: Review, *,
                 server_name: str, ours: Callable[[str], bool], service_user: str, max_attempts: int = 3) -> None:
        self.config = config
        self.review = review
        self._registry = registry
        self.bridges = bridges
        self.server_name = server_name
        self.ours = ours
        self.service_user = service_user
        self.max_attempts = max_attempts
        # The history reader reads one line more than the history: the triggering line is its last.
        self.reader = ContextReader(ContextSettings(tokens=max(1, config.history_chars // CHARS_PER_TOKEN),
                                                    lines=config.history_lines + 1))

    async def heard(self, tx: Tx, line: Line, room: Bridged) -> None:
        """A guest said ``line`` in bridged ``room``: a draft for each live rule it matches."""
        kind = LINE_KINDS[room.conversation]
        rules = await tx.of(SocialTables).live_rules(room.room_id, kind)
        if not rules:
            return
        said = line.text[: self.config.line_chars]
        heard = words_of(said)
        for rule in rules:
            if not matches(words_of(rule.phrase), heard):
                continue
            if await tx.of(SocialTables).drafts_lately(rule.id) >= self.config.drafts_per_hour:
                await tx.of(SocialTables).happened(rule.id, "capped", why=line.event_id)
                log.info("rule %s matched %s but made %s drafts this hour already", rule.id, line.event_id,
                         self.config.drafts_per_hour, extra={"room": room.room_id})
                continue
            draft = await tx.of(SocialTables).add_draft(rule.id, room.room_id, line.thread_root, line.event_id,
                                                        line_key(room.room_id, line.thread_root, line.sender, said))
            if draft is None:
                log.info("rule %s: line %s was drafted before (the same words, the same guest)", rule.id,
                         line.event_id, extra={"room": room.room_id})
                continue
            # Authority is asked before the model is: a rule whose author lost the power, or whose bot is no longer
            # published for the social surface, pauses here and costs nothing.
            gone = await lost(tx, rule, self._registry, level=self.config.power, server_name=self.server_name)
            if gone is not None:
                held = await tx.of(SocialTables).draft(draft)
                await self.review.hold(tx, held, rule, gone)
                continue
            await self._ask(tx, line, room, rule.id, rule.bot, draft, said)

    async def _ask(self, tx: Tx, line: Line, room: Bridged, rule_id: int, bot: str, draft: int, said: str) -> None:
        registry = self._registry()
        conversation = conversation_of(room.room_id, line.thread_root)
        summons = Summons(
            bot=bot, surface=NAME, prompt=said, asked_by=None, facts=guest_facts(self.server_name),
            place=room.room_id, thread=line.thread_root, trigger_event=line.event_id,
            subject=f"{NAME}:{conversation}", context=await self.context(tx, line, room, said, registry),
            counts_live=True,
        )
        async with tx.savepoint():
            result = await summon(tx, registry, summons, max_attempts=self.max_attempts)
        if isinstance(result, Summoned):
            await tx.of(SocialTables).set_run(draft, result.run_id)
            log.info("rule %s: line %s asked %s (run %s)", rule_id, line.event_id, bot, result.run_id,
                     extra={"room": room.room_id, "bot": bot, "run": result.run_id})
            return
        await tx.of(SocialTables).settle(draft, "ended", by=None, was="asked")
        await tx.of(SocialTables).happened(rule_id, "ended", draft_id=draft, why=result.reason)
        log.info("rule %s: line %s was not drafted (%s)", rule_id, line.event_id, result.reason,
                 extra={"room": room.room_id, "bot": bot})

    async def context(self, tx: Tx, line: Line, room: Bridged, said: str, registry: Registry) -> dict[str, Any]:
        """The conversation the line is in, as its guest reads it, bounded, with only the guests' lines and our
        bots' replies in it; its last line is the triggering one (shortened to what the bot is given)."""
        context = await self.reader.read(tx, line, registry.strings)
        kept = [entry for entry in context.get("lines") or [] if self._kept(str(entry.get("sender") or ""), room)]
        if kept and kept[-1].get("event_id") == line.event_id:
            kept[-1] = {**kept[-1], "said": said}
        else:
            name = (await tx.of(RoomTables).member(line.room_id, line.sender))
            kept.append({"event_id": line.event_id, "sender": line.sender, "said": said, "ts": line.ts,
                         "name": name.display_name if name is not None and name.display_name else line.sender})
        context["lines"] = kept
        return context

    def _kept(self, sender: str, room: Bridged) -> bool:
        """A guest's line, or one of our bots' (its earlier replies here); never a person of ours, nor the service."""
        if self.bridges.is_guest(sender, room):
            return True
        return self.ours(sender) and sender != self.service_user
