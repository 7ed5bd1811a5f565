"""The review place (SPEC §14): a thread per bridged conversation in the staff room ``social.staff_room``, as the
desk's staff room has one per desk conversation. Everything is posted there by the service user, queued in the
outbox in the commit that made it, so it stands or falls with what it says.

- A draft arrives as a notice — its bot, its rule, and the label that says who would see it — with ✅ and 🗑 under
  it. ✅ sends it as it is; 🗑 discards it; a reply to the draft sends the reply's words instead.
- Before any send, the rule's authority is asked again (``authority.lost``): losing it pauses the rule, says so
  here, and sends nothing. The person sending a reviewed draft must hold the power too (else it stays waiting).
- A send goes only to where the triggering line was said — the same room, the same thread, as a reply to that
  line — by the rule's bot. Nothing the model wrote can say otherwise: the destination is the draft's row.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from appservice.matrix.delivery.render import answer_content
from appservice.matrix.delivery.review import DISCARD, SEND, VARIATION, contact_line, in_thread
from appservice.matrix.inbound.said import Line
from appservice.matrix.tables.outbox import OutboxTables
from appservice.matrix.tables.rooms import RoomTables
from appservice.social.authority import Lost, holds, lost
from appservice.social.say import Say
from appservice.social.tables import Draft, Rule, SocialTables
from engine.content import Registry
from engine.store import Tx

log = logging.getLogger(__name__)


def conversation_of(room_id: str, thread: str | None) -> str:
    """A bridged conversation: a room's main timeline (a DM), or one thread in it (a post's comments)."""
    return f"{room_id}|{thread or ''}"


def thread_txn(conversation: str) -> str:
    return "summon.social.t" + hashlib.sha256(conversation.encode()).hexdigest()[:24]


def draft_txn(draft_id: int, part: str = "") -> str:
    return f"summon.social.d{draft_id}{part}"


class Review:
    def __init__(self, registry: Callable[[], Registry], *, room_id: str, service_user: str, level: int,
                 server_name: str) -> None:
        self._registry = registry
        self.room_id = room_id
        self.service_user = service_user
        self.level = level
        self.server_name = server_name

    def say(self) -> Say:
        return Say(self._registry().strings)

    # --- posted there -----------------------------------------------------------------------------------

    async def _thread(self, tx: Tx, draft: Draft) -> str:
        conversation = conversation_of(draft.room_id, draft.thread)
        txn = thread_txn(conversation)
        if await tx.of(SocialTables).remember_post(txn, conversation, None, "thread"):
            say = self.say()
            room = await tx.of(SocialTables).room(draft.room_id)
            words = say("thread", network=room.network if room else "", conversation=say.conversation(room)
                        if room else "", channel=(room.channel if room and room.channel else draft.room_id))
            content = {"msgtype": "m.notice", "body": words or conversation, "m.mentions": {}}
            await tx.of(OutboxTables).enqueue(txn_id=txn, room_id=self.room_id, sender=self.service_user,
                                              event_type="m.room.message", content=content)
        return txn

    async def _post(self, tx: Tx, draft: Draft, txn: str, content: dict[str, Any], kind: str) -> bool:
        room = await tx.of(RoomTables).get(self.room_id)
        if room is not None and room.encrypted:
            log.error("the social review room %s is encrypted: nothing is posted there", self.room_id,
                      extra={"room": self.room_id})
            return False
        root = await self._thread(tx, draft)
        if not await tx.of(SocialTables).remember_post(txn, conversation_of(draft.room_id, draft.thread),
                                                       draft.id if kind == "draft" else None, kind):
            return False
        await tx.of(OutboxTables).enqueue(txn_id=txn, room_id=self.room_id, sender=self.service_user,
                                          event_type="m.room.message", content=in_thread(content), of_txn=root)
        return True

    async def note(self, tx: Tx, draft: Draft, part: str, text: str) -> None:
        """One line about ``draft`` in its conversation's thread (what became of it)."""
        if text:
            await self._post(tx, draft, draft_txn(draft.id, part), answer_content(
                text, thread_root=None, reply_to=None, mention=None), "note")

    async def drafted(self, tx: Tx, draft: Draft, rule: Rule, line: str, guest: str) -> None:
        """The draft for review: the guest's line as they wrote it, then the bot's words, ✅ and 🗑 under it."""
        say = self.say()
        room = await tx.of(SocialTables).room(rule.room_id)
        bot = self._registry().get(rule.bot)
        await self._post(tx, draft, draft_txn(draft.id, ".line"), contact_line(guest, line), "note")
        head = say("draft", bot=bot.name if bot else rule.bot, id=rule.id, phrase=rule.phrase,
                   label=say.label(rule.destination, room))
        text = f"{head}\n\n{draft.text}" if head else draft.text or ""
        txn = draft_txn(draft.id)
        if not await self._post(tx, draft, txn, answer_content(text, thread_root=None, reply_to=None, mention=None),
                                "draft"):
            return
        for n, key in enumerate((SEND, DISCARD)):
            await tx.of(OutboxTables).enqueue(
                txn_id=draft_txn(draft.id, f".r{n}"), room_id=self.room_id, sender=self.service_user,
                event_type="m.reaction", of_txn=txn,
                content={"m.relates_to": {"rel_type": "m.annotation", "event_id": None, "key": key}})

    # --- sending ----------------------------------------------------------------------------------------

    async def send(self, tx: Tx, draft: Draft, rule: Rule, *, by: str | None, text: str | None = None) -> bool:
        """Send ``draft`` (its own words, or ``text`` instead) where its line was said, after authority is asked
        again. ``by``: who sent it (None: automatically). False: nothing was sent (and why is said here)."""
        say = self.say()
        if rule.state != "active":
            await self.note(tx, draft, f".held{rule.state}", say("held", id=rule.id, why=rule.paused_why or rule.state))
            return False
        gone = await lost(tx, rule, self._registry, level=self.level, server_name=self.server_name)
        if gone is not None:
            await self.hold(tx, draft, rule, gone)
            return False
        if by is not None and not await holds(tx, rule.governed_in, by, self.level):
            await self.note(tx, draft, f".refused.{hashlib.sha256(by.encode()).hexdigest()[:12]}",
                            say("not_sent", who=by))
            log.info("%s may not send draft %s (power < %s in %s)", by, draft.id, self.level, rule.room_id,
                     extra={"room": rule.room_id})
            return False
        words = text if text is not None else draft.text or ""
        status = "sent" if text is None else "edited"
        settled = await tx.of(SocialTables).settle(draft.id, status, by=by or "auto", text=text)
        if settled is None:
            return False  # settled already (a second press, or the other key first)
        bot = self._registry().get(rule.bot)
        assert bot is not None  # lost() said it is published
        content = answer_content(words, thread_root=draft.thread, reply_to=draft.line_event, mention=None)
        content["msgtype"] = "m.text"  # a reply to a person on the platform, not a bot's aside
        await tx.of(OutboxTables).enqueue(txn_id=draft_txn(draft.id, ".out"), room_id=draft.room_id,
                                          sender=bot.user_id, event_type="m.room.message", content=content,
                                          run_id=draft.run_id)
        room = await tx.of(SocialTables).room(rule.room_id)
        label = say.label(rule.destination, room)
        what = "auto_sent" if by is None else status
        await tx.of(SocialTables).happened(rule.id, what, draft_id=draft.id, run_id=draft.run_id, by=by)
        name = await self._name(tx, by) if by else ""
        await self.note(tx, draft, ".settled", say("auto_sent", label=label) if by is None
                        else say(status, name=name, label=label))
        log.info("draft %s of rule %s sent to %s (%s)", draft.id, rule.id, draft.room_id, what,
                 extra={"room": draft.room_id, "run": draft.run_id})
        return True

    async def hold(self, tx: Tx, draft: Draft | None, rule: Rule, why: Lost) -> None:
        """Authority is lost: the rule pauses, the review place is told, and nothing is sent."""
        say = self.say()
        reason = say(why.key, who=why.who, bot=why.bot)
        await tx.of(SocialTables).set_state(rule.id, "paused", reason)
        await tx.of(SocialTables).happened(rule.id, "paused", draft_id=draft.id if draft else None,
                                           run_id=draft.run_id if draft else None, why=reason)
        log.warning("rule %s paused: %s", rule.id, why.key, extra={"room": rule.room_id})
        if draft is not None:
            await tx.of(SocialTables).settle(draft.id, "held", by=None, was=draft.status)
            await self.note(tx, draft, ".held", say("held", id=rule.id, why=reason))

    async def _name(self, tx: Tx, user_id: str) -> str:
        member = await tx.of(RoomTables).member(self.room_id, user_id)
        if member is not None and member.display_name:
            return member.display_name
        return user_id.split(":", 1)[0].lstrip("@")

    # --- what the staff do there ------------------------------------------------------------------------

    async def _draft_of(self, tx: Tx, event_id: str | None) -> tuple[Draft, Rule] | None:
        post = await tx.of(SocialTables).post_by_event(event_id) if event_id else None
        if post is None or post.kind != "draft" or post.draft_id is None:
            return None
        draft = await tx.of(SocialTables).draft(post.draft_id)
        rule = await tx.of(SocialTables).rule(draft.rule_id) if draft is not None else None
        return (draft, rule) if draft is not None and rule is not None else None

    async def line(self, tx: Tx, line: Line, ours: Callable[[str], bool]) -> bool:
        """A line in one of the review place's threads: a reply to a draft sends its words instead. Any other
        line there is the staff's own talk, and nothing else answers it. False: not the review place's."""
        if line.room_id != self.room_id or line.thread_root is None:
            return False
        root = await tx.of(SocialTables).post_by_event(line.thread_root)
        if root is None or root.kind != "thread":
            return False
        if ours(line.sender) or line.is_notice or not line.text.strip():
            return True
        found = await self._draft_of(tx, line.reply_to)
        if found is None:
            return True
        draft, rule = found
        if draft.status != "pending":
            return True
        await self.send(tx, draft, rule, by=line.sender, text=line.text.strip())
        return True

    async def reaction(self, tx: Tx, room_id: str, event: Mapping[str, Any], ours: Callable[[str], bool]) -> bool:
        """✅ or 🗑 on a draft. False: not a reaction on a draft of the review place's."""
        if room_id != self.room_id:
            return False
        content = event.get("content")
        relates = content.get("m.relates_to") if isinstance(content, Mapping) else None
        if not isinstance(relates, Mapping) or relates.get("rel_type") != "m.annotation":
            return False
        target, key, sender = relates.get("event_id"), relates.get("key"), event.get("sender")
        if not isinstance(target, str) or not isinstance(key, str) or not isinstance(sender, str):
            return False
        found = await self._draft_of(tx, target)
        if found is None:
            return False
        key = key.replace(VARIATION, "")
        if ours(sender) or key not in (SEND, DISCARD):
            return True
        draft, rule = found
        if draft.status != "pending":
            return True
        if key == SEND:
            await self.send(tx, draft, rule, by=sender)
        elif await holds(tx, rule.governed_in, sender, self.level):
            if await tx.of(SocialTables).settle(draft.id, "discarded", by=sender) is not None:
                await tx.of(SocialTables).happened(rule.id, "discarded", draft_id=draft.id, run_id=draft.run_id,
                                                   by=sender)
                await self.note(tx, draft, ".settled", self.say()("discarded", name=await self._name(tx, sender)))
        else:
            log.info("%s may not discard draft %s", sender, draft.id, extra={"room": rule.room_id})
        return True
