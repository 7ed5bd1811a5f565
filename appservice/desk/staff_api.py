"""The desk's staff API (Chatwoot's application API, ``/api/v1/accounts/{account_id}/…``).

The key (header ``api_access_token``, as Chatwoot's) is an inbox's ``staff_key``: it reaches the conversations
of every inbox that has that key, and no other's (another inbox's conversation is 404). Staff list and read
conversations (private notes included), answer (``outgoing``) or note (``private``), ``toggle_status`` (``pending`` gives it to the
bot, ``open`` to people, ``resolved``), assign, send or discard a bot's draft, revoke a contact's tokens, and
read the outcome figures (``reports/outcomes``; the staff page ``/desk/staff/report`` shows them).
"""

from __future__ import annotations

import hmac
import logging
from datetime import timedelta
from typing import Any

from aiohttp import web

from appservice.desk import stream
from appservice.desk.changes import Where
from appservice.desk.desk import Desk, InboxConfig
from appservice.desk.errors import RequestRefused
from appservice.desk.outcomes import DURABLE_DAYS
from appservice.desk.report import DEFAULT_DAYS, BadWindow, moment, outcome_report, report_json
from appservice.desk.shapes import conversation_json, message_json
from appservice.desk.tables import DeskTables
from appservice.desk.web import body_of, int_of, text_field
from engine.clock import Clock
from engine.store import Store, Tx

log = logging.getLogger(__name__)

PREFIX = "/api/v1/accounts/{account_id}"
CONVERSATION = PREFIX + "/conversations/{conversation_id}"
KEY_HEADER = "api_access_token"
LIST_LIMIT = 100


