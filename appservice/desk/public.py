"""The desk's public API, the widget's side (Chatwoot's ``/public/api/v1/inboxes/{inbox_identifier}/…``).

A contact is made in an inbox and handed its ``source_id`` and a signed token (``pubsub_token``, as
Chatwoot names the contact's realtime token). Every other call names the contact by ``source_id`` and carries
the token (``Authorization: Bearer <token>``; the event stream, which a browser's EventSource opens without
headers, also takes ``?token=``). A token forged, expired, revoked or of another inbox is 401; a conversation that is
not the caller's is 404 — exactly as one that does not exist, so nothing can be probed.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any
from uuid import UUID

from aiohttp import web

from appservice.desk import stream, tokens
from appservice.desk.arrivals import Arrivals
from appservice.desk.commands import DeskCommands
from appservice.desk.desk import Desk, InboxConfig
from appservice.desk.errors import RequestRefused
from appservice.desk.shapes import contact_json, conversation_json, message_json
from appservice.desk.tables import Contact, DeskTables
from appservice.desk.web import body_of, int_of, text_field
from engine.clock import Clock
from engine.content import Registry
from engine.store import Store

log = logging.getLogger(__name__)

PREFIX = "/public/api/v1/inboxes/{inbox}"
CONTACT = PREFIX + "/contacts/{contact}"
CONVERSATION = CONTACT + "/conversations/{conversation_id}"
CORS = "cors_headers"  # set by the desk's CORS middleware for a site that embeds the widget
DAY = 86_400.0
_NUMBER = re.compile(r"[0-9]{1,18}")  # a bigint's worth of ASCII digits; anything longer is no id of ours


class PublicAPI:
    def __init__(self, store: Store, desk: Desk, streams: stream.Streams, registry: Callable[[], Registry],
                 clock: Clock, *, secret: str, token_days: float,
                 arrivals: Arrivals, old_secrets: tuple[str, ...] = (), token_max_days: float = 90.0) -> None:
        self.store = store
        self.desk = desk
        self.streams = streams
        self._registry = registry
        self.clock = clock
        self.secret = secret
        self.token_days = token_days
        self.commands = DeskCommands(desk, registry)
        self.arrivals = arrivals
        self.secrets = (secret, *old_secrets)  # the first signs; every one verifies
        self.token_max_days = token_max_days

    def routes(self, app: web.Application) -> None:
        r = app.router
        r.add_get(PREFIX, self.inbox)
        r.add_post(PREFIX + "/contacts", self.create_contact)
        r.add_get(CONTACT, self.show_contact)
        r.add_post(CONTACT + "/token", self.renew_token)
        r.add_get(CONTACT + "/conversations", self.list_conversations)
        r.add_post(CONTACT + "/conversations", self.create_conversation)
        r.add_get(CONVERSATION, self.show_conversation)
        r.add_get(CONVERSATION + "/messages", self.list_messages)
        r.add_post(CONVERSATION + "/messages", self.post_message)
        r.add_patch(CONVERSATION + "/messages/{message_id}", self.press)
        r.add_post(CONVERSATION + "/messages/{message_id}/feedback", self.feedback)
        r.add_post(CONVERSATION + "/toggle_status", self.toggle_status)
        r.add_get(CONVERSATION + "/events", self.events)
        r.add_get(CONTACT + "/commands", self.list_commands)
        r.add_post(CONVERSATION + "/commands/{name}", self.run_command)

    # --- who is calling -----------------------------------------------------------------------------------

    def _inbox(self, request: web.Request) -> InboxConfig:
        inbox = self.desk.inbox(request.match_info["inbox"])
        if inbox is None:
            raise RequestRefused(404, "no such inbox")
        return inbox

    def _token(self, inbox: InboxConfig, contact_id: int, since: int | None = None) -> dict[str, Any]:
        """A token for the contact's chain begun at ``since`` (now: a new chain), holding ``token_days`` but
        never past ``token_max_days`` from the chain's start."""
        now = self.clock.now().timestamp()
        since = int(now) if since is None else since
        expires = int(min(now + self.token_days * DAY, since + self.token_max_days * DAY))
        return {"pubsub_token": tokens.mint(self.secret, inbox.row.id, contact_id, since, expires),
                "token_expires_at": expires}

    async def _contact(self, request: web.Request, *, query_token: bool = False) -> tuple[InboxConfig, Contact]:
        inbox, contact, _ = await self._caller(request, query_token=query_token)
        return inbox, contact

    async def _caller(self, request: web.Request, *,
                      query_token: bool = False) -> tuple[InboxConfig, Contact, tokens.ContactToken]:
        """The inbox, the contact the token names, and the token — checked against the contact's revocation."""
        inbox = self._inbox(request)
        given = request.headers.get("Authorization", "")
        token = given[7:] if given[:7].lower() == "bearer " else request.headers.get("X-Contact-Token", "")
        if not token and query_token:
            token = request.query.get("token", "")
        now = self.clock.now().timestamp()
        verified = tokens.verify(self.secrets, token, now) if token else None
        if verified is None or verified.inbox_id != inbox.row.id or now >= verified.since + self.token_max_days * DAY:
            log.info("desk: a call to %s with a missing, forged or expired token", request.path)
            raise RequestRefused(401, "a valid contact token is needed")
        contact = await self.store.of(DeskTables).contact(verified.contact_id)
        try:
            named = UUID(request.match_info["contact"])
        except ValueError:
            named = None
        if contact is None or named != contact.source_id:
            raise RequestRefused(404, "no such contact")
        revoked = contact.tokens_valid_after
        if revoked is not None and verified.since <= revoked.timestamp():
            log.info("desk: a call to %s with a revoked token of contact %s", request.path, contact.id)
            raise RequestRefused(401, "a valid contact token is needed")
        return inbox, contact, verified

    def _account(self, inbox: InboxConfig, body: dict[str, Any], identifier: str) -> str:
        """``identifier``, when the site signed it for this inbox (``identifier_token``, before its expiry; the
        static ``identifier_hash`` only where the inbox keeps that compatibility path); else 401."""
        secret = inbox.settings.identity_secret
        signed = text_field(body, "identifier_token", limit=128)
        static = text_field(body, "identifier_hash", limit=128)
        now = self.clock.now().timestamp()
        if secret is not None and signed is not None and tokens.identity_token_holds(
                secret, inbox.row.identifier, identifier, signed, now):
            return identifier
        if secret is not None and static is not None and inbox.settings.identity_static_hash and \
                tokens.identity_holds(secret, identifier, static):
            log.warning("desk: account %r signed in to inbox %s by its static identifier_hash (the compatibility "
                        "path identity_static_hash; have the site send identifier_token)", identifier, inbox.row.name)
            return identifier
        log.warning("desk: a contact claimed account %r without the site's signature", identifier)
        raise RequestRefused(401, "identifier_token does not hold for the identifier (forged, expired or of "
                                  "another inbox)")

    # --- the inbox and contacts --------------------------------------------------------------------------

    async def inbox(self, request: web.Request) -> web.Response:
        """What a widget needs before anyone writes: the inbox's name, the site's words, and whether an assistant
        is there (one of our bots answers or offers itself here, and a provider can answer: else a person
        answers, and the widget shows no assistant)."""
        inbox = self._inbox(request)
        words = dict(self._registry().strings.section("desk"))
        assistant = await self.desk.has_assistant(self.store, inbox.row.id)
        return web.json_response({"identifier": inbox.row.identifier, "name": inbox.row.title,
                                  "identity_validation": inbox.settings.identity_secret is not None, "words": words,
                                  "assistant": assistant})

    async def create_contact(self, request: web.Request) -> web.Response:
        inbox = self._inbox(request)
        body = await body_of(request)
        name = text_field(body, "name")
        email = text_field(body, "email")
        identifier = text_field(body, "identifier", limit=255)
        account = None if identifier is None else self._account(inbox, body, identifier)
        origin = self.arrivals.origin(request)
        async with self.store.transaction("desk_create_contact") as tx:
            await self.arrivals.contact(tx, origin, inbox)
            contact = await tx.of(DeskTables).insert_contact(inbox.row.id, user_id=account, name=name, email=email,
                                                   verified=account is not None)
            await tx.of(DeskTables).contact_made_from(contact.id, origin)
        log.info("desk contact %s made in inbox %s", contact.id, inbox.row.name)
        return web.json_response({**contact_json(contact), **self._token(inbox, contact.id)})

    async def show_contact(self, request: web.Request) -> web.Response:
        _, contact = await self._contact(request)
        return web.json_response(contact_json(contact))

    async def renew_token(self, request: web.Request) -> web.Response:
        """A contact whose token still holds gets a fresh one (a widget renews before it runs out), of the same
        chain: no renewal reaches past ``token_max_days`` from the chain's start."""
        inbox, contact, token = await self._caller(request)
        return web.json_response({**contact_json(contact), **self._token(inbox, contact.id, token.since)})

    # --- conversations ----------------------------------------------------------------------------------

    async def list_conversations(self, request: web.Request) -> web.Response:
        _, contact = await self._contact(request)
        conversations = await self.store.of(DeskTables).conversations_of_contact(contact.id)
        return web.json_response([conversation_json(c, contact, []) for c in conversations])

    async def create_conversation(self, request: web.Request) -> web.Response:
        _, contact = await self._contact(request)
        body = await body_of(request)
        origin = self.arrivals.origin(request)
        async with self.store.transaction("desk_create_conversation") as tx:
            await self.arrivals.conversation(tx, origin, contact.id)
            where = await self.desk.start(tx, contact)
            await tx.of(DeskTables).conversation_made_from(where.conversation.id, origin)
            first = text_field(body, "content", limit=20_000)
            if first:
                await self.desk.write(tx, where, first, echo_id=text_field(body, "echo_id"))
            where = await self.desk.where(tx, where.conversation.id)
            messages = await tx.of(DeskTables).messages(where.conversation.id)
        return web.json_response(conversation_json(where.conversation, contact, messages))

    async def show_conversation(self, request: web.Request) -> web.Response:
        _, contact = await self._contact(request)
        async with self.store.transaction("desk_show_conversation") as tx:
            where = await self.desk.contacts_conversation(tx, contact, int_of(request, "conversation_id"), lock=False)
            messages = await tx.of(DeskTables).messages(where.conversation.id, limit=500)
        return web.json_response(conversation_json(where.conversation, contact, messages))

    async def list_messages(self, request: web.Request) -> web.Response:
        _, contact = await self._contact(request)
        after = request.query.get("after", "0")
        if not _NUMBER.fullmatch(after):
            raise RequestRefused(422, "after is a message id (at most 18 digits)")
        async with self.store.transaction("desk_list_messages") as tx:
            where = await self.desk.contacts_conversation(tx, contact, int_of(request, "conversation_id"), lock=False)
            messages = await tx.of(DeskTables).messages(where.conversation.id, after=int(after), limit=500)
        return web.json_response([message_json(m, contact.id) for m in messages])

    async def post_message(self, request: web.Request) -> web.Response:
        _, contact = await self._contact(request)
        body = await body_of(request)
        content = text_field(body, "content", required=True, limit=20_000)
        assert content is not None
        async with self.store.transaction("desk_post_message") as tx:
            where = await self.desk.contacts_conversation(tx, contact, int_of(request, "conversation_id"))
            message = await self.desk.write(tx, where, content, echo_id=text_field(body, "echo_id"))
        return web.json_response(message_json(message, contact.id))

    async def press(self, request: web.Request) -> web.Response:
        """Chatwoot's ``submitted_values``: the choice pressed (``{"value": …}``, or a list holding one)."""
        _, contact = await self._contact(request)
        body = await body_of(request)
        submitted = body.get("submitted_values")
        if isinstance(submitted, list) and len(submitted) == 1:
            submitted = submitted[0]
        value = submitted.get("value") if isinstance(submitted, dict) else None
        if not isinstance(value, str | int) or isinstance(value, bool):
            raise RequestRefused(422, 'submitted_values names the choice pressed: {"value": "…"}')
        async with self.store.transaction("desk_press") as tx:
            where = await self.desk.contacts_conversation(tx, contact, int_of(request, "conversation_id"))
            message = await self.desk.press(tx, where, int_of(request, "message_id"), str(value))
        if message is None:  # refused after the commit: the press that came too late is recorded too
            raise RequestRefused(409, self.desk.words("gone"))
        return web.json_response(message_json(message, contact.id))

    async def feedback(self, request: web.Request) -> web.Response:
        """Did that help? ``{"helped": true}`` (yes, thanks) or ``false`` (talk to a person)."""
        _, contact = await self._contact(request)
        body = await body_of(request)
        helped = body.get("helped")
        if not isinstance(helped, bool):
            raise RequestRefused(422, "helped is true (it helped) or false (talk to a person)")
        async with self.store.transaction("desk_feedback") as tx:
            where = await self.desk.contacts_conversation(tx, contact, int_of(request, "conversation_id"))
            where = await self.desk.feedback(tx, where, int_of(request, "message_id"), helped)
        return web.json_response(conversation_json(where.conversation, contact, []))

    async def toggle_status(self, request: web.Request) -> web.Response:
        """The contact's own say: ``open`` is "talk to a person"; ``resolved`` is "that's everything"."""
        _, contact = await self._contact(request)
        body = await body_of(request)
        status = body.get("status")
        if status not in ("open", "resolved"):
            raise RequestRefused(422, "status is open (talk to a person) or resolved (that is everything)")
        async with self.store.transaction("desk_contact_toggle") as tx:
            where = await self.desk.contacts_conversation(tx, contact, int_of(request, "conversation_id"))
            if status == "open":
                where = await self.desk.talk_to_a_person(tx, where)
            else:
                where = await self.desk.resolve(tx, where, "confirmed")
        return web.json_response({"meta": {}, "payload": {"success": True, "current_status": where.conversation.status,
                                                          "conversation_id": where.conversation.id}})

    async def events(self, request: web.Request) -> web.StreamResponse:
        """The conversation's stream, until the token expires or is revoked (429 past the streams' caps)."""
        _, contact, token = await self._caller(request, query_token=True)
        async with self.store.transaction("desk_open_stream") as tx:
            where = await self.desk.contacts_conversation(tx, contact, int_of(request, "conversation_id"), lock=False)
        return await stream.serve(self.streams, request, where.conversation.id, where.conversation.seq,
                                  contact_id=contact.id, since=token.since, until=token.expires,
                                  headers=request.get(CORS))

    # --- commands ---------------------------------------------------------------------------------------

    async def list_commands(self, request: web.Request) -> web.Response:
        """The commands this contact may run here, with their fields' kinds (the widget's controls)."""
        _, contact = await self._contact(request)
        runnable = await self.commands.runnable(self.store, contact)
        return web.json_response({"payload": [self.commands.shape(command) for command, _ in runnable]})

    async def run_command(self, request: web.Request) -> web.Response:
        """``{"args": {"since": "2d", "length": "short", "urgent": true}}``: each field by name, as text, a
        number or a boolean; the contact's line is the answer (the bot's arrives on the stream)."""
        _, contact = await self._contact(request)
        body = await body_of(request)
        given = body.get("args", {})
        if not isinstance(given, dict) or not all(isinstance(v, str | int | float) for v in given.values()):
            raise RequestRefused(422, 'args names each field\'s value: {"since": "2d", "urgent": true}')
        values = {str(k): _as_text(v) for k, v in given.items()}
        async with self.store.transaction("desk_run_command") as tx:
            where = await self.desk.contacts_conversation(tx, contact, int_of(request, "conversation_id"))
            message = await self.commands.run(tx, where, request.match_info["name"].lower(), values)
        return web.json_response(message_json(message, contact.id))


def _as_text(value: str | int | float) -> str:
    """A field's value as the engine's typing reads it (a boolean as ``true``/``false``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
