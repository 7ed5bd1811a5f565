"""The desk's outgoing webhooks: ``message_created``, ``message_updated``, ``conversation_opened``,
``conversation_resolved`` (and ``conversation_status_changed``), in Chatwoot's envelopes, signed as Chatwoot
signs them:

- ``X-Chatwoot-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>.<raw body>")>``
- ``X-Chatwoot-Timestamp: <unix seconds>`` (inside the signed string; a receiver refuses an old one)
- ``X-Chatwoot-Delivery: <uuid>`` (the same on every retry of one delivery: a receiver dedupes on it)

Each event an inbox's webhook listens for is queued (``desk_deliveries``) in the commit that made the change,
so nothing is lost when a receiver is down: the sender posts it (5 s timeout, no redirects), and retries a
failure with growing waits until the attempts run out, recording every attempt's status and error. A
receiver that is the conversation's agent bot (``agent_bot: true``) and cannot be handed a contact's message
gives the conversation to people, as Chatwoot does.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Sequence

import aiohttp

from appservice.config import DeskWebhook
from appservice.desk import rules
from appservice.desk.changes import Where
from appservice.desk.desk import Desk, state_of
from appservice.desk.errors import RequestRefused
from appservice.desk.shapes import webhook_conversation, webhook_message
from appservice.desk.tables import Conversation, DeskTables, Message
from appservice.desk.webhook_tables import Delivery, DeskWebhookTables
from engine.clock import Clock
from engine.errors import StoreError
from engine.run.delivery import DeliveryLoop, Outcome, Refused, Sent
from engine.store import Store, Tx

log = logging.getLogger(__name__)

CHANNEL = "summon_desk_webhooks"
SIGNATURE = "X-Chatwoot-Signature"
TIMESTAMP = "X-Chatwoot-Timestamp"
DELIVERY = "X-Chatwoot-Delivery"
TIMEOUT_SECONDS = 5.0  # Chatwoot's own
# The waits between attempts: eight attempts over about two and a half hours, then it is kept as failed.
RETRY_AFTER: tuple[float, ...] = (5.0, 30.0, 120.0, 600.0, 1800.0, 3600.0, 3600.0)
CLAIM_BATCH = 50
HIDE_SECONDS = 30.0
IDLE_SECONDS = 60.0
ERROR_CHARS = 500


def sign(secret: str, timestamp: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def _extra(d: Delivery) -> dict[str, object]:
    return {"delivery": str(d.delivery), "event": d.event, "room": f"desk:{d.conversation_id}"}


def body_of(payload: dict[str, object]) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


class Webhooks:
    """A watcher of the desk's changes: each one an inbox's webhooks listen for, queued for them."""

    def __init__(self, desk: Desk, *, account_id: int) -> None:
        self.desk = desk
        self.account = {"id": account_id, "name": "summon"}

    def _hooks(self, where: Where, event: str) -> list[DeskWebhook]:
        inbox = self.desk.inboxes.get(where.inbox.id)
        return [hook for hook in (inbox.settings.webhooks if inbox else ()) if event in hook.events]

    async def _queue(self, tx: Tx, where: Where, event: str, body: str, message: Message | None) -> None:
        for hook in self._hooks(where, event):
            await tx.of(DeskWebhookTables).enqueue(inbox_id=where.inbox.id, url=hook.url, body=body, event=event,
                                           conversation_id=where.conversation.id,
                                           message_id=message.id if message else None)

    async def message(self, tx: Tx, where: Where, message: Message, *, created: bool) -> None:
        event = "message_created" if created else "message_updated"
        if not self._hooks(where, event):
            return
        payload = webhook_message(event, message, where.conversation, where.contact, where.inbox, self.account)
        await self._queue(tx, where, event, body_of(payload), message)

    async def status(self, tx: Tx, where: Where, before: Conversation) -> None:
        after = where.conversation
        events = ["conversation_status_changed"] if after.status != before.status else []
        if after.status != before.status and after.status == "open":
            events.append("conversation_opened")
        if after.status != before.status and after.status == "resolved":
            events.append("conversation_resolved")
        for event in events:
            if self._hooks(where, event):
                messages = await tx.of(DeskTables).last_messages(after.id, private=True, limit=20)
                payload = webhook_conversation(event, after, where.contact, where.inbox, messages, self.account)
                await self._queue(tx, where, event, body_of(payload), None)


class WebhookSender(DeliveryLoop[Delivery]):
    """Posts what is queued, woken by NOTIFY on insert, and otherwise when the next retry falls due: the one
    delivery loop (``engine/run/delivery.py``), this its sender."""

    def __init__(self, store: Store, desk: Desk, session: aiohttp.ClientSession, clock: Clock, *,
                 retry_after: Sequence[float] = RETRY_AFTER) -> None:
        super().__init__("desk webhooks", store.of(DeskWebhookTables), self, self._backoff, clock, listen=store.listen,
                         channel=CHANNEL, batch=CLAIM_BATCH, hide_seconds=HIDE_SECONDS, idle_seconds=IDLE_SECONDS)
        self.store = store
        self.desk = desk
        self.session = session
        self.retry_after = tuple(retry_after)

    def _backoff(self, attempts: int) -> float | None:
        return None if attempts > len(self.retry_after) else self.retry_after[attempts - 1]

    def _hook(self, d: Delivery) -> DeskWebhook | None:
        inbox = self.desk.inboxes.get(d.inbox_id)
        return next((h for h in (inbox.settings.webhooks if inbox else ()) if h.url == d.url), None)

    # --- the sender -------------------------------------------------------------------------------------

    async def send(self, d: Delivery) -> Outcome:
        hook = self._hook(d)
        if hook is None:
            log.error("desk webhook %s is no longer configured; delivery %s kept as failed", d.url, d.delivery,
                      extra=_extra(d))
            await self.store.of(DeskWebhookTables).failed(d.id, None, "the webhook is no longer configured")
            return None
        body = d.body.encode()
        timestamp = str(int(self.clock.now().timestamp()))
        headers = {"Content-Type": "application/json", SIGNATURE: sign(hook.secret, timestamp, body),
                   TIMESTAMP: timestamp, DELIVERY: str(d.delivery), "User-Agent": "summon-desk"}
        status: int | None = None
        try:
            async with self.session.post(hook.url, data=body, headers=headers, allow_redirects=False,
                                         timeout=aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)) as resp:
                status = resp.status
                if 200 <= resp.status < 300:
                    return Sent(resp.status)
                error = f"{resp.status} {(await resp.text())[:ERROR_CHARS]}".strip()
        except (aiohttp.ClientError, TimeoutError) as exc:
            error = f"unreachable: {type(exc).__name__}: {exc}"[:ERROR_CHARS]
        return Refused(error, retryable=True, detail=(status, hook.agent_bot))

    async def done(self, d: Delivery, sent: Sent) -> None:
        await self.store.of(DeskWebhookTables).delivered(d.id, int(sent.detail))
        log.info("desk webhook %s delivered (%s)", d.event, sent.detail, extra=_extra(d))

    async def retry(self, d: Delivery, after: float, refused: Refused) -> None:
        status, agent_bot = refused.detail
        log.warning("desk webhook %s to %s failed (%s); retrying in %.0fs", d.event, d.url, refused.error, after,
                    extra=_extra(d))
        await self.store.of(DeskWebhookTables).retry(d.id, status, refused.error, after)
        await self._unanswered(d, agent_bot)

    async def failed(self, d: Delivery, refused: Refused, *, gave_up: bool) -> None:
        status, agent_bot = refused.detail
        log.error("desk webhook %s to %s failed for good after %d attempts: %s", d.event, d.url, d.attempts,
                  refused.error, extra=_extra(d))
        await self.store.of(DeskWebhookTables).failed(d.id, status, refused.error)
        await self._unanswered(d, agent_bot)

    async def _unanswered(self, d: Delivery, agent_bot: bool) -> None:
        if agent_bot and d.event == "message_created" and d.message_id is not None:
            await self._bot_unreachable(d)

    async def _bot_unreachable(self, d: Delivery) -> None:
        """The contact's message could not be handed to the bot that answers them: people take it, and the
        message is marked failed, as Chatwoot does."""
        assert d.message_id is not None
        try:
            async with self.store.transaction("desk_webhook_handoff") as tx:
                where = await self.desk.where(tx, d.conversation_id)
                message = await tx.of(DeskTables).message(d.message_id)
                if message is None or message.message_type != "incoming" or where.conversation.status != "pending":
                    return
                failed = await tx.of(DeskTables).message_failed(message.id)
                if failed is not None:
                    await self.desk.changes.message(tx, where, failed, created=False)
                await self.desk.become(tx, where, rules.bot_failed(state_of(where.conversation)), cause="failure")
        except (RequestRefused, StoreError) as exc:
            log.warning("desk: could not hand conversation %s to people after its bot was unreachable: %s",
                        d.conversation_id, exc)
            return
        log.warning("desk: the agent bot at %s could not be handed message %s; conversation %s goes to people",
                    d.url, d.message_id, d.conversation_id)