class StaffAPI:
    def __init__(self, store: Store, desk: Desk, streams: stream.Streams, clock: Clock, *, account_id: int) -> None:
        self.store = store
        self.desk = desk
        self.streams = streams
        self.clock = clock
        self.account_id = account_id

    def routes(self, app: web.Application) -> None:
        r = app.router
        r.add_get(PREFIX + "/conversations", self.list_conversations)
        r.add_get(CONVERSATION, self.show_conversation)
        r.add_get(CONVERSATION + "/messages", self.list_messages)
        r.add_post(CONVERSATION + "/messages", self.post_message)
        r.add_post(CONVERSATION + "/toggle_status", self.toggle_status)
        r.add_post(CONVERSATION + "/assignments", self.assign)
        r.add_post(CONVERSATION + "/messages/{message_id}/send_draft", self.send_draft)
        r.add_post(CONVERSATION + "/messages/{message_id}/discard_draft", self.discard_draft)
        r.add_get(CONVERSATION + "/events", self.events)
        r.add_post(PREFIX + "/contacts/{contact_id}/revoke_tokens", self.revoke_tokens)
        r.add_get(PREFIX + "/reports/outcomes", self.outcomes)

    def _reach(self, request: web.Request) -> dict[int, InboxConfig]:
        """The inboxes whose staff key the request carries (every key compared, in constant time)."""
        if request.match_info["account_id"] != str(self.account_id):
            raise RequestRefused(404, "no such account")
        given = request.headers.get(KEY_HEADER, "").encode()
        found = {inbox.row.id: inbox for inbox in self.desk.inboxes.values()
                 if hmac.compare_digest(given, inbox.settings.staff_key.encode())}
        if not found:
            log.info("desk: a staff call to %s with a missing or unknown key", request.path)
            raise RequestRefused(401, f"a staff key is needed (header {KEY_HEADER})")
        return found

    async def _conversation(self, tx: Tx, request: web.Request, *, lock: bool = True) -> Where:
        reach = self._reach(request)
        where = await self.desk.where(tx, int_of(request, "conversation_id"), lock=lock)
        if where.inbox.id not in reach:
            raise RequestRefused(404, "no such conversation")
        return where

    async def list_conversations(self, request: web.Request) -> web.Response:
        reach = self._reach(request)
        status = request.query.get("status", "open")
        if status not in ("open", "pending", "resolved", "all"):
            raise RequestRefused(422, "status is open, pending, resolved or all")
        async with self.store.transaction("desk_staff_list") as tx:
            conversations = [c for inbox_id in sorted(reach) for c in await tx.of(DeskTables).conversations_of_inbox(
                inbox_id, None if status == "all" else status, LIST_LIMIT)]
            conversations.sort(key=lambda c: (c.updated_at, c.id), reverse=True)
            payload = []
            for c in conversations[:LIST_LIMIT]:
                contact = await tx.of(DeskTables).contact(c.contact_id)
                assert contact is not None
                payload.append(conversation_json(c, contact, await tx.of(DeskTables).last_messages(c.id, private=True, limit=1)))
        unassigned = sum(1 for c in payload if c["meta"]["assignee"] is None)
        return web.json_response({"data": {"meta": {"all_count": len(payload), "unassigned_count": unassigned},
                                           "payload": payload}})

    async def show_conversation(self, request: web.Request) -> web.Response:
        async with self.store.transaction("desk_staff_show") as tx:
            where = await self._conversation(tx, request, lock=False)
            messages = await tx.of(DeskTables).messages(where.conversation.id, private=True, limit=500)
        return web.json_response(conversation_json(where.conversation, where.contact, messages))

    async def list_messages(self, request: web.Request) -> web.Response:
        async with self.store.transaction("desk_staff_messages") as tx:
            where = await self._conversation(tx, request, lock=False)
            messages = await tx.of(DeskTables).messages(where.conversation.id, private=True, limit=500)
        shown = conversation_json(where.conversation, where.contact, [])
        return web.json_response({"meta": {"contact": shown["contact"], "assignee": shown["meta"]["assignee"]},
                                  "payload": [message_json(m, where.contact.id) for m in messages]})

    async def post_message(self, request: web.Request) -> web.Response:
        """``{"content", "message_type": "outgoing", "private"}`` (Chatwoot's create-message body)."""
        body = await body_of(request)
        content = text_field(body, "content", required=True, limit=20_000)
        assert content is not None
        if body.get("message_type", "outgoing") != "outgoing":
            raise RequestRefused(422, "the staff write outgoing messages (private: true for a note)")
        private = body.get("private", False)
        if not isinstance(private, bool):
            raise RequestRefused(422, "private is true or false")
        async with self.store.transaction("desk_staff_message") as tx:
            where = await self._conversation(tx, request)
            message = await self.desk.staff_says(tx, where, content, staff=self._staff(body, where), private=private)
        return web.json_response(message_json(message, where.contact.id))

    async def toggle_status(self, request: web.Request) -> web.Response:
        body = await body_of(request)
        status = body.get("status")
        if status not in ("open", "pending", "resolved"):
            raise RequestRefused(422, "status is open (people), pending (the bot) or resolved")
        async with self.store.transaction("desk_staff_toggle") as tx:
            where = await self._conversation(tx, request)
            where = await self.desk.toggle(tx, where, status)
        return web.json_response({"meta": {}, "payload": {"success": True, "current_status": where.conversation.status,
                                                          "conversation_id": where.conversation.id}})

    async def assign(self, request: web.Request) -> web.Response:
        """``{"assignee_id": "<staff>"}`` (null unassigns): assigning a person silences the bot."""
        body = await body_of(request)
        assignee = body.get("assignee_id")
        if assignee is not None and (not isinstance(assignee, str | int) or isinstance(assignee, bool) or
                                     not str(assignee).strip() or len(str(assignee)) > 200):
            raise RequestRefused(422, "assignee_id names the staff member (null unassigns)")
        async with self.store.transaction("desk_staff_assign") as tx:
            where = await self._conversation(tx, request)
            where = await self.desk.assign(tx, where, None if assignee is None else str(assignee).strip())
        return web.json_response(conversation_json(where.conversation, where.contact, []))

    async def send_draft(self, request: web.Request) -> web.Response:
        """A bot's draft sent to the contact: as it is, or ``{"content": …}`` in the staff member's own words."""
        body = await body_of(request)
        async with self.store.transaction("desk_staff_send_draft") as tx:
            where = await self._conversation(tx, request)
            message = await self.desk.send_draft(tx, where, int_of(request, "message_id"), staff=self._staff(body, where),
                                                 content=text_field(body, "content", limit=20_000))
        return web.json_response(message_json(message, where.contact.id))

    async def discard_draft(self, request: web.Request) -> web.Response:
        body = await body_of(request)
        async with self.store.transaction("desk_staff_discard_draft") as tx:
            where = await self._conversation(tx, request)
            message = await self.desk.discard_draft(tx, where, int_of(request, "message_id"),
                                                    staff=self._staff(body, where))
        return web.json_response(message_json(message, where.contact.id))

    async def events(self, request: web.Request) -> web.StreamResponse:
        """The staff's view of a conversation's stream: the private events too."""
        async with self.store.transaction("desk_staff_stream") as tx:
            where = await self._conversation(tx, request, lock=False)
        return await stream.serve(self.streams, request, where.conversation.id, where.conversation.seq, private=True)

    async def revoke_tokens(self, request: web.Request) -> web.Response:
        """Every token the contact holds is refused from now, on every call and by the streams already open
        (a contact of an inbox the key does not reach is 404)."""
        reach = self._reach(request)
        contact_id = int_of(request, "contact_id")
        if not await self.store.of(DeskTables).revoke_tokens(contact_id, sorted(reach)):
            raise RequestRefused(404, "no such contact")
        log.info("desk: the tokens of contact %s revoked by the staff", contact_id)
        return web.json_response({"meta": {}, "payload": {"success": True, "contact_id": contact_id}})

    async def outcomes(self, request: web.Request) -> web.Response:
        """The outcome figures (docs/desk.md) of the inboxes the key reaches — or of ``inbox`` (its name), one of
        them — over the conversations started in ``since`` … ``until`` (``7d``, ``12h``, a date; default the
        last 30 days), ``durable_days`` (default 7)."""
        reach = self._reach(request)
        wanted = request.query.get("inbox")
        inboxes = sorted(reach) if wanted is None else [i for i, inbox in reach.items() if inbox.row.name == wanted]
        if not inboxes:
            raise RequestRefused(404, "no such inbox")
        now = self.clock.now()
        try:
            durable_days = float(request.query.get("durable_days", DURABLE_DAYS))
            made = await outcome_report(
                self.store, inboxes, now=now, durable_days=durable_days,
                since=moment(request.query.get("since"), now=now, default=now - timedelta(days=DEFAULT_DAYS)),
                until=moment(request.query.get("until"), now=now, default=now))
        except (BadWindow, ValueError) as exc:
            raise RequestRefused(422, str(exc)) from None
        return web.json_response(report_json(made, {i: reach[i].row.name for i in inboxes}))

    @staticmethod
    def _staff(body: dict[str, Any], where: Where) -> str:
        """Who on the staff writes: ``sender_name`` when the caller says, else the inbox's own name."""
        return text_field(body, "sender_name") or where.inbox.title
