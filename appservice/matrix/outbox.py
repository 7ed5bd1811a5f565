"""Every message to Matrix goes through the ``outbox`` table under a stable transaction id.

The sender takes due rows, PUTs them as the row's sender (a puppet), and records the event id. A 429
waits what the homeserver asked (``retry_after_ms``); a 5xx or an unreachable homeserver backs off and
retries; anything else is refused for good and kept with its reason. A retry after a crash reuses the
same transaction id, so the homeserver answers with the same event rather than posting twice.

The send itself is a plain PUT rather than mautrix's ``send_message_event``: mautrix drops the body
of a 429, so ``retry_after_ms`` could not be honoured through it.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import quote

import aiohttp

from appservice.matrix.asking.voice import SPEAK, Speaking
from appservice.matrix.errors import MatrixError
from appservice.matrix.tables.outbox import OutboxTables, Outgoing
from appservice.matrix.undelivered import Undelivered, is_outcome
from engine.clock import Clock
from engine.errors import StoreError
from engine.run.delivery import DeliveryLoop, Outcome, Refused, Sent
from engine.store import Store

log = logging.getLogger(__name__)

CLAIM_BATCH = 100
HIDE_SECONDS = 30.0
MAX_BACKOFF = 10.0  # our own homeserver: when it comes back, answers should follow within seconds
# A message still refused as "try again" after a day of it (at the cap, a try every 10 s) is given up on, and
# its run says so: a homeserver down that long is an outage somebody must hear about, not a queue.
GIVE_UP_ATTEMPTS = 24 * 60 * 6
TXN_MARKER = "org.summon.txn"
RELATED_WAIT = 0.2  # an edit or redaction whose message is not sent yet waits this long
# Relations that only point at the earlier message (a thread's reply points at its root, the desk's staff room).
POINTING = frozenset({"m.annotation", "m.reference", "m.thread"})
CHANNEL = "summon_outbox"


def backoff(attempts: int) -> float | None:
    """The wait after a failed attempt (``attempts`` so far), or None: that was the last."""
    if attempts >= GIVE_UP_ATTEMPTS:
        return None
    return float(min(MAX_BACKOFF, 0.5 * 2 ** max(0, attempts - 1)))


def _extra(row: Outgoing) -> dict[str, object]:
    return {"room": row.room_id, "run": row.run_id, "txn": row.txn_id}


class MatrixSender:
    """PUT one event as an appservice user, raising ``MatrixError`` with what the homeserver said."""

    def __init__(self, session: aiohttp.ClientSession, homeserver: str, as_token: str) -> None:
        self._session = session
        self._base = homeserver.rstrip("/")
        self._headers = {"Authorization": f"Bearer {as_token}"}

    async def send(self, room_id: str, event_type: str, content: dict[str, Any], txn_id: str, sender: str) -> str:
        # The txn id rides in the content too: Synapse forgets an appservice's txn ids when it restarts,
        # so after a send whose outcome is unknown, ``already_sent`` looks for this marker instead.
        return await self._put(f"/rooms/{quote(room_id, safe='')}/send/{quote(event_type, safe='')}/"
                               f"{quote(txn_id, safe='')}", {**content, TXN_MARKER: txn_id}, sender)

    async def already_sent(self, room_id: str, txn_id: str, sender: str) -> str | None:
        """The event id of a message ``sender`` already posted under ``txn_id`` (among its latest), or None."""
        url = f"{self._base}/_matrix/client/v3/rooms/{quote(room_id, safe='')}/messages"
        params = {"dir": "b", "limit": "50", "user_id": sender, "filter": json.dumps({"senders": [sender]})}
        try:
            async with self._session.get(url, params=params, headers=self._headers,
                                         timeout=aiohttp.ClientTimeout(total=30)) as resp:
                if resp.status == 429 or resp.status >= 500:
                    raise MatrixError(f"{resp.status} reading recent messages", status=resp.status)
                if resp.status != 200:
                    # Cannot look (e.g. the puppet may not read the room): send; a duplicate beats a loss.
                    log.warning("outbox: could not read %s's recent messages (%s); sending again",
                                sender, resp.status, extra={"room": room_id, "txn": txn_id})
                    return None
                body = await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise MatrixError(f"homeserver unreachable: {exc!r}") from exc
        for event in body.get("chunk", []) if isinstance(body, dict) else []:
            if isinstance(event, dict) and (event.get("content") or {}).get(TXN_MARKER) == txn_id:
                return str(event.get("event_id"))
        return None

    async def redact(self, room_id: str, event_id: str, txn_id: str, sender: str, reason: str | None = None) -> str:
        body = {"reason": reason} if reason else {}
        return await self._put(f"/rooms/{quote(room_id, safe='')}/redact/{quote(event_id, safe='')}/"
                               f"{quote(txn_id, safe='')}", body, sender)

    async def _put(self, path: str, content: dict[str, Any], sender: str) -> str:
        url = f"{self._base}/_matrix/client/v3{path}"
        try:
            async with self._session.put(
                url, json=content, params={"user_id": sender}, headers=self._headers,
                timeout=aiohttp.ClientTimeout(total=30),
            ) as resp:
                body: dict[str, Any]
                try:
                    body = await resp.json(content_type=None)
                except (ValueError, aiohttp.ContentTypeError):
                    body = {}
                if not isinstance(body, dict):
                    body = {}
                if resp.status == 200 and isinstance(body.get("event_id"), str):
                    return str(body["event_id"])
                retry_ms = body.get("retry_after_ms")
                if retry_ms is None and resp.headers.get("Retry-After", "").isdecimal():
                    retry_ms = int(resp.headers["Retry-After"]) * 1000
                raise MatrixError(
                    f"{resp.status} {body.get('errcode', '')}: {body.get('error', '')}".strip(),
                    status=resp.status, errcode=body.get("errcode"),
                    retry_after_ms=retry_ms if isinstance(retry_ms, int) else None,
                )
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise MatrixError(f"homeserver unreachable: {exc!r}") from exc


def edit_of(content: dict[str, Any], event_id: str) -> dict[str, Any]:
    """An edit replacing ``event_id`` with ``content``: the full new content under ``m.new_content``, and
    an empty top-level ``m.mentions`` so an edit pings nobody again (MSC3952)."""
    new = {k: v for k, v in content.items() if k != "m.relates_to"}
    edit: dict[str, Any] = {**new, "body": f"* {new.get('body', '')}", "m.new_content": new,
                            "m.relates_to": {"rel_type": "m.replace", "event_id": event_id}, "m.mentions": {}}
    if "formatted_body" in new:
        edit["formatted_body"] = f"* {new['formatted_body']}"
    return edit


class Outbox(DeliveryLoop[Outgoing]):
    """Sends what is queued (``tx.outbox.enqueue``: with ``of_txn`` a message edits (``m.room.message``) or
    redacts (``m.room.redaction``) the earlier message queued under that transaction id — or, when its content
    carries an ``m.annotation`` or ``m.reference`` relation without an event id (a reaction, a poll's end),
    points at that message). The one delivery loop (``engine/run/delivery.py``) runs it, this its sender: each
    run's messages in order (and, in order, a room's messages that belong to no run), different runs and rooms
    at the same time — twenty people answered at once in one busy room are not answered one after another (the
    homeserver orders a room's events itself)."""

    def __init__(self, store: Store, sender: MatrixSender, clock: Clock, *,
                 undelivered: Undelivered | None = None, speaking: Speaking | None = None) -> None:
        super().__init__("outbox", store.of(OutboxTables), self, backoff, clock, listen=store.listen, channel=CHANNEL,
                         batch=CLAIM_BATCH, hide_seconds=HIDE_SECONDS, order=lambda row: (row.room_id, row.run_id))
        self.store = store
        self.sender = sender
        self.undelivered = undelivered
        self.speaking = speaking  # turns a speak row into a voice message (none: dropped)

    async def send_now(self, txn_ids: list[str]) -> None:
        """The fast path: messages just committed (an answer) are sent at once, without waiting for this
        sender's loop to hear of them and find them. The row stays the durable record and its transaction id
        the stable one: taken by the same claim (so the loop cannot send it too), sent and marked the same
        way, retried by the loop if this send fails. A message with an earlier one of its run unsent is left
        to the loop, which keeps each run's order; other runs' messages in the room do not hold it back."""
        try:
            rows = await self.store.of(OutboxTables).claim_these(txn_ids, HIDE_SECONDS)
        except StoreError as exc:
            log.warning("outbox: could not take a fresh message to send at once (%s); the loop will", exc)
            return
        for row in rows:
            await self.deliver_one(row)

    # --- the sender -------------------------------------------------------------------------------------

    async def send(self, row: Outgoing) -> Outcome:
        try:
            found = None
            if row.attempts > 1 and row.event_type != "m.room.redaction":
                # The last attempt's outcome is unknown (it may have landed before the homeserver went
                # away, and a restarted Synapse no longer knows the txn id): look before sending again.
                found = await self.sender.already_sent(row.room_id, row.txn_id, row.sender)
            if found is not None:
                return Sent(found)
            if SPEAK in row.content:
                voiced = await self.speaking.voiced(row.run_id, row.sender, row.content) if self.speaking else None
                if voiced is None:
                    # No endpoint, or it has fallen (said once in the log): the answer stands in text alone.
                    await self.store.of(OutboxTables).failed(row.id, "not spoken: the answer went as text only")
                    return None
                return Sent(await self.sender.send(row.room_id, row.event_type, voiced, row.txn_id, row.sender))
            if row.of_txn is None:
                return Sent(await self.sender.send(row.room_id, row.event_type, row.content, row.txn_id, row.sender))
            sent = await self._related(row)
            return None if sent is None else Sent(sent)
        except MatrixError as exc:
            return Refused(str(exc), exc.retryable, wait=exc.retry_after_ms / 1000 if exc.retry_after_ms else None)

    async def done(self, row: Outgoing, sent: Sent) -> None:
        await self.store.of(OutboxTables).sent(row.id, str(sent.detail))
        log.info("outbox: sent %s", sent.detail, extra=_extra(row))

    async def retry(self, row: Outgoing, after: float, refused: Refused) -> None:
        log.warning("outbox: send failed (%s); retrying in %.1fs", refused.error, after, extra=_extra(row))
        await self.store.of(OutboxTables).retry(row.id, after, refused.error)

    async def failed(self, row: Outgoing, refused: Refused, *, gave_up: bool) -> None:
        if gave_up:
            log.error("outbox: gave up on a message after %d attempts: %s", row.attempts, refused.error,
                      extra=_extra(row))
            await self._failed(row, f"gave up after {row.attempts} attempts: {refused.error}")
        else:
            log.error("outbox: the homeserver refused a message for good: %s", refused.error, extra=_extra(row))
            await self._failed(row, refused.error)

    async def _failed(self, row: Outgoing, why: str) -> None:
        """The message will never be sent: kept with the reason — and, when it was a run's answer or ending, the
        run says so and the room is told (``Undelivered``), in the same commit."""
        async with self.store.transaction("outbox_failed") as tx:
            await tx.of(OutboxTables).failed(row.id, why)
            if self.undelivered is not None and is_outcome(row, SPEAK):
                await self.undelivered(tx, row, why)

    async def _related(self, row: Outgoing) -> str | None:
        """An edit or a redaction of an earlier message: sent once that message has its event id."""
        assert row.of_txn is not None
        earlier = await self.store.of(OutboxTables).sent_as(row.of_txn)
        if earlier is None or earlier.status == "failed":
            await self.store.of(OutboxTables).failed(row.id, f"the message it relates to ({row.of_txn}) was never sent")
            return None
        if earlier.event_id is None:
            await self.store.of(OutboxTables).retry(row.id, RELATED_WAIT, "waiting for the message it relates to")
            return None
        if row.event_type == "m.room.redaction":
            return await self.sender.redact(row.room_id, earlier.event_id, row.txn_id, row.sender)
        rel = row.content.get("m.relates_to")
        if isinstance(rel, dict) and rel.get("rel_type") in POINTING:
            # A keycap on an answer, a poll's end: the relation waits only for the event id.
            pointed = {**rel, "event_id": earlier.event_id}
            if isinstance(rel.get("m.in_reply_to"), dict):  # a thread reply's fallback for unthreaded clients
                pointed["m.in_reply_to"] = {"event_id": earlier.event_id}
            content = {**row.content, "m.relates_to": pointed}
            return await self.sender.send(row.room_id, row.event_type, content, row.txn_id, row.sender)
        return await self.sender.send(row.room_id, row.event_type, edit_of(row.content, earlier.event_id),
                                      row.txn_id, row.sender)
