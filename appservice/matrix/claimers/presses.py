"""A press on a bot's choices (SPEC §4): a keycap reaction on the offer's answer, a vote on its poll, or
the asker replying with the bare number (in the offer's thread, or as a reply to the answer).

A press is an act. It is recorded (``bot_choices``: who, which offer, which choice, where), and the
offer — which belongs to the room — is taken once, in a single statement: of two people pressing at the
same moment exactly one gets through, and the other is told it is gone rather than the bot being
summoned twice. The one that gets through summons the bot with the *offer's* words (the choice's
label) as that person's next words — never words a client sent. Then the spent set is marked: the
answer edited to show which was taken, the keycaps removed, the poll ended.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from appservice.matrix.asking.asking import Asking
from appservice.matrix.delivery.offers import (
    POLL_END,
    answer_txn,
    bare_number,
    keycap_number,
    keycap_txn,
    poll_end_content,
    poll_txn,
    spent_markdown,
    voted,
)
from appservice.matrix.delivery.render import answer_content
from appservice.matrix.inbound.followups import Followup
from appservice.matrix.inbound.said import Line
from appservice.matrix.ours import Ours
from appservice.matrix.tables.offers import Offer, OfferTables
from appservice.matrix.tables.outbox import OutboxTables
from appservice.matrix.tables.rooms import RoomTables
from engine.content import Bot, Registry
from engine.core.choices import Choice, Link
from engine.run.summon import Summoned
from engine.store import Tx

log = logging.getLogger(__name__)

# A poll vote, under the stable and the unstable (MSC3381) type.
POLL_RESPONSES = frozenset({"m.poll.response", "org.matrix.msc3381.poll.response"})

class Presses:
    def __init__(self, registry: Callable[[], Registry], ours: Ours, asking: Asking) -> None:
        self._registry = registry
        self.ours = ours
        self.asking = asking

    async def claim(self, tx: Tx, line: Line, event: Mapping[str, Any], followups: list[Followup]) -> bool:
        """The order's "press" step (``line``)."""
        return await self.line(tx, line)

    async def line(self, tx: Tx, line: Line) -> bool:
        """A bare number answering a bot's offer: True when it was taken as a press (or told it was gone).
        Only the asker's counts; from anyone else a number is just a line."""
        n = bare_number(line.text)
        if n is None:
            return False
        offer = await tx.of(OfferTables).for_number(line.room_id, line.sender, line.thread_root, line.reply_to)
        if offer is None or n > len(offer.choices):
            return False
        return await self._press(tx, offer, n, "number", line)

    async def reaction(self, tx: Tx, room_id: str, event: Mapping[str, Any]) -> bool:
        """A keycap on a bot's offer: True when it was a press."""
        content = event.get("content")
        rel = content.get("m.relates_to") if isinstance(content, Mapping) else None
        if not isinstance(rel, Mapping) or rel.get("rel_type") != "m.annotation":
            return False
        n = keycap_number(rel.get("key"))
        target = rel.get("event_id")
        line = self._presser(event, room_id)
        if n is None or not isinstance(target, str) or line is None:
            return False
        offer = await tx.of(OfferTables).by_answer(target, room_id)
        if offer is None or n > len(offer.choices):
            return False
        return await self._press(tx, offer, n, "reaction", line)

    async def poll_response(self, tx: Tx, room_id: str, event: Mapping[str, Any]) -> bool:
        """A vote on a bot's poll: True when it was a press."""
        content = event.get("content")
        vote = voted(content) if isinstance(content, Mapping) else None
        line = self._presser(event, room_id)
        if vote is None or line is None:
            return False
        poll, answers = vote
        offer = await tx.of(OfferTables).by_poll(poll, room_id)
        if offer is None:
            return False
        n = int(answers[0]) if answers and answers[0].isdecimal() else 0
        if not 1 <= n <= len(offer.choices):
            return True  # a spoiled vote (an answer the poll does not have), or a vote taken back
        return await self._press(tx, offer, n, "vote", line)

    # --- the press -------------------------------------------------------------------------------

    def _presser(self, event: Mapping[str, Any], room_id: str) -> Line | None:
        """The pressing event as its sender's line; None when malformed, or pressed by one of ours (the
        puppet's own keycaps)."""
        sender, event_id, ts = event.get("sender"), event.get("event_id"), event.get("origin_server_ts")
        if not isinstance(sender, str) or not isinstance(event_id, str) or not isinstance(ts, int):
            return None
        if self.ours(sender):
            return None
        return Line(event_id=event_id, room_id=room_id, sender=sender, ts=ts, event_type=str(event.get("type")),
                    text="")

    async def _press(self, tx: Tx, offer: Offer, n: int, how: str, line: Line) -> bool:
        label = str(offer.choices[n - 1]["label"])
        press = await tx.of(OfferTables).record_press(offer_id=offer.id, chooser=line.sender, choice=n, how=how,
                                             event_id=line.event_id, room_id=line.room_id, thread_root=offer.thread_root)
        if press is None:
            return True  # this event pressed before: the homeserver delivered it again
        bot = self._registry().get(offer.bot)
        if bot is None:
            log.warning("a press on offer %s, whose bot %s is gone", offer.id, offer.bot, extra={"room": line.room_id})
            return True
        taken = await tx.of(OfferTables).take(offer.id, line.sender, n)
        if taken is None:
            await self._gone(tx, offer.run_id, bot, line, how)
            return True
        if how != "number":
            # A keycap or a vote is not a line: the presser's words are said where the offer was made.
            line = Line(event_id=line.event_id, room_id=line.room_id, sender=line.sender, ts=line.ts,
                        event_type=line.event_type, text=label, thread_root=offer.thread_root,
                        reply_to=offer.answer_event)
        result = await self.asking.ask(tx, line, bot, prompt=label, trigger_event=line.event_id)
        if not isinstance(result, Summoned):
            # Refused (told to them when they can act on it): the press did not go through, so the
            # offer is still to be had.
            await tx.of(OfferTables).release(offer.id)
            return True
        await tx.of(OfferTables).press_taken(press, result.run_id)
        log.info("%s took choice %d of offer %s; run %s", line.sender, n, offer.id, result.run_id,
                 extra={"room": line.room_id, "bot": bot.slug, "run": result.run_id})
        await self._spend(tx, taken, bot)
        return True

    async def _gone(self, tx: Tx, run_id: int, bot: Bot, line: Line, how: str) -> None:
        """A press on a spent offer is told it is gone, in the bot's words (with none, nothing is said)."""
        offer = await tx.of(OfferTables).of_run(run_id)
        assert offer is not None and offer.taken_by is not None and offer.taken_choice is not None
        if offer.taken_by == line.sender:
            return  # pressing again what they took themselves
        words = self._registry().strings.get("choices", "gone")
        if not words:
            return
        name = await self._name(tx, line.room_id, offer.taken_by)
        text = words.format(bot=bot.name, choice=offer.choices[offer.taken_choice - 1]["label"], name=name)
        reply_to = line.event_id if how == "number" else offer.answer_event
        content = answer_content(text, thread_root=offer.thread_root, reply_to=reply_to, mention=line.sender)
        await tx.of(OutboxTables).enqueue(txn_id=f"summon.gone.{line.event_id}", room_id=line.room_id, sender=bot.user_id,
                                event_type="m.room.message", content=content)

    async def _spend(self, tx: Tx, offer: Offer, bot: Bot) -> None:
        """Mark the spent set: the answer edited to show which was taken, the keycaps removed, the poll ended."""
        strings = self._registry().strings
        run_id, n, room = offer.run_id, offer.taken_choice, offer.room_id
        assert n is not None and offer.taken_by is not None
        choices = [Choice(c["label"], c.get("detail", "")) for c in offer.choices]
        links = [Link(link["label"], link["url"]) for link in offer.links]
        name = await self._name(tx, room, offer.taken_by)
        label = choices[n - 1].label
        taken = strings.get("choices", "taken")
        mark = taken.format(number=n, choice=label, name=name) if taken else f"✅ {n}. {label}"
        edited = answer_content(spent_markdown(offer.words, choices, links, n, mark), thread_root=None,
                                reply_to=None, mention=offer.asked_by)
        await tx.of(OutboxTables).enqueue(txn_id=f"{answer_txn(run_id)}.spent", room_id=room, sender=bot.user_id,
                                event_type="m.room.message", content=edited, run_id=run_id, of_txn=answer_txn(run_id))
        if offer.style == "poll":
            ended = strings.get("choices", "poll_ended")
            text = ended.format(choice=label, name=name) if ended else mark
            await tx.of(OutboxTables).enqueue(txn_id=f"{poll_txn(run_id)}.end", room_id=room, sender=bot.user_id,
                                    event_type=POLL_END, content=poll_end_content(text), run_id=run_id,
                                    of_txn=poll_txn(run_id))
            return
        for k in range(1, len(choices) + 1):
            await tx.of(OutboxTables).enqueue(txn_id=f"{keycap_txn(run_id, k)}.gone", room_id=room, sender=bot.user_id,
                                    event_type="m.room.redaction", content={}, run_id=run_id,
                                    of_txn=keycap_txn(run_id, k))

    async def _name(self, tx: Tx, room_id: str, user_id: str) -> str:
        member = await tx.of(RoomTables).member(room_id, user_id)
        return member.display_name if member is not None and member.display_name else user_id
