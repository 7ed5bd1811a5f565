"""The desk's staff in Matrix (SPEC §9; no desk product does this): with ``desk.staff_room`` set, each desk
conversation is a thread in that room.

Mirrored there, queued in the outbox in the commit that made the change: the thread's root (by the service
user), each line the contact writes (by the service user, their name and words as text — HTML in them is
escaped, never rendered), each answer a bot gives (by its puppet), what the staff answer from the API, a
handover and a resolution. A bot's draft arrives as its puppet's notice with ✅ and 🗑 under it.

And back: a staff member's reply in a conversation's thread goes to the contact as an ``outgoing`` message
in their name and takes the conversation (``open``, assigned to them); ✅ on a draft sends it as it is, 🗑
discards it, and a reply to the draft sends the reply's words instead (an edited version). What the staff do
here is done in the transaction that stores their event.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from appservice.desk.changes import Where
from appservice.desk.desk import NO_ASSISTANT, Desk
from appservice.desk.errors import RequestRefused
from appservice.desk.staff_tables import DeskStaffTables
from appservice.desk.tables import Conversation, Message
from appservice.matrix.delivery.homeserver import Homeserver
from appservice.matrix.delivery.render import answer_content
from appservice.matrix.delivery.review import DISCARD, SEND, VARIATION, contact_line, in_thread
from appservice.matrix.errors import MatrixError
from appservice.matrix.inbound.said import Line
from appservice.matrix.tables.outbox import OutboxTables
from appservice.matrix.tables.rooms import RoomTables
from engine.content import Registry
from engine.store import Tx

log = logging.getLogger(__name__)


def thread_txn(conversation_id: int) -> str:
    return f"summon.desk.c{conversation_id}.thread"


def message_txn(message_id: int, part: str = "") -> str:
    return f"summon.desk.m{message_id}{part}"


class StaffRoom:
    def __init__(self, desk: Desk, registry: Callable[[], Registry], *, room_id: str, service_user: str) -> None:
        self.desk = desk
        self._registry = registry
        self.room_id = room_id
        self.service_user = service_user

    def _words(self, key: str, **fields: Any) -> str:
        words = self._registry().strings.get("desk", key) or ""
        return words.format(**fields) if words else ""

    def _puppet(self, slug: str | None) -> str:
        bot = self._registry().get(slug) if slug else None
        return bot.user_id if bot is not None else self.service_user

    # --- mirrored there ----------------------------------------------------------------------------------

    async def message(self, tx: Tx, where: Where, message: Message, *, created: bool) -> None:
        if not created:
            if message.draft in ("sent", "edited", "discarded"):
                await self._settled(tx, where, message)
            return
        if message.message_type == "incoming":
            content = contact_line(message.sender_name or "", message.content)
            await self._post(tx, where, message_txn(message.id), self.service_user, content, "line", message.id)
        elif message.message_type == "activity" and message.content_attributes.get("activity") == NO_ASSISTANT:
            # No bot can answer it (no provider): the staff are told it is theirs, in the contact's words.
            await self._post(tx, where, message_txn(message.id), self.service_user, answer_content(
                message.content, thread_root=None, reply_to=None, mention=None), "line", message.id)
        elif message.message_type == "outgoing" and message.draft == "pending":
            await self._draft(tx, where, message)
        elif message.message_type == "outgoing" and not message.content_attributes.get("matrix_event"):
            # A bot's answer by its puppet; a note, or a person's answer from the API, by the service user.
            text = message.content
            items = message.content_attributes.get("items") or []
            if items:
                text += "\n\n" + "\n".join(f"{n}. {i.get('title')}" for n, i in enumerate(items, 1) if isinstance(i, dict))
            if message.sender_type == "user":
                text = f"**{message.sender_name}**: {text}"
            if message.private:
                text = f"📝 {text}"
            sender = self._puppet(message.bot) if message.sender_type == "agent_bot" else self.service_user
            await self._post(tx, where, message_txn(message.id), sender, answer_content(
                text, thread_root=None, reply_to=None, mention=None), "line", message.id)

    async def status(self, tx: Tx, where: Where, before: Conversation) -> None:
        after = where.conversation
        if after.assignee != before.assignee and after.assignee is not None and after.assignee.startswith("@"):
            await self._ping(tx, where, after.assignee)
        key = None
        if after.bot_off_at is not None and before.bot_off_at is None:
            key = "staff_handover"
        elif after.status == "resolved" and before.status != "resolved":
            key = "staff_resolved"
        words = self._words(key) if key else ""
        if words:
            await self._post(tx, where, f"summon.desk.c{after.id}.s{after.seq}.{key}", self.service_user,
                             answer_content(words, thread_root=None, reply_to=None, mention=None), "line", None)

    async def _ping(self, tx: Tx, where: Where, user_id: str) -> None:
        """The staff member it was assigned to, mentioned in the conversation's thread (a pill, and m.mentions)."""
        name = await self._staff_name(tx, user_id)
        words = self._words("staff_assigned", name=name)
        if not words:
            return
        link = f'<a href="https://matrix.to/#/{html.escape(user_id, quote=True)}">{html.escape(name)}</a>'
        content = {"msgtype": "m.text", "body": words, "format": "org.matrix.custom.html",
                   "formatted_body": html.escape(words).replace(html.escape(name), link, 1),
                   "m.mentions": {"user_ids": [user_id]}}
        await self._post(tx, where, f"summon.desk.c{where.conversation.id}.s{where.conversation.seq}.assigned",
                         self.service_user, content, "line", None)

    async def _draft(self, tx: Tx, where: Where, draft: Message) -> None:
        """The draft as its bot's notice, with ✅ and 🗑 under it for the staff to press."""
        bot = self._registry().get(draft.bot) if draft.bot else None
        note = self._words("staff_draft", bot=bot.name if bot else draft.sender_name or "")
        text = f"{note}\n\n{draft.content}" if note else draft.content
        txn = message_txn(draft.id)
        puppet = self._puppet(draft.bot)
        if not await self._post(tx, where, txn, puppet, answer_content(text, thread_root=None, reply_to=None,
                                                                       mention=None), "draft", draft.id):
            return
        for n, key in enumerate((SEND, DISCARD)):
            await tx.of(OutboxTables).enqueue(txn_id=message_txn(draft.id, f".r{n}"), room_id=self.room_id, sender=puppet,
                                    event_type="m.reaction", of_txn=txn,
                                    content={"m.relates_to": {"rel_type": "m.annotation", "event_id": None, "key": key}})

    async def _settled(self, tx: Tx, where: Where, draft: Message) -> None:
        """The draft's notice says what became of it, and by whom."""
        by = str(draft.content_attributes.get("settled_by") or "")
        key = {"sent": "staff_sent", "edited": "staff_edited", "discarded": "staff_discarded"}[draft.draft or ""]
        words = self._words(key, name=by)
        if not words or await tx.of(DeskStaffTables).of_message(draft.id) is None:
            return
        content = answer_content(f"{words}\n\n{draft.content}", thread_root=None, reply_to=None, mention=None)
        await tx.of(OutboxTables).enqueue(txn_id=message_txn(draft.id, ".settled"), room_id=self.room_id,
                                sender=self._puppet(draft.bot), event_type="m.room.message", content=content,
                                of_txn=message_txn(draft.id))

    async def _thread(self, tx: Tx, where: Where) -> str:
        txn = thread_txn(where.conversation.id)
        if await tx.of(DeskStaffTables).remember(txn, where.conversation.id, None, "thread"):
            words = self._words("staff_thread", id=where.conversation.id, contact=where.contact.name or
                                self._words("contact") or f"#{where.contact.id}", inbox=where.inbox.title)
            content = {"msgtype": "m.notice", "body": words or f"desk:{where.conversation.id}", "m.mentions": {}}
            await tx.of(OutboxTables).enqueue(txn_id=txn, room_id=self.room_id, sender=self.service_user,
                                    event_type="m.room.message", content=content)
        return txn

    async def _post(self, tx: Tx, where: Where, txn: str, sender: str, content: dict[str, Any], kind: str,
                    message_id: int | None) -> bool:
        room = await tx.of(RoomTables).get(self.room_id)
        if room is not None and room.encrypted:
            # Never a plaintext message into an encrypted room (SPEC §4).
            log.error("the desk's staff room %s is encrypted: nothing is mirrored there", self.room_id,
                      extra={"room": self.room_id})
            return False
        root = await self._thread(tx, where)
        if not await tx.of(DeskStaffTables).remember(txn, where.conversation.id, message_id, kind):
            return False
        await tx.of(OutboxTables).enqueue(txn_id=txn, room_id=self.room_id, sender=sender, event_type="m.room.message",
                                content=in_thread(content), of_txn=root)
        return True

    # --- what the staff do there -------------------------------------------------------------------------

    async def _staff_name(self, tx: Tx, user_id: str) -> str:
        member = await tx.of(RoomTables).member(self.room_id, user_id)
        if member is not None and member.display_name:
            return member.display_name
        return user_id.split(":", 1)[0].lstrip("@")

    async def line(self, tx: Tx, line: Line, ours: Callable[[str], bool]) -> bool:
        """A line in a conversation's thread: the staff answering (or a reply to a draft: its edited version).
        False: not the desk's (another room, no thread of ours) — it is handled as any line."""
        if line.room_id != self.room_id or line.thread_root is None:
            return False
        root = await tx.of(DeskStaffTables).by_event(line.thread_root)
        if root is None or root.kind != "thread":
            return False
        if ours(line.sender) or line.is_notice or not line.text.strip():
            return True
        staff = await self._staff_name(tx, line.sender)
        try:
            where = await self.desk.where(tx, root.conversation_id)
            draft = await tx.of(DeskStaffTables).by_event(line.reply_to) if line.reply_to else None
            if draft is not None and draft.kind == "draft" and draft.message_id is not None:
                await self.desk.send_draft(tx, where, draft.message_id, staff=staff, content=line.text,
                                           matrix_event=line.event_id)
            else:
                await self.desk.staff_says(tx, where, line.text, staff=staff, matrix_event=line.event_id)
        except RequestRefused as exc:
            log.info("a staff line in desk conversation %s was not taken: %s", root.conversation_id, exc,
                     extra={"room": self.room_id})
        return True

    async def reaction(self, tx: Tx, room_id: str, event: Mapping[str, Any], ours: Callable[[str], bool]) -> bool:
        """✅ or 🗑 on a draft's notice. False: not a reaction on a draft of ours."""
        if room_id != self.room_id:
            return False
        content = event.get("content")
        relates = content.get("m.relates_to") if isinstance(content, Mapping) else None
        if not isinstance(relates, Mapping) or relates.get("rel_type") != "m.annotation":
            return False
        target, key, sender = relates.get("event_id"), relates.get("key"), event.get("sender")
        if not isinstance(target, str) or not isinstance(key, str) or not isinstance(sender, str):
            return False
        post = await tx.of(DeskStaffTables).by_event(target)
        if post is None or post.kind != "draft" or post.message_id is None:
            return False
        key = key.replace(VARIATION, "")
        if ours(sender) or key not in (SEND, DISCARD):
            return True
        staff = await self._staff_name(tx, sender)
        try:
            where = await self.desk.where(tx, post.conversation_id)
            if key == SEND:
                await self.desk.send_draft(tx, where, post.message_id, staff=staff, matrix_event=event.get("event_id"))
            else:
                await self.desk.discard_draft(tx, where, post.message_id, staff=staff)
        except RequestRefused as exc:
            log.info("a staff reaction on draft %s was not taken: %s", post.message_id, exc,
                     extra={"room": self.room_id})
        return True

    # --- the puppets that post there ----------------------------------------------------------------------

    async def invite_puppets(self, homeserver: Homeserver, slugs: Iterable[str]) -> None:
        """The desk's bots are invited (they accept: one of ours invites them) so their answers go by them."""
        for slug in slugs:
            puppet = self._puppet(slug)
            try:
                await homeserver.invite(self.service_user, self.room_id, puppet)
            except MatrixError as exc:
                # Already there (or invited): fine. Anything else is said, and the bot's lines will not send.
                log.info("inviting %s to the desk's staff room: %s", puppet, exc, extra={"room": self.room_id})
