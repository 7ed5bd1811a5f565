"""Every message to Matrix goes through the ``outbox`` table under a stable transaction id.

The sender takes due rows, PUTs them as the row's sender (a puppet), and records the event id. A 429
waits what the homeserver asked (``retry_after_ms``); a 5xx or an unreachable homeserver backs off and
retries; anything else is refused for good and kept with its reason. A retry after a crash reuses the
same transaction id, so the homeserver answers with the same event rather than posting twice.

The send itself is a plain PUT rather than mautrix's ``send_message_event``: mautrix drops the body
of a 429, so ``retry_after_ms`` could not be honoured through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any
from urllib.parse import quote

import aiohttp
import asyncpg

from engine.errors import MatrixError
from engine.store.db import Database

log = logging.getLogger(__name__)

CLAIM_BATCH = 20
HIDE_SECONDS = 30.0
MAX_BACKOFF = 60.0


def backoff(attempts: int) -> float:
    return float(min(MAX_BACKOFF, 0.5 * 2 ** max(0, attempts - 1)))


class MatrixSender:
    """PUT one event as an appservice user, raising ``MatrixError`` with what the homeserver said."""

    def __init__(self, session: aiohttp.ClientSession, homeserver: str, as_token: str) -> None:
        self._session = session
        self._base = homeserver.rstrip("/")
        self._headers = {"Authorization": f"Bearer {as_token}"}

    async def send(self, room_id: str, event_type: str, content: dict[str, Any], txn_id: str, sender: str) -> str:
        url = (f"{self._base}/_matrix/client/v3/rooms/{quote(room_id, safe='')}/send/"
               f"{quote(event_type, safe='')}/{quote(txn_id, safe='')}")
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
                if retry_ms is None and resp.headers.get("Retry-After", "").isdigit():
                    retry_ms = int(resp.headers["Retry-After"]) * 1000
                raise MatrixError(
                    f"{resp.status} {body.get('errcode', '')}: {body.get('error', '')}".strip(),
                    status=resp.status, errcode=body.get("errcode"),
                    retry_after_ms=retry_ms if isinstance(retry_ms, int) else None,
                )
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise MatrixError(f"homeserver unreachable: {exc!r}") from exc


class Outbox:
    def __init__(self, db: Database, sender: MatrixSender) -> None:
        self.db = db
        self.sender = sender
        self._wake = asyncio.Event()

    @staticmethod
    async def enqueue(
        conn: asyncpg.Connection, q: Any, *, txn_id: str, room_id: str, sender: str,
        event_type: str, content: dict[str, Any], run_id: int | None = None,
    ) -> None:
        await conn.execute(q["enqueue_outbox"], txn_id, run_id, room_id, sender, event_type, content)

    async def run(self, stop: asyncio.Event) -> None:
        """Send what is due, woken by NOTIFY on insert, and otherwise when the next retry falls due."""
        listener = await self.db.pool.acquire()
        try:
            await listener.add_listener("summon_outbox", self._notified)
            while not stop.is_set():
                self._wake.clear()
                try:
                    if await self.send_due():
                        continue
                    wait = await self.db.fetchval("next_outbox_due")
                except (OSError, asyncpg.PostgresError):
                    log.exception("outbox: database error; retrying")
                    wait = 1.0
                timeout = 5.0 if wait is None else max(0.01, min(5.0, float(wait)))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
        finally:
            await listener.remove_listener("summon_outbox", self._notified)
            await self.db.pool.release(listener)

    def _notified(self, *_: object) -> None:
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    async def send_due(self) -> int:
        rows = await self.db.fetch("claim_outbox", CLAIM_BATCH, HIDE_SECONDS)
        for row in rows:
            await self._send_one(row)
        return len(rows)

    async def _send_one(self, row: asyncpg.Record) -> None:
        extra = {"room": row["room_id"], "run": row["run_id"], "txn": row["txn_id"]}
        try:
            event_id = await self.sender.send(
                row["room_id"], row["event_type"], row["content"], row["txn_id"], row["sender"],
            )
        except MatrixError as exc:
            if exc.retryable:
                wait = exc.retry_after_ms / 1000 if exc.retry_after_ms else backoff(row["attempts"])
                log.warning("outbox: send failed (%s); retrying in %.1fs", exc, wait, extra=extra)
                await self.db.execute("outbox_retry", row["id"], wait, str(exc))
            else:
                log.error("outbox: the homeserver refused a message for good: %s", exc, extra=extra)
                await self.db.execute("outbox_failed", row["id"], str(exc))
            return
        await self.db.execute("outbox_sent", row["id"], event_id)
        log.info("outbox: sent %s", event_id, extra=extra)
